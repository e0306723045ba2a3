// Package planner decides when pending prunes become a rewrite (docs/DESIGN.md step 6,
// "Decide"). It is the one regime: the advisor calls it live at every step, and
// calibrate calls it over replayed sessions to price every pruner the same way.
//
// A rewrite is priced before it is made. Under a prompt cache its cost is the tokens
// after its first changed message (as they will be sent, stubs in place) times the
// premium of a cache write over a cache read; its saving is the tokens it removes
// times the cache-read price times the steps they stay removed (the expected
// remaining steps, this one included). Pending prunes are applied together, in one
// rewrite, only when
//
//	(a) the prompt cache is cold anyway (ReasonColdCache): the rewrite is free;
//	(b) the context is over the budget (ReasonOverBudget): pending prunes are taken
//	    rule-dead first, then lowest keep-probability first, until the context is at
//	    or under the low-water mark; the rewrite waits until it frees at least the
//	    least rewrite or reaches the mark. With PriceForced it must also pay for
//	    itself (else the best rewrite that does pays, if any): measured on
//	    ../shared/sessions and ../shared/corpus, forced rewrites that did not pay
//	    were what made sessions costlier than doing nothing;
//	(c) the context is past the hard limit (ReasonHardLimit), the agent's
//	    compaction point less a step's growth: pending prunes rule-dead first, then
//	    lowest keep-probability first, down to the low-water mark, whatever the
//	    rewrite costs (it is cheaper than the compaction it avoids); when they do
//	    not reach the mark, candidates not yet pending (Extra), lowest
//	    keep-probability first, until it is reached; when even those do not
//	    reach it, as a last resort, outputs protected only as recent (Protected:
//	    the last K steps) that the agent's compaction would drop for good,
//	    lowest keep-probability first, until it is reached; then free riders.
//	    The mark of this rule is the lower of LowWater and HardLowWater (half
//	    the hard limit by default: at small windows, where the budget lies close
//	    to the point, 80% of the budget left room for a few steps only, and a
//	    rewrite every few steps; docs/EVALUATION.md, "Small windows: the hard
//	    limit's mark and its futile rewrites");
//	(d) the rewrite pays for itself (ReasonPays): saving >= PayFactor x cost.
//
// Otherwise nothing changes: doing nothing is the default pruning has to beat.
//
// Free riders: once a rewrite's first changed message is fixed, every other pending
// prune after it is applied too. Each one lowers the rewrite's cost (fewer suffix
// tokens to write) and adds its own saving, so a rewrite forced by (b) does not stop
// at the low-water mark when more pending prunes lie behind its first change; the next
// forced rewrite is then further away. (docs/DESIGN.md's "down to the low-water mark" is
// the least a forced rewrite does.)
package planner

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrInput wraps every invalid Input.
var ErrInput = errors.New("planner: invalid input")

// Reason says why a rewrite is made now.
type Reason string

// Reasons, as they appear in plans and reports.
const (
	ReasonNone       Reason = ""
	ReasonColdCache  Reason = "cold-cache"
	ReasonOverBudget Reason = "over-budget"
	ReasonHardLimit  Reason = "hard-limit"
	ReasonPays       Reason = "pays"
)

// Pending is one pending prune as the planner sees it.
type Pending struct {
	// Offset is the number of context tokens before the message that holds the
	// output, as the context is now (earlier stubs in place): a rewrite whose first
	// changed message is this one re-writes the cache from here on.
	Offset int
	// Saves is the number of tokens the stub removes (original minus stub), > 0.
	Saves int
	// Keep is the keep-probability that made it pending; ignored when Rule is set.
	Keep float64
	// Rule marks a prune no score decided: rule-dead (superseded, duplicate) or
	// disposable. Rule prunes go first in a forced rewrite.
	Rule bool
}

// Input is one step's situation.
type Input struct {
	Context   int // tokens of the context as it would be sent now, earlier stubs in place
	Budget    int // tokens
	HardLimit int // tokens, >= Budget
	LowWater  int // tokens a forced rewrite goes down to, <= Budget
	// LeastRewrite is the least a forced (over-budget) rewrite frees, in tokens,
	// unless it reaches LowWater.
	LeastRewrite int
	// Cold reports that the prompt cache has expired (no call for longer than its
	// TTL): every token is written anyway, so a rewrite is free.
	Cold bool
	// Remaining is the expected number of calls, this one included, that the removed
	// tokens stay out of the context (Remaining >= 1; see Estimator).
	Remaining float64
	// Read is the price of one cached token and Premium the extra price of writing a
	// token instead of reading it, in dollars (prices.Model.Read, RewritePremium).
	Read, Premium float64
	// PayFactor: a rewrite pays when its saving is at least PayFactor times its cost
	// (>= 1; 1 is break-even under the estimate).
	PayFactor float64
	// PriceForced makes a rewrite forced by the budget (rule b) wait unless it pays
	// too: the budget then bounds the context only as far as that costs nothing.
	PriceForced bool
	Pending     []Pending
	// Extra are candidates that are not pending (scored at or over the cutoff, or
	// not scored yet: Keep 1), which only a rewrite forced by the hard limit (rule
	// c) or by the budget (rule b) may take, lowest Keep first (then the
	// earliest), when the pending prunes do not reach the low-water mark; a
	// rewrite forced by the budget is priced with them as before (PriceForced).
	// The caller chooses which candidates each rule may see (the advisor offers
	// rule b only those scored under its over_budget_cutoff). Rule is ignored.
	Extra []Pending
	// Protected are outputs protected only as recent (the last K steps; never a
	// recall or re-read window, a `keep`, an excluded tool or one under the
	// minimum size) that the agent's compaction would drop for good, which a
	// rewrite forced by the hard limit takes last, lowest Keep first (then the
	// earliest), when Pending and Extra do not reach the low-water mark: a stub
	// keeps them recallable, a compaction does not (docs/EVALUATION.md, "The last
	// resort before a compaction"). Rule is ignored.
	Protected []Pending
	// HardLowWater is the mark a rewrite forced by the hard limit (rule c) goes
	// down to when it is lower than LowWater, in tokens; 0: LowWater alone.
	HardLowWater int
}

// Validate reports the first invalid field (wrapping ErrInput).
func (in *Input) Validate() error {
	bad := func(f string, v any) error { return fmt.Errorf("%w: %s = %v", ErrInput, f, v) }
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
	switch {
	case in.Context < 0:
		return bad("Context", in.Context)
	case in.Budget <= 0:
		return bad("Budget", in.Budget)
	case in.HardLimit < in.Budget:
		return bad("HardLimit", in.HardLimit)
	case in.LowWater < 0 || in.LowWater > in.Budget:
		return bad("LowWater", in.LowWater)
	case in.HardLowWater < 0 || in.HardLowWater > in.HardLimit:
		return bad("HardLowWater", in.HardLowWater)
	case in.LeastRewrite < 0:
		return bad("LeastRewrite", in.LeastRewrite)
	case !fin(in.Remaining) || in.Remaining < 1:
		return bad("Remaining", in.Remaining)
	case !fin(in.Read):
		return bad("Read", in.Read)
	case !fin(in.Premium):
		return bad("Premium", in.Premium)
	case !fin(in.PayFactor) || in.PayFactor < 1:
		return bad("PayFactor", in.PayFactor)
	}
	for i, p := range in.Pending {
		if p.Offset < 0 || p.Saves <= 0 || !p.Rule && (math.IsNaN(p.Keep) || p.Keep < 0 || p.Keep > 1) {
			return fmt.Errorf("%w: Pending[%d] = %+v", ErrInput, i, p)
		}
	}
	for i, p := range in.Extra {
		if p.Offset < 0 || p.Saves <= 0 || math.IsNaN(p.Keep) || p.Keep < 0 || p.Keep > 1 {
			return fmt.Errorf("%w: Extra[%d] = %+v", ErrInput, i, p)
		}
	}
	for i, p := range in.Protected {
		if p.Offset < 0 || p.Saves <= 0 || math.IsNaN(p.Keep) || p.Keep < 0 || p.Keep > 1 {
			return fmt.Errorf("%w: Protected[%d] = %+v", ErrInput, i, p)
		}
	}
	return nil
}

// Rewrite is the planner's answer for one step: the rewrite to make now (docs/DESIGN.md
// "rewrite": every pending prune it applies, at once), or none (Apply empty) and
// why the pending prunes wait.
type Rewrite struct {
	// Apply lists the indexes into Input.Pending to apply now, ascending; empty when
	// nothing changes.
	Apply []int
	// Extra lists the indexes into Input.Extra to prune too (rules b and c),
	// ascending.
	Extra []int
	// Protected lists the indexes into Input.Protected to prune too (rule c
	// only, the last resort), ascending.
	Protected []int
	Reason    Reason // why the rewrite happens; ReasonNone when Apply is empty
	// Wait says why pending prunes wait ("" when there are none or they are applied).
	Wait string
	// Frees is the tokens the rewrite removes; Suffix the tokens after its first
	// changed message as sent after it (what the cache writes again).
	Frees, Suffix int
	// Cost and Saving price the rewrite (dollars): Suffix x Premium (0 when cold), and
	// Frees x Read x Remaining.
	Cost, Saving float64
}

// Decide returns the rewrite for one step. It never fails on valid input; Validate first when the
// input comes from outside the program.
func Decide(in Input) Rewrite {
	if in.Context > in.HardLimit && (len(in.Pending) > 0 || len(in.Extra) > 0 || len(in.Protected) > 0) {
		return in.hardLimit()
	}
	overBudget := in.Context > in.Budget
	if len(in.Pending) == 0 && (!overBudget || len(in.Extra) == 0) {
		return Rewrite{}
	}
	switch {
	case in.Cold && len(in.Pending) > 0:
		return in.decide(ReasonColdCache, all(len(in.Pending)))
	case overBudget:
		return in.overBudget()
	}
	return in.pays()
}

// hardLimit is rule (c): pending prunes in priority order down to the lower of
// the low-water mark and HardLowWater, then candidates not yet pending (Extra) by
// lowest keep-probability until it is reached, then protected outputs (Protected)
// the same way, then the pending free riders after the first change; the price
// does not matter.
func (in Input) hardLimit() Rewrite {
	if in.HardLowWater > 0 {
		in.LowWater = min(in.LowWater, in.HardLowWater)
	}
	return in.downToLowWater(ReasonHardLimit, true)
}

// downToLowWater takes pending prunes in priority order, then Extra, then (with
// protected) Protected, each lowest Keep first, until the context is at or under
// the low-water mark, and prices the rewrite with the pending free riders after
// its first change.
func (in Input) downToLowWater(r Reason, protected bool) Rewrite {
	freed, first := 0, math.MaxInt
	take := func(p Pending) bool {
		if in.Context-freed <= in.LowWater {
			return false
		}
		freed += p.Saves
		first = min(first, p.Offset)
		return true
	}
	for _, i := range priority(in.Pending) {
		if !take(in.Pending[i]) {
			break
		}
	}
	extra := takeWhile(in.Extra, take)
	var prot []int
	if protected {
		prot = takeWhile(in.Protected, take)
	}
	d := in.decide(r, in.from(first))
	d.Extra, d.Protected = extra, prot
	for _, i := range extra {
		d.Frees += in.Extra[i].Saves
	}
	for _, i := range prot {
		d.Frees += in.Protected[i].Saves
	}
	d.Suffix = max(in.Context-first-d.Frees, 0)
	if !in.Cold {
		d.Cost = float64(d.Suffix) * in.Premium
	}
	d.Saving = float64(d.Frees) * in.Read * in.Remaining
	return d
}

// takeWhile returns, ascending, the indexes of ps that take accepts, offered in
// priority order until it refuses one.
func takeWhile(ps []Pending, take func(Pending) bool) []int {
	var out []int
	for _, i := range priority(ps) {
		if !take(ps[i]) {
			break
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// priority orders prunes for a forced rewrite: rule prunes first, then lowest
// Keep, then the earliest.
func priority(ps []Pending) []int {
	order := all(len(ps))
	slices.SortStableFunc(order, func(a, b int) int {
		pa, pb := ps[a], ps[b]
		if pa.Rule != pb.Rule {
			if pa.Rule {
				return -1
			}
			return 1
		}
		if !pa.Rule {
			if c := cmp.Compare(pa.Keep, pb.Keep); c != 0 {
				return c
			}
		}
		return cmp.Compare(pa.Offset, pb.Offset)
	})
	return order
}

// overBudget is rule (b): priority order down to the low-water mark (pending
// prunes, then Extra), then free riders.
func (in Input) overBudget() Rewrite {
	d := in.downToLowWater(ReasonOverBudget, false)
	reaches := in.Context-d.Frees <= in.LowWater || d.Frees >= in.LeastRewrite
	if reaches && (!in.PriceForced || d.Saving >= in.PayFactor*d.Cost) {
		return d
	}
	if in.PriceForced {
		if p := in.pays(); len(p.Apply) > 0 {
			return p // not the budget's rewrite, but one that pays for itself
		}
	}
	w := Rewrite{}
	if !reaches {
		w.Wait = fmt.Sprintf("over budget, but pending prunes free %d tokens: less than the least rewrite (%d) and short of the low-water mark (%d)", d.Frees, in.LeastRewrite, in.LowWater)
	} else {
		w.Wait = fmt.Sprintf("over budget, but the rewrite would cost $%.4f and save $%.4f over the expected remaining steps, under the %g x cost it must save (price_forced; false forces it)", d.Cost, d.Saving, in.PayFactor)
	}
	return w
}

// pays is rule (d): the rewrite with the best net saving among those that apply every
// pending prune from some first changed message on, if it pays.
func (in Input) pays() Rewrite {
	order := all(len(in.Pending))
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(in.Pending[a].Offset, in.Pending[b].Offset) })
	best, bestNet := -1, 0.0
	var bestCost, bestSaving float64
	frees := 0
	// Walk first changed messages from the last pending prune back to the first:
	// frees accumulates every pending prune at or after the current offset.
	for k := len(order) - 1; k >= 0; k-- {
		p := in.Pending[order[k]]
		frees += p.Saves
		if k > 0 && in.Pending[order[k-1]].Offset == p.Offset {
			continue // same message: start from the earliest of them
		}
		suffix := max(in.Context-p.Offset-frees, 0)
		cost := float64(suffix) * in.Premium
		saving := float64(frees) * in.Read * in.Remaining
		if saving >= in.PayFactor*cost && saving-cost > bestNet {
			best, bestNet, bestCost, bestSaving = k, saving-cost, cost, saving
		}
	}
	if best < 0 {
		d := Rewrite{}
		d.Wait = "under budget, warm cache, and no rewrite pays for itself"
		return d
	}
	d := in.decide(ReasonPays, in.from(in.Pending[order[best]].Offset))
	d.Cost, d.Saving = bestCost, bestSaving
	return d
}

// from returns the indexes of the pending prunes at or after offset, ascending.
func (in Input) from(offset int) []int {
	var out []int
	for i, p := range in.Pending {
		if p.Offset >= offset {
			out = append(out, i)
		}
	}
	return out
}

// decide prices applying the given pending prunes (ascending indexes).
func (in Input) decide(r Reason, apply []int) Rewrite {
	d := Rewrite{Apply: apply, Reason: r}
	first := math.MaxInt
	for _, i := range apply {
		d.Frees += in.Pending[i].Saves
		first = min(first, in.Pending[i].Offset)
	}
	d.Suffix = max(in.Context-first-d.Frees, 0)
	if !in.Cold {
		d.Cost = float64(d.Suffix) * in.Premium
	}
	d.Saving = float64(d.Frees) * in.Read * in.Remaining
	return d
}

func all(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Estimator estimates a session's remaining calls from the calls so far: after t
// calls it expects max(Min, Factor x t) more, this one included. A session that has
// gone on for t steps is expected to go on for a time proportional to t (the
// "Lindy" estimate for lifetimes with a heavy tail, as agent sessions have); Factor is
// fitted by replay (FitFactor) and Min keeps the estimate positive at the start.
type Estimator struct {
	Factor float64 // expected remaining calls per call so far, > 0
	Min    float64 // least estimate, >= 1
}

// Remaining returns the estimate after t calls (t >= 0).
func (e Estimator) Remaining(t int) float64 {
	return max(e.Min, e.Factor*float64(max(t, 0)), 1)
}

// FitFactor returns the least-squares Factor of r = Factor x t through the origin
// over every step t = 1..T of sessions with the given lengths T (calls), where r =
// T - t + 1 is the number of calls from t to the end, t included: sum(r t) / sum(t^2).
// Sessions of length < 1 are ignored; with none left it returns 0 and false.
func FitFactor(lengths []int) (float64, bool) {
	var num, den float64
	for _, T := range lengths {
		for t := 1; t <= T; t++ {
			num += float64(T-t+1) * float64(t)
			den += float64(t) * float64(t)
		}
	}
	if den == 0 {
		return 0, false
	}
	return num / den, true
}

// PaysEvery is the number of pending prunes per step of spacing between two pays
// tests: the test is O(pending), so with more than PaysEvery pending prunes it runs
// only every pending/PaysEvery steps (PaysDue), and a step's work stays bounded
// however many prunes wait. The delay costs little: a rewrite that pays now still
// pays a few steps later, when the removed tokens have only been read a few more
// times.
const PaysEvery = 32

// PaysDue reports whether the pays test (rule d) runs at step with pending prunes
// waiting: always with at most PaysEvery of them, else when step is a multiple of
// pending/PaysEvery. It depends only on its arguments, so a restarted advisor tests
// at the same steps.
func PaysDue(step, pending int) bool {
	k := pending / PaysEvery
	return k <= 1 || step%k == 0
}

// Urgent reports whether in's situation forces or frees a rewrite (hard limit,
// cold cache, over budget): the cases Decide settles without the pays test.
func (in *Input) Urgent() bool {
	return in.Context > in.HardLimit || in.Cold || in.Context > in.Budget
}
