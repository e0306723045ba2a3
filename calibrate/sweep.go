package calibrate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/pruneadvisor/pruneadvisor/planner"
)

// DefaultCutoffs returns the cutoffs a sweep tries by default: 0, 0.05, 0.10, …,
// 0.95 (20 values; 0 prunes by rules only, and 0.25 is the uncalibrated default).
func DefaultCutoffs() []float64 {
	out := make([]float64, 20)
	for i := range out {
		out[i] = float64(i) / 20
	}
	return out
}

// DefaultRecency is the set of N for the recency-masking baseline ("keep the last N
// outputs"): 5, 10 and 20.
var DefaultRecency = []int{5, 10, 20}

// ScorerPrunes returns each output's decision for a scorer at cutoff: the first OK
// ask with Keep under the output's cutoff (planner.CutoffAt(cutoff, Tokens,
// exponent, capTokens): the cutoff itself at exponent 0), with that keep-probability, or
// RuleDeadAt when that is earlier or the same step (rule-dead outputs are pruned
// whatever their score, docs/DESIGN.md step 6; on the same step the rule is the
// reason, as the live advisor gives it); Step 0 = never.
func ScorerPrunes(outs []Output, cutoff, exponent float64, capTokens int) []PruneAt {
	p := RulePrunes(outs)
	for i := range outs {
		c := planner.CutoffAt(cutoff, outs[i].Tokens, exponent, capTokens)
		for _, a := range outs[i].Asks {
			if a.OK && a.Keep < c {
				if p[i].Step == 0 || a.Step < p[i].Step {
					p[i] = PruneAt{Step: a.Step, Keep: a.Keep}
				}
				break
			}
		}
	}
	return p
}

// RulePrunes returns RuleDeadAt for every output, as rule decisions: the rules-only
// baseline.
func RulePrunes(outs []Output) []PruneAt {
	p := make([]PruneAt, len(outs))
	for i := range outs {
		if outs[i].RuleDeadAt > 0 {
			p[i] = PruneAt{Step: outs[i].RuleDeadAt, Rule: true}
		}
	}
	return p
}

// steps turns decision steps into PruneAts (keep-probability 0: no score ranks
// them; the planner then takes them in session order).
func steps(p []int) []PruneAt {
	out := make([]PruneAt, len(p))
	for i, s := range p {
		out[i].Step = s
	}
	return out
}

// RecencyPrunes returns the decisions of recency masking with window n: in each
// session, outputs are ordered by Step (ties in input order); an output falls out of
// the last n when the n-th output after it becomes visible, at that output's Step+1,
// and is pruned then, or at its CandidateFrom when later (same protection as the
// advisor); never when it is never a candidate or falls out after EndStep. Rules
// play no part. n < 1 is treated as 1.
func RecencyPrunes(outs []Output, n int) []PruneAt {
	n = max(n, 1)
	p := make([]int, len(outs))
	bySession := map[string][]int{}
	var order []string
	for i := range outs {
		s := outs[i].Session
		if _, ok := bySession[s]; !ok {
			order = append(order, s)
		}
		bySession[s] = append(bySession[s], i)
	}
	for _, s := range order {
		idx := bySession[s]
		sort.SliceStable(idx, func(a, b int) bool { return outs[idx[a]].Step < outs[idx[b]].Step })
		for k := 0; k+n < len(idx); k++ {
			o := &outs[idx[k]]
			if o.CandidateFrom == 0 {
				continue
			}
			step := max(outs[idx[k+n]].Step+1, o.CandidateFrom)
			if step <= o.EndStep {
				p[idx[k]] = step
			}
		}
	}
	return steps(p)
}

// OraclePrunes returns the oracle's decisions: each output at the first step after
// its last use (an output never used, at once), but not before its EligibleFrom;
// never when it is never eligible or that step is past EndStep. Under the
// decision-level accounting of Result no pruner that prunes only eligible outputs
// and never misses saves more token-steps: such a pruner must prune each output
// after its last use, so no earlier than the oracle.
func OraclePrunes(outs []Output) []PruneAt {
	p := make([]int, len(outs))
	for i := range outs {
		o := &outs[i]
		el := o.EligibleFrom()
		if el == 0 {
			continue
		}
		step := el
		if len(o.Uses) > 0 {
			step = max(step, o.Uses[len(o.Uses)-1]+1)
		}
		if step <= o.EndStep {
			p[i] = step
		}
	}
	return steps(p)
}

// RandomPrunes returns the decisions of the random baseline: k outputs drawn
// uniformly, without replacement, from those eligible before their EndStep, each
// pruned at its EligibleFrom step. k is capped at the number eligible. The draw is a
// Fisher-Yates shuffle driven by PCG(seed, seed^0x9e3779b97f4a7c15), so the same
// outputs, k and seed always give the same decisions.
func RandomPrunes(outs []Output, k int, seed uint64) []PruneAt {
	p := make([]int, len(outs))
	var elig []int
	for i := range outs {
		if el := outs[i].EligibleFrom(); el != 0 && el <= outs[i].EndStep {
			elig = append(elig, i)
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	rng.Shuffle(len(elig), func(a, b int) { elig[a], elig[b] = elig[b], elig[a] })
	for _, i := range elig[:min(max(k, 0), len(elig))] {
		p[i] = outs[i].EligibleFrom()
	}
	return steps(p)
}

// ScorerName is the Result name of a scorer's results.
func ScorerName(scorer string) string { return "scorer:" + scorer }

// Scorer evaluates the scorer whose asks the outputs hold, at cutoff.
// Under the planner (the applied level) a rewrite forced by the hard limit may
// also prune candidates not pending yet, by their last score, as the advisor does.
func (e *Evaluator) Scorer(name string, cutoff float64) Result {
	ds := ScorerPrunes(e.outs, cutoff, e.opts.SizeExponent, e.opts.SizeCapTokens)
	r := e.pruneFigures(ScorerName(name), cutoff, ds, holdDigest)
	e.price(&r, func(sd *sessionData) policy { return &immediateP{decide(e, sd, ds)} },
		func(sd *sessionData) policy {
			p := e.regime(sd, ds).(*regimeP)
			p.extra = true
			return p
		})
	return r
}

// Sweep evaluates the scorer at every cutoff, in the order given.
func (e *Evaluator) Sweep(name string, cutoffs []float64) []Result {
	out := make([]Result, len(cutoffs))
	for i, c := range cutoffs {
		out[i] = e.Scorer(name, c)
	}
	return out
}

// KeepAll is the do-nothing baseline: it saves nothing and misses nothing.
func (e *Evaluator) KeepAll() Result {
	return e.evaluate("keep-all", -1, make([]PruneAt, len(e.outs)))
}

// Rules is the rules-only baseline (RulePrunes).
func (e *Evaluator) Rules() Result { return e.evaluate("rules", -1, RulePrunes(e.outs)) }

// Recency is the recency-masking baseline with window n (RecencyPrunes), named
// "recency-<n>".
func (e *Evaluator) Recency(n int) Result {
	return e.evaluate(fmt.Sprintf("recency-%d", max(n, 1)), -1, RecencyPrunes(e.outs, n))
}

// Oracle is the oracle baseline (OraclePrunes): it never misses.
func (e *Evaluator) Oracle() Result { return e.evaluate("oracle", -1, OraclePrunes(e.outs)) }

// Random is the random baseline pruning the same number of outputs as ref
// (RandomPrunes with k = ref.Pruned and the evaluator's seed), so its prune rate
// equals ref's whenever that many outputs are eligible. It carries ref's cutoff.
func (e *Evaluator) Random(ref Result) Result {
	return e.evaluate("random", ref.Cutoff, RandomPrunes(e.outs, ref.Pruned, e.opts.Seed))
}

// Baselines returns keep-all, rules, recency for each n in recency (DefaultRecency
// when nil), and the oracle (under the planner's regime at the applied level, like
// every decision pruner), in that order.
func (e *Evaluator) Baselines(recency []int) []Result {
	if recency == nil {
		recency = DefaultRecency
	}
	out := []Result{e.KeepAll(), e.Rules()}
	for _, n := range recency {
		out = append(out, e.Recency(n))
	}
	return append(out, e.Oracle())
}

// Recommendation is the cutoff Recommend chose, or an explicit none.
type Recommendation struct {
	None       bool      `json:"none"`        // no cutoff qualified; Result is zero
	Cutoff     float64   `json:"cutoff"`      // the chosen cutoff (-1 when None)
	TargetMiss float64   `json:"target_miss"` // the miss-rate target it was chosen under
	Objective  Objective `json:"objective"`   // what was maximised ("" when None)
	Result     Result    `json:"result"`      // the chosen cutoff's result
	Reason     string    `json:"reason"`      // why this cutoff, or why none
}

// Objective is what Recommend maximises.
type Objective string

// Objectives.
const (
	// ObjectiveNet maximises the applied level's NetUSD, the money saved against
	// keep-all under the price model.
	ObjectiveNet Objective = "net"
	// ObjectiveTokenSteps maximises decision-level TokenSteps, the context kept
	// small whatever the cache costs (the agent degrades past the budget).
	ObjectiveTokenSteps Objective = "token-steps"
)

func (ob Objective) value(r Result) float64 {
	if ob == ObjectiveTokenSteps {
		return float64(r.TokenSteps)
	}
	return r.Applied.NetUSD
}

// RecommendBy returns the cutoff of sweep with the highest objective among those
// whose (decision-level) MissRate is at most targetMiss; on equal objective the
// lower cutoff wins. With none qualifying it returns a Recommendation with None set
// and an error wrapping ErrNoCutoff naming the lowest miss rate found. targetMiss
// must lie in [0,1] and ob be a known Objective (ErrInvalid otherwise).
func RecommendBy(sweep []Result, targetMiss float64, ob Objective) (Recommendation, error) {
	none := Recommendation{None: true, Cutoff: -1, TargetMiss: targetMiss}
	if math.IsNaN(targetMiss) || targetMiss < 0 || targetMiss > 1 {
		none.Reason = "invalid target"
		return none, fmt.Errorf("%w: target miss rate %v outside [0,1]", ErrInvalid, targetMiss)
	}
	if ob != ObjectiveNet && ob != ObjectiveTokenSteps {
		none.Reason = "invalid objective"
		return none, fmt.Errorf("%w: objective %q (want %q or %q)", ErrInvalid, ob, ObjectiveNet, ObjectiveTokenSteps)
	}
	best := -1
	lowest := math.Inf(1)
	for i, r := range sweep {
		lowest = math.Min(lowest, r.MissRate)
		if r.MissRate > targetMiss {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		v, bv := ob.value(r), ob.value(sweep[best])
		if v > bv || v == bv && r.Cutoff < sweep[best].Cutoff {
			best = i
		}
	}
	if best < 0 {
		none.Reason = fmt.Sprintf("no cutoff of %d has miss rate <= %.3f", len(sweep), targetMiss)
		if len(sweep) > 0 {
			none.Reason += fmt.Sprintf(" (lowest %.3f)", lowest)
		}
		return none, fmt.Errorf("%w: %s", ErrNoCutoff, none.Reason)
	}
	r := sweep[best]
	return Recommendation{
		Cutoff:     r.Cutoff,
		TargetMiss: targetMiss,
		Objective:  ob,
		Result:     r,
		Reason: fmt.Sprintf("highest %s among %d cutoffs with miss rate <= %.3f: net $%.4f, %d token-steps, miss rate %.3f, prune rate %.3f",
			ob, countAtMost(sweep, targetMiss), targetMiss, r.Applied.NetUSD, r.TokenSteps, r.MissRate, r.PruneRate),
	}, nil
}

func countAtMost(sweep []Result, target float64) int {
	n := 0
	for _, r := range sweep {
		if r.MissRate <= target {
			n++
		}
	}
	return n
}

// Front refinement (issue 30: "neighbouring sweep points no more than one point of
// miss rate apart").
const (
	// FrontGap is the largest miss-rate step between neighbouring points of a
	// front: one point (0.01).
	FrontGap = 0.01
	// FrontPoints bounds the cutoffs Front adds to a sweep.
	FrontPoints = 160
)

// Front returns sweep (Results in cutoff order) with cutoffs added between
// neighbours whose miss rates differ by more than gap, or whose token-steps differ
// by more than gap of all the outputs' token-steps, halving the widest such
// interval first (the larger of its two steps, each over its gap), until none is
// left, the interval is under 0.001, or max cutoffs were added; in cutoff order.
// Widest first, so that when max runs out the gaps left are the narrowest ones,
// wherever they lie. The decision-level prune figures and both levels' prices of
// each added point are computed as Scorer's.
func (e *Evaluator) Front(name string, sweep []Result, gap float64, max int) []Result {
	out := slices.Clone(sweep)
	for added := 0; added < max; {
		i := widestGap(out, gap)
		if i < 0 {
			break
		}
		mid := (out[i].Cutoff + out[i+1].Cutoff) / 2
		out = slices.Insert(out, i+1, e.Scorer(name, mid))
		added++
	}
	return out
}

// widestGap returns the index k of the neighbours out[k], out[k+1] whose step is
// the widest past gap (miss rate over gap, token-steps over gap of all the
// outputs' token-steps, the larger of the two), among those at least 0.001 of
// cutoff apart; the leftmost on a tie; -1 when none is past gap.
func widestGap(out []Result, gap float64) int {
	i, widest := -1, 1.0
	for k := 0; k+1 < len(out); k++ {
		a, b := out[k], out[k+1]
		if b.Cutoff-a.Cutoff < 0.001 {
			continue
		}
		w := math.Abs(b.MissRate-a.MissRate) / gap
		if b.TotalTokenSteps > 0 {
			w = max(w, math.Abs(float64(b.TokenSteps-a.TokenSteps))/(gap*float64(b.TotalTokenSteps)))
		}
		if w > widest {
			i, widest = k, w
		}
	}
	return i
}
