package tuning

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// DigestBudgets are the stub digest budgets, in tokens, that DigestCoverage
// measures (issue 39: 0, 32, 64, 128 and 256).
var DigestBudgets = []int{0, 32, 64, 128, 256}

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
	// the candidates' set); Held[i] those a digest of DigestBudgets[i] tokens
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
	// their stubs' tokens with a digest of DigestBudgets[i] tokens at most
	// (replay.StubTokensAt): the stub without one (advisor.StubTokens) plus the
	// digest a stub made protected_steps after the output holds within its
	// budget under the replay's StubMaxShare (advisor.DigestBudget;
	// OutputFacts.DigestCost).
	Outputs int   `json:"outputs"`
	Tokens  int   `json:"tokens"`
	Stub    []int `json:"stub_tokens"`
}

func newDigestSet() DigestSet {
	return DigestSet{Held: make([]int, len(DigestBudgets)), NamesHeld: make([]int, len(DigestBudgets)), Stub: make([]int, len(DigestBudgets))}
}

// addOutput counts an output of tokens whose stubs at DigestBudgets are stubs.
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
	Budgets []int // DigestBudgets
	by      map[string]*DigestRow
	all     DigestRow
}

// NewDigestCoverage returns an empty coverage over DigestBudgets.
func NewDigestCoverage() *DigestCoverage {
	return &DigestCoverage{Budgets: DigestBudgets, by: map[string]*DigestRow{}, all: newDigestRow("all")}
}

func newDigestRow(format string) DigestRow {
	return DigestRow{Format: format, DigestSet: newDigestSet(), Applied: newDigestSet()}
}

// Add counts one replay.
func (c *DigestCoverage) Add(rec *replay.Record) {
	f := string(rec.Format)
	row := c.by[f]
	if row == nil {
		r := newDigestRow(f)
		row = &r
		c.by[f] = row
	}
	cfg := rec.Settings.Config
	rows := []*DigestRow{row, &c.all}
	// budgets[key][i]: the digest budget of the output's stub at DigestBudgets[i],
	// for the outputs whose stub carries a digest (replay.StubDigest).
	budgets := make(map[string][]int, len(rec.Outputs))
	outs := make(map[string]*replay.OutputFacts, len(rec.Outputs))
	for i := range rec.Outputs {
		o := &rec.Outputs[i]
		if o.CandidateFrom == 0 || o.RuleDeadAt > 0 {
			continue // no stub, or one without a digest: no stub miss either way
		}
		outs[o.Key] = o
		bs, stubs := make([]int, len(DigestBudgets)), make([]int, len(DigestBudgets))
		for i, b := range DigestBudgets {
			stubs[i], bs[i] = replay.StubTokensAt(cfg, o, b)
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
// output whose stub would carry a digest: the smallest of DigestBudgets up to 128
// tokens (issue 39's bound) whose digests hold at least 75% of the uses with stubs
// at most 10% of the tokens they replace; else the one up to 128 that holds the
// most with stubs at most 10% (256 may hold more: the table shows it); ok is false
// when no budget up to 128 keeps stubs within 10% (or nothing was measured).
func (c *DigestCoverage) Recommend() (budget int, reason string, ok bool) {
	a, over := c.all.Applied, "the stubs applied"
	if a.Uses == 0 {
		a, over = c.all.DigestSet, "every output a stub with a digest could replace"
	}
	if a.Uses == 0 || a.Tokens == 0 {
		return 0, "no use or output measured", false
	}
	best := -1
	for i, b := range DigestBudgets {
		held := float64(a.Held[i]) / float64(a.Uses)
		share := float64(a.Stub[i]) / float64(a.Tokens)
		if share > 0.10 {
			continue
		}
		if b > 128 {
			continue // issue 39: the recommended budget is at most 128 tokens
		}
		if held >= 0.75 {
			return b, fmt.Sprintf("over %s: the smallest budget holding >= 75%% of the uses (%.1f%%) with stubs at %.1f%% of the tokens they replace", over, 100*held, 100*share), true
		}
		if best < 0 || a.Held[i] > a.Held[best] {
			best = i
		}
	}
	if best < 0 {
		return 0, fmt.Sprintf("over %s: every budget up to 128's stubs pass 10%% of the tokens they replace", over), false
	}
	return DigestBudgets[best], fmt.Sprintf("over %s: no budget up to 128 holds 75%% of the uses with stubs within 10%%; this one holds the most (%.1f%%) of those within 10%%", over, 100*float64(a.Held[best])/float64(a.Uses)), true
}

// Print writes the coverage as two tables, over every output a stub with a digest
// could replace and over the stubs the replay applied: per format, the uses, the
// share held at each budget, the stubs' share of the tokens they replace at each
// budget and the share Gemini CLI's blind preview holds; then the recommendation.
func (c *DigestCoverage) Print(w io.Writer) {
	rows := c.Result()
	fmt.Fprintf(w, "stub digests: name uses that could become misses (outputs of %d+ tokens, used %d+ steps later) held by a digest, and stub tokens over the tokens replaced, at digest budgets %v tokens\n", DigestMinOutput, DigestMinAge, DigestBudgets)
	printDigestSets(w, rows, func(r *DigestRow) *DigestSet { return &r.DigestSet })
	if c.all.Applied.Outputs > 0 {
		fmt.Fprintf(w, "over the stubs the replay applied (%d outputs): their name uses at or after the prune held by a digest, and stub tokens over the tokens replaced\n", c.all.Applied.Outputs)
		printDigestSets(w, rows, func(r *DigestRow) *DigestSet { return &r.Applied })
	}
	if b, why, ok := c.Recommend(); ok {
		fmt.Fprintf(w, "recommended digest budget: %d tokens (%s)\n", b, why)
	} else {
		fmt.Fprintf(w, "no digest budget recommended: %s\n", why)
	}
}

// printDigestSets writes two tables over the set set picks of each row: per use
// (the uses, the share held at each budget, the stubs' share of the tokens they
// replace at each budget, the share Gemini CLI's blind preview holds), then per
// name (the names, the share held at each budget, the preview's share).
func printDigestSets(w io.Writer, rows []*DigestRow, set func(*DigestRow) *DigestSet) {
	fmt.Fprintf(w, "  %-16s %6s  %-34s  %-34s  %s\n", "format", "uses", "held", "stub share", "250+250 preview")
	for _, row := range rows {
		r := set(row)
		share := ""
		for i := range DigestBudgets {
			if r.Tokens > 0 {
				share += fmt.Sprintf(" %5.1f%%", 100*float64(r.Stub[i])/float64(r.Tokens))
			}
		}
		fmt.Fprintf(w, "  %-16s %6d  %-34s  %-34s  %s\n", row.Format, r.Uses, heldShares(r.Held, r.Uses), share, shareOf(r.Previewed, r.Uses))
	}
	fmt.Fprintf(w, "  per name (each name a use wrote, held when the digest holds it; issue 39's unit):\n")
	fmt.Fprintf(w, "  %-16s %6s  %-34s  %s\n", "format", "names", "held", "250+250 preview")
	for _, row := range rows {
		r := set(row)
		fmt.Fprintf(w, "  %-16s %6d  %-34s  %s\n", row.Format, r.Names, heldShares(r.NamesHeld, r.Names), shareOf(r.NamesPreviewed, r.Names))
	}
}

// heldShares formats held[i] over n for each budget, "-" each when n is 0.
func heldShares(held []int, n int) string {
	out := ""
	for i := range DigestBudgets {
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
