package calibrate

import "fmt"

// FrontPoint is one cutoff of a scorer's front, decision level: its miss rate, the
// token-steps it keeps out and what its stubs cost in the same currency.
type FrontPoint struct {
	Cutoff         float64 `json:"cutoff"`
	MissRate       float64 `json:"miss_rate"`
	TokenSteps     int64   `json:"token_steps"`
	StubTokenSteps int64   `json:"stub_token_steps"`
}

// Net returns TokenSteps - StubTokenSteps: what the pruner keeps out of the
// calls net of its stubs, in token-steps.
func (p FrontPoint) Net() int64 { return p.TokenSteps - p.StubTokenSteps }

// DigestPoint is a scorer's front with the advisor's stubs at one digest budget
// (issue 39's sweep beside the cutoffs).
type DigestPoint struct {
	Budget int          `json:"budget"` // digest budget, in tokens
	Front  []FrontPoint `json:"front"`  // the refined front (Evaluator.Front), by cutoff
	// Best is the front point with the most net token-steps (FrontPoint.Net) at a
	// miss rate within the target; nil when no point is.
	Best *FrontPoint `json:"best,omitempty"`
	// OracleTokenSteps is the oracle's, net of its stubs at this budget: the
	// bound Best is measured against.
	OracleTokenSteps int64 `json:"oracle_token_steps"`
	// Band is how far Best's share of the oracle moves when the sessions are
	// resampled (ShareBand); nil without sessions.
	Band *ShareBand `json:"band,omitempty"`
}

// DigestSweep evaluates scorer name's front at each digest budget: outsAt(b) are
// the outputs with the stubs of budget b (their StubTokens and Held; the asks
// alike), with the band of its share of the oracle over resampled sessions
// (DigestPoint.Band). It returns the points in budgets' order and the budget it recommends:
// the one whose Best keeps the most net token-steps out at a miss rate within
// target (ties: the smaller budget); -1 when no budget has a Best. Errors: those
// of NewEvaluator (ErrInvalid, ErrNoSession).
func DigestSweep(budgets []int, outsAt func(b int) []Output, sessions []Calls, opts Options, name string, cutoffs []float64, target float64) ([]DigestPoint, int, error) {
	var out []DigestPoint
	rec, bestNet := -1, int64(0)
	for _, b := range budgets {
		ev, err := NewEvaluator(outsAt(b), sessions, opts)
		if err != nil {
			return nil, -1, fmt.Errorf("digest budget %d: %w", b, err)
		}
		p := DigestPoint{Budget: b}
		front := ev.Front(name, ev.Sweep(name, cutoffs), FrontGap, FrontPoints)
		for _, r := range front {
			fp := FrontPoint{Cutoff: r.Cutoff, MissRate: r.MissRate, TokenSteps: r.TokenSteps, StubTokenSteps: r.StubTokenSteps}
			p.Front = append(p.Front, fp)
			if fp.MissRate <= target && (p.Best == nil || fp.Net() > p.Best.Net()) {
				best := fp
				p.Best = &best
			}
		}
		o := ev.Oracle()
		p.OracleTokenSteps = o.TokenSteps - o.StubTokenSteps
		p.Band = ev.shareBand(front, target)
		if p.Best != nil && (rec < 0 || p.Best.Net() > bestNet || p.Best.Net() == bestNet && b < rec) {
			rec, bestNet = b, p.Best.Net()
		}
		out = append(out, p)
	}
	return out, rec, nil
}
