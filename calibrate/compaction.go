package calibrate

import (
	"fmt"
	"math"
)

// Compaction is how a session's agent compacts its context (docs/DESIGN.md "Compaction:
// what pruning is for"): when the context it is about to send passes Point, it
// first makes one summarising call over that context, whose answer (SummaryTokens)
// replaces everything but the tail it keeps; every output not in that tail is gone
// for good (no stub, no recall). The simulation models it for keep-all, every
// baseline, every anchor and the advisor alike (simulate).
type Compaction struct {
	// Point is the context size in tokens past which the agent compacts; 0: the
	// session never compacts (nothing modelled).
	Point int `json:"point"`
	// Margin is one step's growth the planner keeps free below Point: the hard
	// limit is Point - max(Margin, the largest growth of one step so far), as the
	// live advisor's (advisor.Config.HardLimitFor), or Point - Margin for an
	// agent that counts its last usage (CountsLastUsage: the margin is for the
	// answer); 0 takes the Options.HardLimit instead.
	Margin int `json:"margin"`
	// SummaryTokens is the size of the summary the compaction leaves, in tokens.
	SummaryTokens int `json:"summary_tokens"`
	// KeepTokens, KeepFraction and KeepSteps say what the agent keeps besides the
	// summary: the newest KeepTokens tokens of the context, or the newest
	// KeepFraction of it, or the messages of the last KeepSteps calls; the largest
	// of those that are set (0: none; all 0: the summary alone). An output is kept
	// when its message lies wholly in that tail.
	KeepTokens   int     `json:"keep_tokens"`
	KeepFraction float64 `json:"keep_fraction"`
	KeepSteps    int     `json:"keep_steps"`
	// Decides says which count of the context the agent compares with Point
	// before call s (docs/EVALUATION.md, "When the agent decides to compact"):
	//   - DecidesSent ("", the default): what call s sends after the proxy's
	//     rewrite of it, the most a proxy could do;
	//   - DecidesUsage: the usage the provider reported for call s-1, what it
	//     was sent plus its answer (the growth from call s-1 to s less the tool
	//     outputs that came since): Codex, opencode, pi and Gemini CLI count
	//     their context from the last usage; a rewrite at call s comes too late
	//     and one at s-1 counts;
	//   - DecidesEstimate: call s's context before the proxy's rewrite of it (the
	//     last usage plus an estimate of what came since, as an agent that counts
	//     its next request before it sends it): a rewrite at call s comes too late;
	//   - DecidesTurn: the usage, counted only before a call that starts a turn
	//     (Calls.TurnStart: pi checks when its run ends and before a new
	//     prompt); at every call when the session's turns are unknown.
	Decides string `json:"decides,omitempty"`
	// Window is the most a request may carry, in tokens (the model's context
	// window; 0: unbounded). An agent that counts only between turns
	// (DecidesTurn) sends past its point within a turn; past the window the
	// provider refuses the request and the agent compacts then (pi's overflow
	// recovery).
	Window int `json:"window,omitempty"`
}

// The counts an agent may compare with its compaction point (Compaction.Decides).
const (
	DecidesSent     = ""
	DecidesUsage    = "usage"
	DecidesEstimate = "estimate"
	DecidesTurn     = "turn"
)

// CountsLastUsage reports whether the agent counts its last usage (DecidesUsage,
// or DecidesTurn between turns): its hard limit's margin is then for the answer
// alone.
func (c Compaction) CountsLastUsage() bool {
	return c.Decides == DecidesUsage || c.Decides == DecidesTurn
}

// Validate reports a negative size, a fraction outside [0,1] or an unknown
// Decides (wrapping ErrInvalid).
func (c Compaction) Validate() error {
	bad := func(field string, v any) error {
		return fmt.Errorf("%w: compaction %s = %v", ErrInvalid, field, v)
	}
	switch {
	case c.Point < 0:
		return bad("Point", c.Point)
	case c.Margin < 0:
		return bad("Margin", c.Margin)
	case c.SummaryTokens < 0:
		return bad("SummaryTokens", c.SummaryTokens)
	case c.KeepTokens < 0:
		return bad("KeepTokens", c.KeepTokens)
	case math.IsNaN(c.KeepFraction) || c.KeepFraction < 0 || c.KeepFraction > 1:
		return bad("KeepFraction", c.KeepFraction)
	case c.KeepSteps < 0:
		return bad("KeepSteps", c.KeepSteps)
	case c.Window < 0:
		return bad("Window", c.Window)
	case c.Decides != DecidesSent && c.Decides != DecidesUsage && c.Decides != DecidesEstimate && c.Decides != DecidesTurn:
		return bad("Decides", c.Decides)
	}
	return nil
}

// tailStart returns where, in the context of ctx tokens as sent at call v.s, the
// tail the agent keeps begins (tokens before it; ctx when it keeps nothing).
func (c Compaction) tailStart(v *view, ctx int) int {
	keep := max(c.KeepTokens, int(c.KeepFraction*float64(ctx)))
	start := ctx - min(keep, ctx)
	if c.KeepSteps > 0 {
		for j := 0; j < v.visible; j++ {
			if !v.gone[j] && v.out(j).Step >= v.s-c.KeepSteps {
				start = min(start, v.offset(j))
				break
			}
		}
	}
	return start
}

// compact models the agent's compaction before call v.s of a context of ctx
// tokens: every visible output and every copy a recall brought back whose message
// starts before the kept tail is gone (a later use of it is a compaction miss,
// registered in lost at the step of its first use from v.s on, unless a copy in the
// tail still brings it back: drop), and the context becomes the summary plus the
// tail. It returns the context after the compaction, in tokens.
func (v *view) compact(ctx int, lost map[int][]int) int {
	c := v.sd.compaction
	start := v.tailStart(ctx)
	var outs, copies []int
	for j := 0; j < v.visible; j++ {
		if !v.gone[j] && v.offset(j) < start {
			outs = append(outs, j)
		}
	}
	for i, a := range v.appends {
		if !a.gone && v.copyOffset(i) < start {
			copies = append(copies, i)
		}
	}
	v.drop(outs, copies, lost)
	v.cut += start - c.SummaryTokens
	return ctx - start + c.SummaryTokens
}

// tailStart is the session's Compaction.tailStart.
func (v *view) tailStart(ctx int) int { return v.sd.compaction.tailStart(v, ctx) }

// hardLimit returns the planner's hard limit at call v.s: the compaction point
// less the larger of the margin and the largest one-step growth of the context so
// far, when the session's agent compacts and a margin is set; else
// Options.HardLimit.
func (v *view) hardLimit() int {
	c := v.sd.compaction
	switch {
	case c.Point <= 0 || c.Margin <= 0:
		return v.e.opts.HardLimit
	case c.CountsLastUsage():
		// The margin is for the answer, not a step's growth
		// (advisor.Config.HardLimitFor).
		return max(c.Point-c.Margin, 1)
	}
	return max(c.Point-max(c.Margin, v.sd.growth[v.s-1]), 1)
}

// lastResortLimit is the context size past which the last resort may act at call
// v.s (Options.LastResort): the hard limit with the margin alone, not the largest
// one-step growth so far, as the live advisor's; hardLimit when no margin is set.
func (v *view) lastResortLimit() int {
	c := v.sd.compaction
	if c.Point <= 0 || c.Margin <= 0 {
		return v.hardLimit()
	}
	return max(c.Point-c.Margin, 1)
}
