package evidence

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// The digest (docs/DESIGN.md step 7, issue 39): the names of an output that a later use
// could be credited to it for, in the order a stub's digest takes them, so that a
// digest of any budget is a prefix of one list and the budget that covers a use is
// known when the use is found (Use.Digest).
//
// The rule, for an output O as it is added:
//
//   - Candidates: the whole names O carries (it is where they are new, or the latest
//     output holding names only outputs held so far: the names a use could be
//     credited to O for) that are Specific under the Tracker's Background; one per
//     compound of O's text: a path by its last two segments ("src/server.go" of
//     "/repo/src/server.go", whose base name the digest then holds too, since a name
//     in the digest is read back by the same tokenizer and a use of any name of the
//     compound is held by it), anything else by its first name.
//   - Order: by specificity over the square of the cost, highest first
//     (specificity: 3 for a path, 2 for a name with '_', '.', '-' or an inner
//     capital, 1 otherwise; ties by position in O). The square, not the cost
//     itself: the agent later uses about as many of the live names of each class
//     (1.0% to 1.9% of them), so a cheap name is worth more than the classes say;
//     on ../shared/sessions and ../shared/corpus (replay-16) the square holds 64.9% and 76.9%
//     of the uses at 128 tokens against 62.8% and 75.8% with the cost, 64.9% and
//     76.5% with its power 1.5, 65.3% and 75.2% ordering by cost alone
//     (docs/EVALUATION.md, "Digest names at their real cost").
//   - Cost: DigestNameTokens(name) tokens a name, the space before it included
//     (a stub joins the names with single spaces); a name's budget is the
//     cumulative cost up to and including it.
//   - Live names only: a stub made at step T leaves out the names that stopped
//     being live for O by T (the agent or the user wrote them since, or a later
//     output carries them: a later use of them is not a use of O), and the names
//     after them move up in their place. A name's budget for a use is its
//     cumulative cost among the names still live at step O+Tracker.DigestFrom
//     (liveNeed), which a stub made then or later holds.
//
// Of the orders tried, this one holds the most uses that could become misses
// (docs/EVALUATION.md, "Stub digests", gives each order's figures).

// DigestNameTokens is the tokens a name costs in a digest: its o200k_base tokens
// with the space before it, tokencount.Count(" "+name). A stub joins its digest's
// names with single spaces, and o200k's pre-split never joins the text on either
// side of such a space into one token, so a digest's names cost exactly the sum of
// theirs: on the 3,404 names of the 265 digests advise gives the first 40 files of
// ../shared/sessions, 11,702 tokens joined and summed alike. (Before replay-16 the
// names were joined with ", " and costed at an estimate, 1 + len/4 rounded up:
// 13,804 estimated for 14,756 real tokens; the comma alone cost one token a
// name. docs/EVALUATION.md, "Digest names at their real cost".)
func DigestNameTokens(name string) int { return tokencount.Count(" " + digestText(name)) }

// digestText is how a digest writes a name: as it is, or, for a quoted phrase of
// several words (a name with a space in it), between double quotes (backquotes
// when it holds a double quote, single quotes when it holds both), so that the
// space-joined names stay apart and the phrase is read back as the same name.
func digestText(name string) string {
	if !strings.ContainsAny(name, " \t") {
		return name
	}
	for _, q := range []string{`"`, "`"} {
		if !strings.Contains(name, q) {
			return q + name + q
		}
	}
	return "'" + name + "'"
}

// digestCand is one candidate of the output being added.
type digestCand struct {
	name  string
	id    int32 // its index entry (Tracker.infos)
	group int32 // the compound it came from
	pos   int   // order of first appearance in the output
	spec  int   // specificity (digestSpec)
	cost  int   // DigestNameTokens(name), counted once by setDigest
}

// digestSpec is a candidate's specificity: 3 for a path, 2 for a name with '_',
// '.', '-' or an inner capital, 1 otherwise.
func digestSpec(name string) int {
	if strings.IndexByte(name, '/') >= 0 {
		return 3
	}
	if strings.ContainsAny(name, "_.-") {
		return 2
	}
	for i := 1; i < len(name); i++ {
		if isUpper(name[i]) && !isUpper(name[i-1]) {
			return 2
		}
	}
	return 1
}

// digestOrder sorts the candidates, given in position order, into digest order
// (see the rule above), in place.
func digestOrder(cands []digestCand) {
	slices.SortStableFunc(cands, func(a, b digestCand) int {
		// Higher specificity over squared cost first: spec_a/cost_a² against
		// spec_b/cost_b², compared exactly in integers; the stable sort keeps
		// position order on ties.
		return b.spec*a.cost*a.cost - a.spec*b.cost*b.cost
	})
}

// shorterRep reports whether suffix, a later whole name of the compound whose
// candidate is cur (a path's suffixes come longest first), replaces it: a path is
// represented by its last two segments.
func shorterRep(cur, suffix string) bool {
	return strings.IndexByte(suffix, '/') >= 0 && strings.HasSuffix(cur, suffix)
}

// DigestKeep is how many times its digest budget (Tracker.DigestTokens, or
// DigestBudgetFor under Tracker.DigestShare) of an output's digest order the
// tracker keeps, so that a digest of that budget stays full when names ahead
// of it stop being live: 2. On ../shared/sessions and ../shared/corpus a digest
// of 128 tokens made three steps after its output holds as many uses with twice
// its budget kept as with the whole order (docs/EVALUATION.md, "Live names in the
// digest"); with the names at their real cost and ordered by squared cost, 4
// holds the same at 128 tokens (64.9% and 76.9% of the uses: "Digest names at
// their real cost").
const DigestKeep = 2

// DefaultDigestFrom is NewTracker's Tracker.DigestFrom: 3 steps, the advisor's
// default Config.ProtectedSteps.
const DefaultDigestFrom = 3

// Digest returns the digest of output key within budget tokens, as a stub made
// now holds it: its candidate names as a stub writes them (a phrase of several
// words quoted: digestText) in digest order, less those no longer live
// for it (Tracker.deaths), while their cumulative DigestNameTokens stay within
// the budget (DigestKeep x the output's DigestBudgetFor bounds what is kept; outputs
// under Tracker.DigestMinTokens keep none). nil for an unknown key, a budget
// under the first live name's cost, or an output with no live candidate kept.
func (t *Tracker) Digest(key string, budget int) []string {
	idx, ok := t.byKey[key]
	if !ok {
		return nil
	}
	deaths := t.deaths[int32(idx)]
	var out []string
	cum := 0
	for i, rest := 0, t.outs[idx].digest; rest != ""; i++ {
		var n string
		var c int
		n, c, rest = nextDigestName(rest)
		if deaths != nil && deaths[i] != 0 {
			continue
		}
		cum += c
		if cum > budget {
			break
		}
		out = append(out, n)
	}
	return out
}

// digestDied records that the name of kept place kpos (nameInfo.kpos) in output
// idx's kept digest stopped being live for it at the current step; nothing for
// kpos 0 (not a kept candidate of the output: a compound's other names leave the
// candidate live, since a later use of it is still the output's).
func (t *Tracker) digestDied(idx int32, kpos uint8) {
	if kpos == 0 {
		return
	}
	o := t.outs[idx]
	deaths := t.deaths[idx]
	if deaths == nil {
		deaths = make([]uint8, digestLen(o.digest))
		t.deaths[idx] = deaths
	}
	if i := int(kpos) - 1; deaths[i] == 0 {
		deaths[i] = deathLate
		if since := t.step - o.step; since < deathLate-1 {
			deaths[i] = uint8(since + 1)
		}
	}
}

// pastKept reports whether a name of digest cost dcost lies past the names
// setDigest keeps for o (DigestKeep x its digest budget): no kept digest holds
// it, and no walk of the kept names would find it.
func (o *outEvidence) pastKept(dcost int32) bool { return dcost > DigestKeep*o.dbudget }

// DigestBudgetFor returns the digest budget, in digest tokens, of an output of
// tokens tokens when the configured budget is fixed tokens and share the share of
// the output it may grow to (advisor.Config.DigestTokens, DigestShare):
// max(fixed, share x tokens, rounded down); 0 when fixed is 0 (digests off).
// With share 0.06, an output of 2,150 tokens or more gets more than 128 (129 for
// 2,150), 600 one of 10,000 (docs/EVALUATION.md, "A digest that grows with the
// output").
func DigestBudgetFor(tokens, fixed int, share float64) int {
	if fixed <= 0 {
		return 0
	}
	return max(fixed, int(share*float64(tokens)))
}

// digestLen is the number of names in an outEvidence.digest string.
func digestLen(s string) int {
	n := 0
	for rest := s; rest != ""; n++ {
		_, _, rest = nextDigestName(rest)
	}
	return n
}

// liveNeed returns the digest budget, in tokens, at which a stub of output idx
// made at step O+Tracker.DigestFrom (or at step use-1, when that comes first)
// holds a name of digest cost dcost: dcost less the costs of the kept names
// ahead of it that stopped being live by then. 0 for dcost 0 (no digest holds
// it); dcost itself for a name past the kept names (no kept digest holds it with
// fewer).
func (t *Tracker) liveNeed(idx int32, dcost int32, use int) int32 {
	deaths := t.deaths[idx]
	o := t.outs[idx]
	if dcost <= 0 || deaths == nil || o.pastKept(dcost) {
		return dcost
	}
	by := min(t.DigestFrom, use-1-o.step) + 1 // a death of 1 + steps since the output
	need, cum := dcost, int32(0)
	for i, rest := 0, o.digest; rest != ""; i++ {
		var nc int
		_, nc, rest = nextDigestName(rest)
		c := int32(nc)
		if cum += c; cum >= dcost {
			return need
		}
		if diedBy(deaths[i], by) {
			need -= c
		}
	}
	return dcost // past the kept names
}

// diedBy reports whether a Tracker.deaths entry d says the name stopped being
// live by the death value by (1 + steps since the output): never for a live name
// (0) or one that stopped late (deathLate).
func diedBy(d uint8, by int) bool { return d != 0 && d != deathLate && int(d) <= by }

// deathLate is a Tracker.deaths entry for a name that stopped being live 253
// steps or more after its output: liveNeed never leaves it out (a stub made
// earlier still held it), Digest always does.
const deathLate = 255

// nextDigestName splits the first name off an outEvidence.digest string (its
// length as a uvarint, its bytes, then its DigestNameTokens as a uvarint): the
// name, a substring, its cost, and the rest.
func nextDigestName(s string) (name string, cost int, rest string) {
	n, i := uvarintAt(s, 0)
	end := min(i+n, len(s))
	cost, next := uvarintAt(s, end)
	return s[i:end], cost, s[next:]
}

// uvarintAt reads the uvarint at s[i:]: its value and the index after it (len(s)
// at most, for a truncated one).
func uvarintAt(s string, i int) (v, next int) {
	for shift := 0; i < len(s); i++ {
		b := s[i]
		v |= int(b&0x7f) << shift
		shift += 7
		if b < 0x80 {
			return v, i + 1
		}
	}
	return v, i
}

// setDigest orders the candidates of the output just added (t.cands, in place),
// sets every name the output carries to its compound's digest cost (the
// cumulative cost up to the compound's candidate; 0 for a compound without one:
// t.candGroups) and keeps the names within t.DigestTokens for oe when its output
// has DigestMinTokens or more.
func (t *Tracker) setDigest(oe *outEvidence, tokens int) {
	for i := range t.cands {
		t.cands[i].cost = DigestNameTokens(t.cands[i].name)
	}
	digestOrder(t.cands)
	oe.dbudget = int32(DigestBudgetFor(tokens, t.DigestTokens, t.DigestShare))
	keep := oe.dbudget > 0 && tokens >= t.DigestMinTokens
	cum := 0
	buf := t.digestBuf[:0]
	kept := 0
	for _, c := range t.cands {
		cum += c.cost
		t.candGroups[c.group] = int32(cum)
		if keep && cum <= DigestKeep*int(oe.dbudget) {
			text := digestText(c.name)
			buf = binary.AppendUvarint(buf, uint64(len(text)))
			buf = append(buf, text...)
			buf = binary.AppendUvarint(buf, uint64(c.cost))
			if kept++; kept <= 255 {
				t.infos[c.id].kpos = uint8(kept)
			}
		}
	}
	oe.digest, t.digestBuf = string(buf), buf // string copies: the names are not kept as pieces of the text
	oe.dfull = cum
	for _, m := range t.carried {
		t.infos[m.idx].dcost = t.candGroups[m.group] // 0 when no candidate
	}
}

// carriedName is a name the output being added carries (scratch of addOutput).
type carriedName struct {
	idx   int32
	group int32
}

// DigestLive returns the cumulative costs, in digest tokens (DigestNameTokens
// each), of the names a stub of output key made at step O+Tracker.DigestFrom
// holds, in digest order: the kept names (DigestKeep x DigestBudgetFor) less those
// no longer live for it by then, as liveNeed counts them. A stub of budget B made
// then holds the names up to the last cost <= B, and its digest costs that much;
// the names of a use of budget Use.Digest <= B are among them. Ascending; nil for
// an unknown key or an output with no live kept name (its stub holds none).
func (t *Tracker) DigestLive(key string) []int {
	idx, ok := t.byKey[key]
	if !ok {
		return nil
	}
	deaths := t.deaths[int32(idx)]
	by := t.DigestFrom + 1 // a death of 1 + steps since the output
	var out []int
	cum := 0
	for i, rest := 0, t.outs[idx].digest; rest != ""; i++ {
		var c int
		_, c, rest = nextDigestName(rest)
		if deaths != nil && diedBy(deaths[i], by) {
			continue
		}
		cum += c
		out = append(out, cum)
	}
	return out
}

// DigestFull returns the cost in digest tokens of output key's whole digest (every
// candidate name; DigestNameTokens each): the most a digest of any budget holds.
// 0 for an unknown key or an output without candidates.
func (t *Tracker) DigestFull(key string) int {
	if idx, ok := t.byKey[key]; ok {
		return t.outs[idx].dfull
	}
	return 0
}
