package advisor

import (
	"fmt"

	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// lastResort returns the outputs of the last K steps (Config.ProtectedSteps) whose
// only protection is that recency (not a recall or re-read window, not one that
// never ends) and that the agent's compaction would drop for good, with the stubs
// a rewrite forced by the hard limit would give them (planner.Input.Protected:
// taken last, when the pending prunes and the other candidates do not reach the
// low-water mark). A stub keeps such an output recallable; the compaction it helps
// avoid would not (docs/EVALUATION.md, "The last resort before a compaction"). It
// looks only at the newest outputs, from the end of the session back.
func (a *Advisor) lastResort(st *state, sp *stepState) []extraCandidate {
	tail, keepFrom := a.compactionTail(st, sp)
	var out []extraCandidate
	for i := len(st.outs) - 1; i >= st.compactOuts && sp.T-st.outs[i].step <= a.Config.ProtectedSteps; i-- {
		o := st.outs[i]
		if o.decision != DecisionProtected || o.fixed != "" || o.protectTil >= sp.T || o.msg < st.compactAt ||
			o.step >= keepFrom || st.ctxOffset(o.msg) >= tail {
			continue
		}
		reason := fmt.Sprintf("hard limit, last resort: %s", o.reason)
		stub := a.stubText(st, o, "hard limit, last resort")
		n := tokencount.Count(stub)
		if len(stub) >= o.bytes || n >= o.tokens {
			continue
		}
		keep := 1.0
		if o.lastOKAsk > 0 {
			keep = o.score
		}
		out = append(out, extraCandidate{o: o, reason: reason, stub: stub, n: n, keep: keep})
	}
	return out
}

// compactionTail returns what the session's agent keeps when it compacts at this
// step (CompactionPoint's KeepTokens, KeepFraction, KeepSteps, as
// calibrate.Compaction models it): the context offset, in tokens, where the kept
// tail begins, and the first step whose outputs it keeps whole. An unknown agent,
// or a limit from the request's own trigger, keeps nothing but the summary.
func (a *Advisor) compactionTail(st *state, sp *stepState) (tail, keepFrom int) {
	ctx := st.ctxTokens
	p, ok := a.Config.PointOf(a.Config.Agent)
	if !ok || sp.limit.Source == "trigger" {
		return ctx, sp.T + 1
	}
	keep := max(p.KeepTokens, int(p.KeepFraction*float64(ctx)))
	keepFrom = sp.T + 1
	if p.KeepSteps > 0 {
		keepFrom = sp.T - p.KeepSteps
	}
	return ctx - min(keep, ctx), keepFrom
}
