package tuning

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// DigestBudgets are the fixed stub digest budgets, in tokens, that DigestCoverage
// measures and the digest sweep prices (issue 39: 0, 32, 64, 128 and 256).
var DigestBudgets = []int{0, 32, 64, 128, 256}

// DigestShares are the shares of a long output a 128-token digest budget grows
// to (advisor.Config.DigestShare) that DigestCoverage measures after
// DigestBudgets: 4%, 6% and 8% (docs/EVALUATION.md, "A digest that grows with
// the output").
var DigestShares = []float64{0.04, 0.06, 0.08}

// DigestSize is a digest budget DigestCoverage measures: Tokens, growing to
// Share of a long output (evidence.DigestBudgetFor: max(Tokens, Share x the
// output's tokens)); Share 0 for the fixed budget Tokens.
type DigestSize struct {
	Tokens int     `json:"tokens"`
	Share  float64 `json:"share,omitempty"`
}

// String is the size as calibrate prints it: "128", or "max(128,6%)"; "0" for
// no digest whatever the share (evidence.DigestBudgetFor).
func (d DigestSize) String() string {
	if d.Share == 0 || d.Tokens == 0 {
		return strconv.Itoa(d.Tokens)
	}
	return fmt.Sprintf("max(%d,%.4g%%)", d.Tokens, 100*d.Share)
}

// short is the size as a column of calibrate's digest table heads it: "128", or
// "+6%" for 128 growing to 6% of a long output.
func (d DigestSize) short() string {
	if d.Share == 0 || d.Tokens == 0 {
		return strconv.Itoa(d.Tokens)
	}
	return fmt.Sprintf("+%.3g%%", 100*d.Share)
}

// grows returns the least output size, in tokens, whose budget under d passes
// d.Tokens (evidence.DigestBudgetFor, which grows with the size); 0 for a fixed
// size.
func (d DigestSize) grows() int {
	if d.Share <= 0 || d.Tokens <= 0 {
		return 0
	}
	// share x n > Tokens from n = (Tokens+1)/share on: search up to just past it.
	limit := int(math.Ceil(float64(d.Tokens+1)/d.Share)) + 1
	return sort.Search(limit, func(n int) bool { return evidence.DigestBudgetFor(n, d.Tokens, d.Share) > d.Tokens })
}

// DigestSizes returns the sizes DigestCoverage measures, in its columns' order:
// each of DigestBudgets, then 128 tokens growing to each of DigestShares.
func DigestSizes() []DigestSize {
	var out []DigestSize
	for _, b := range DigestBudgets {
		out = append(out, DigestSize{Tokens: b})
	}
	for _, s := range DigestShares {
		out = append(out, DigestSize{Tokens: digestBound, Share: s})
	}
	return out
}

// digestBound is issue 39's bound on the recommended digest budget: 128 tokens.
const digestBound = 128

// Uses that could become stub misses, as issue 39 measured them: a counting name
// use of an output of at least DigestMinOutput tokens, at least DigestMinAge steps
// after the output.
const (
	DigestMinOutput = 200 // tokens: docs/DESIGN.md's minimum candidate size
	DigestMinAge    = 4   // steps: past the default protection of the last 3 steps
)

// DigestRow is the digest coverage of one agent format (or of all: Format "all"):
// over every output whose stub would carry a digest (DigestSet, inline in JSON),
// and over the stubs the replay's advisor applied (Applied).
type DigestRow struct {
	Format string `json:"format"`
	DigestSet
	// Applied is the same measured over the outputs the replayed advisor pruned
	// (replay.OutputFacts.PrunedAt > 0, rules' prunes left out: their stubs carry no
	// digest) and their counting name uses at or after the prune, whatever their
	// size or age: issue 39's "uses of pruned outputs" and "the tokens they
	// replace". The set of outputs is the one the replay pruned at its own digest
	// budget; every budget's row measures that same set. Empty for a replay that
	// applied nothing (replay --asks-only).
	Applied DigestSet `json:"applied"`
}

// DigestSet is the digest coverage of a set of outputs.
type DigestSet struct {
	// Uses counts the counting name uses (see DigestMinOutput, DigestMinAge for
	// the candidates' set); Held[i] those a digest of DigestSizes()[i]
	// holds (0 < evidence.Use.Digest <= the stub's digest budget).
	Uses int   `json:"uses"`
	Held []int `json:"held"`
	// Previewed counts those Gemini CLI's blind preview (the output's first and
	// last 250 characters: evidence.Use.Preview) holds, for comparison.
	Previewed int `json:"previewed"`
	// Names counts the names of those uses (each compound of the agent's words
	// that made a use: evidence.Use.NameDigests), the unit issue 39's own
	// measurement counted ("shaped-name uses kept"); NamesHeld[i] those a digest
	// of DigestBudgets[i] tokens holds, NamesPreviewed those the blind preview
	// holds. A use of several names is held (Held) only when all of them are.
	Names          int   `json:"names"`
	NamesHeld      []int `json:"names_held"`
	NamesPreviewed int   `json:"names_previewed"`
	// Outputs and Tokens count the outputs (for the candidates' set: those whose
	// stub carries a digest, candidates the rules do not kill: replay.StubDigest;
	// the others' uses are no stub misses either) and their tokens; Stub[i] is
	// their stubs' tokens with a digest of DigestSizes()[i] at most
	// (replay.StubTokensAt): the stub without one (advisor.StubTokens) plus the
	// digest a stub made protected_steps after the output holds within its
	// budget under the replay's StubMaxShare (advisor.DigestBudget;
	// OutputFacts.DigestCost).
	Outputs int   `json:"outputs"`
	Tokens  int   `json:"tokens"`
	Stub    []int `json:"stub_tokens"`
}

func newDigestSet(n int) DigestSet {
	return DigestSet{Held: make([]int, n), NamesHeld: make([]int, n), Stub: make([]int, n)}
}

// addOutput counts an output of tokens whose stubs at the DigestSizes are stubs.
func (d *DigestSet) addOutput(tokens int, stubs []int) {
	d.Outputs++
	d.Tokens += tokens
	for i, s := range stubs {
		d.Stub[i] += s
	}
}

// addUse counts use u, held by the stubs of digest budgets budgets (one per
// DigestBudgets): the use (u.Digest, u.Preview) and each of its names
// (u.NameDigests, u.NamesPreviewed).
func (d *DigestSet) addUse(u *evidence.Use, budgets []int) {
	d.Uses++
	if u.Preview {
		d.Previewed++
	}
	d.Names += len(u.NameDigests)
	d.NamesPreviewed += u.NamesPreviewed
	for i, budget := range budgets {
		if u.Digest > 0 && u.Digest <= budget {
			d.Held[i]++
		}
		for _, need := range u.NameDigests {
			if need > 0 && need <= budget {
				d.NamesHeld[i]++
			}
		}
	}
}

// DigestCoverage sums DigestRows over replays.
type DigestCoverage struct {
	Sizes []DigestSize // DigestSizes
	by    map[string]*DigestRow
	all   DigestRow
}

// NewDigestCoverage returns an empty coverage over DigestSizes.
func NewDigestCoverage() *DigestCoverage {
	c := &DigestCoverage{Sizes: DigestSizes(), by: map[string]*DigestRow{}}
	c.all = c.newRow("all")
	return c
}

func (c *DigestCoverage) newRow(format string) DigestRow {
	return DigestRow{Format: format, DigestSet: newDigestSet(len(c.Sizes)), Applied: newDigestSet(len(c.Sizes))}
}

// Add counts one replay.
func (c *DigestCoverage) Add(rec *replay.Record) {
	f := string(rec.Format)
	row := c.by[f]
	if row == nil {
		r := c.newRow(f)
		row = &r
		c.by[f] = row
	}
	cfg := rec.Settings.Config
	rows := []*DigestRow{row, &c.all}
	// budgets[key][i]: the digest budget of the output's stub at c.Sizes[i],
	// for the outputs whose stub carries a digest (replay.StubDigest).
	budgets := make(map[string][]int, len(rec.Outputs))
	outs := make(map[string]*replay.OutputFacts, len(rec.Outputs))
	for i := range rec.Outputs {
		o := &rec.Outputs[i]
		if o.CandidateFrom == 0 || o.RuleDeadAt > 0 {
			continue // no stub, or one without a digest: no stub miss either way
		}
		outs[o.Key] = o
		bs, stubs := make([]int, len(c.Sizes)), make([]int, len(c.Sizes))
		for i, z := range c.Sizes {
			stubs[i], bs[i] = replay.StubTokensAt(cfg, o, z.Tokens, z.Share)
		}
		budgets[o.Key] = bs
		for _, r := range rows {
			r.addOutput(o.Tokens, stubs)
			if o.PrunedAt > 0 {
				r.Applied.addOutput(o.Tokens, stubs)
			}
		}
	}
	for i := range rec.Evidence {
		u := &rec.Evidence[i]
		o := outs[u.Key]
		// Stored rows keep the proof, not the kind: name uses prove by a name.
		if o == nil || !u.Counts() || !strings.HasPrefix(u.Proof, "name ") {
			continue
		}
		for _, r := range rows {
			if o.Tokens >= DigestMinOutput && u.Step-o.Step >= DigestMinAge {
				r.addUse(u, budgets[u.Key])
			}
			if o.PrunedAt > 0 && u.Step >= o.PrunedAt {
				r.Applied.addUse(u, budgets[u.Key])
			}
		}
	}
}

// Result returns the rows, by format name, then "all".
func (c *DigestCoverage) Result() []*DigestRow {
	var out []*DigestRow
	for _, r := range c.by {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Format < out[j].Format })
	all := c.all
	return append(out, &all)
}

// Recommend returns the digest budget the measurements recommend (issue 39), from
// the stubs the replay applied when any of them was used later (DigestRow.Applied:
// "the uses of pruned outputs" and "the tokens they replace"), else from every
// output whose stub would carry a digest: the smallest fixed budget up to 128
// tokens (issue 39's bound) whose digests hold at least 75% of the uses with stubs
// at most 10% of the tokens they replace; else the smallest share a 128-token
// budget grows to (DigestShares) that does, its reason saying that it passes 128
// tokens on outputs over 128/share tokens; else the fixed budget up to 128 that
// holds the most with stubs at most 10% (256 may hold more: the table shows it);
// ok is false when no budget up to 128 keeps stubs within 10% (or nothing was
// measured).
func (c *DigestCoverage) Recommend() (size DigestSize, reason string, ok bool) {
	a, over := c.all.Applied, "the stubs applied"
	if a.Uses == 0 {
		a, over = c.all.DigestSet, "every output a stub with a digest could replace"
	}
	if a.Uses == 0 || a.Tokens == 0 {
		return DigestSize{}, "no use or output measured", false
	}
	held := func(i int) float64 { return float64(a.Held[i]) / float64(a.Uses) }
	share := func(i int) float64 { return float64(a.Stub[i]) / float64(a.Tokens) }
	best := -1
	for i, z := range c.Sizes {
		if z.Share != 0 || z.Tokens > digestBound || share(i) > 0.10 {
			continue
		}
		if held(i) >= 0.75 {
			return z, fmt.Sprintf("over %s: the smallest budget holding >= 75%% of the uses (%.1f%%) with stubs at %.1f%% of the tokens they replace", over, 100*held(i), 100*share(i)), true
		}
		if best < 0 || a.Held[i] > a.Held[best] {
			best = i
		}
	}
	for i, z := range c.Sizes {
		if z.Share == 0 || share(i) > 0.10 || held(i) < 0.75 {
			continue
		}
		return z, fmt.Sprintf("over %s: no budget up to %d holds 75%% of the uses with stubs within 10%%; %d tokens growing to %.4g%% of a long output holds %.1f%% with stubs at %.1f%% of the tokens they replace (past issue 39's %d tokens on outputs of %d tokens or more)",
			over, digestBound, z.Tokens, 100*z.Share, 100*held(i), 100*share(i), digestBound, z.grows()), true
	}
	if best < 0 {
		return DigestSize{}, fmt.Sprintf("over %s: every budget up to 128's stubs pass 10%% of the tokens they replace", over), false
	}
	return c.Sizes[best], fmt.Sprintf("over %s: no budget up to 128 holds 75%% of the uses with stubs within 10%%; this one holds the most (%.1f%%) of those within 10%%", over, 100*held(best)), true
}

// Print writes the coverage as two tables, over every output a stub with a digest
// could replace and over the stubs the replay applied: per format, the uses, the
// share held at each budget, the stubs' share of the tokens they replace at each
// budget and the share Gemini CLI's blind preview holds; then the recommendation.
func (c *DigestCoverage) Print(w io.Writer) {
	rows := c.Result()
	fmt.Fprintf(w, "stub digests: name uses that could become misses (outputs of %d+ tokens, used %d+ steps later) held by a digest, and stub tokens over the tokens replaced, at digest budgets %v tokens (columns in that order; +6%%: max(128, 6%% of the output))\n", DigestMinOutput, DigestMinAge, c.Sizes)
	printDigestSets(w, rows, c.Sizes, func(r *DigestRow) *DigestSet { return &r.DigestSet })
	if c.all.Applied.Outputs > 0 {
		fmt.Fprintf(w, "over the stubs the replay applied (%d outputs): their name uses at or after the prune held by a digest, and stub tokens over the tokens replaced\n", c.all.Applied.Outputs)
		printDigestSets(w, rows, c.Sizes, func(r *DigestRow) *DigestSet { return &r.Applied })
	}
	if z, why, ok := c.Recommend(); ok {
		fmt.Fprintf(w, "recommended digest budget: %s tokens (%s)\n", z, why)
	} else {
		fmt.Fprintf(w, "no digest budget recommended: %s\n", why)
	}
}

// printDigestSets writes two tables over the set set picks of each row: per use
// (the uses, the share held at each budget, the stubs' share of the tokens they
// replace at each budget, the share Gemini CLI's blind preview holds), then per
// name (the names, the share held at each budget, the preview's share).
func printDigestSets(w io.Writer, rows []*DigestRow, sizes []DigestSize, set func(*DigestRow) *DigestSet) {
	col := 7*len(sizes) - 1 // " 12.3%" a size
	labels := ""
	for _, z := range sizes {
		labels += fmt.Sprintf(" %6s", z.short())
	}
	fmt.Fprintf(w, "  %-16s %6s  %-*s  %-*s  %s\n", "format", "uses", col, "held", col, "stub share", "250+250 preview")
	fmt.Fprintf(w, "  %-16s %6s %s %s\n", "", "budget", labels, labels)
	for _, row := range rows {
		r := set(row)
		share := ""
		for i := range r.Stub {
			if r.Tokens > 0 {
				share += fmt.Sprintf(" %5.1f%%", 100*float64(r.Stub[i])/float64(r.Tokens))
			}
		}
		fmt.Fprintf(w, "  %-16s %6d  %-*s  %-*s  %s\n", row.Format, r.Uses, col, heldShares(r.Held, r.Uses), col, share, shareOf(r.Previewed, r.Uses))
	}
	fmt.Fprintf(w, "  per name (each name a use wrote, held when the digest holds it; issue 39's unit):\n")
	fmt.Fprintf(w, "  %-16s %6s  %-*s  %s\n", "format", "names", col, "held", "250+250 preview")
	fmt.Fprintf(w, "  %-16s %6s %s\n", "", "budget", labels)
	for _, row := range rows {
		r := set(row)
		fmt.Fprintf(w, "  %-16s %6d  %-*s  %s\n", row.Format, r.Names, col, heldShares(r.NamesHeld, r.Names), shareOf(r.NamesPreviewed, r.Names))
	}
}

// heldShares formats held[i] over n for each budget, "-" each when n is 0.
func heldShares(held []int, n int) string {
	out := ""
	for i := range held {
		if n > 0 {
			out += fmt.Sprintf(" %5.1f%%", 100*float64(held[i])/float64(n))
		} else {
			out += "      -"
		}
	}
	return out
}

// shareOf formats k over n as a percentage, "-" when n is 0.
func shareOf(k, n int) string {
	if n == 0 {
		return "     -"
	}
	return fmt.Sprintf("%5.1f%%", 100*float64(k)/float64(n))
}
