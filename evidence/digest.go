package evidence

import (
	"encoding/binary"
	"slices"
	"strings"
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
//   - Order: by specificity per token, highest first (specificity: 3 for a path, 2
//     for a name with '_', '.', '-' or an inner capital, 1 otherwise; ties by
//     position in O).
//   - Cost: DigestNameTokens(name) tokens a name, its separator included; a name's
//     budget is the cumulative cost up to and including it.
//
// Of the orders tried, this one holds the most uses that could become misses
// (docs/EVALUATION.md, "Stub digests", gives each order's figures).

// DigestNameTokens is the tokens a name costs in a digest: an estimate of o200k
// tokens, one per 4 bytes rounded up, plus one for the separator ", " (code and
// paths run about 3.5-4.5 bytes a token; the estimate is documented, not measured
// per name, so that a digest's order does not depend on a tokenizer).
func DigestNameTokens(name string) int { return 1 + (len(name)+3)/4 }

// digestCand is one candidate of the output being added.
type digestCand struct {
	name  string
	group int32 // the compound it came from
	pos   int   // order of first appearance in the output
	spec  int   // specificity (digestSpec)
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
		// Higher specificity per token first: spec_a/cost_a against spec_b/cost_b;
		// the stable sort keeps position order on ties.
		return b.spec*DigestNameTokens(a.name) - a.spec*DigestNameTokens(b.name)
	})
}

// shorterRep reports whether suffix, a later whole name of the compound whose
// candidate is cur (a path's suffixes come longest first), replaces it: a path is
// represented by its last two segments.
func shorterRep(cur, suffix string) bool {
	return strings.IndexByte(suffix, '/') >= 0 && strings.HasSuffix(cur, suffix)
}

// Digest returns the digest of output key within budget tokens: its candidate
// names in digest order while their cumulative DigestNameTokens stay within the
// budget, as kept when the output was added (Tracker.DigestTokens bounds what is
// kept; outputs under Tracker.DigestMinTokens keep none). nil for an unknown key,
// a budget under the first name's cost, or an output with no candidate.
func (t *Tracker) Digest(key string, budget int) []string {
	idx, ok := t.byKey[key]
	if !ok {
		return nil
	}
	var out []string
	cum := 0
	for rest := t.outs[idx].digest; rest != ""; {
		var n string
		n, rest = nextDigestName(rest)
		cum += DigestNameTokens(n)
		if cum > budget {
			break
		}
		out = append(out, n)
	}
	return out
}

// nextDigestName splits the first name off an outEvidence.digest string (its
// length as a uvarint, then its bytes): the name, a substring, and the rest.
func nextDigestName(s string) (name, rest string) {
	n, shift, i := 0, 0, 0
	for ; i < len(s); i++ {
		b := s[i]
		n |= int(b&0x7f) << shift
		shift += 7
		if b < 0x80 {
			i++
			break
		}
	}
	end := min(i+n, len(s))
	return s[i:end], s[end:]
}

// setDigest orders the candidates of the output just added (t.cands, in place),
// sets every name the output carries to its compound's digest cost (the
// cumulative cost up to the compound's candidate; 0 for a compound without one:
// t.candGroups) and keeps the names within t.DigestTokens for oe when its output
// has DigestMinTokens or more.
func (t *Tracker) setDigest(oe *outEvidence, tokens int) {
	digestOrder(t.cands)
	keep := t.DigestTokens > 0 && tokens >= t.DigestMinTokens
	cum := 0
	buf := t.digestBuf[:0]
	for _, c := range t.cands {
		cum += DigestNameTokens(c.name)
		t.candGroups[c.group] = int32(cum)
		if keep && cum <= t.DigestTokens {
			buf = binary.AppendUvarint(buf, uint64(len(c.name)))
			buf = append(buf, c.name...)
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

// DigestFull returns the cost in digest tokens of output key's whole digest (every
// candidate name; DigestNameTokens each): the most a digest of any budget holds.
// 0 for an unknown key or an output without candidates.
func (t *Tracker) DigestFull(key string) int {
	if idx, ok := t.byKey[key]; ok {
		return t.outs[idx].dfull
	}
	return 0
}
