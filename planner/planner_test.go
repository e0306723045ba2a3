package planner

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Every expected value below is worked out by hand in the case's comment.
func TestPlan(t *testing.T) {
	base := Input{Budget: 1000, HardLimit: 1500, LowWater: 800, LeastRewrite: 50, Remaining: 5, Read: 1, Premium: 10, PayFactor: 1}
	with := func(f func(*Input)) Input {
		in := base
		f(&in)
		return in
	}
	tests := []struct {
		name string
		in   Input
		want Rewrite
	}{
		{"nothing pending", with(func(in *Input) { in.Context = 2000 }), Rewrite{}},
		{
			// Past the hard limit every pending prune goes: frees 300+200 = 500, first
			// change at offset 100, suffix 1600-100-500 = 1000, cost 1000 x 10.
			"hard limit", with(func(in *Input) {
				in.Context = 1600
				in.Pending = []Pending{{Offset: 100, Saves: 300, Keep: 0.2}, {Offset: 600, Saves: 200, Rule: true}}
			}),
			Rewrite{Apply: []int{0, 1}, Reason: ReasonHardLimit, Frees: 500, Suffix: 1000, Cost: 10000, Saving: 2500},
		},
		{
			// Past the hard limit (issue 31) the rewrite goes to the low-water mark, not
			// further: 0.1 first frees 900 (1600 -> 700 <= 800) and stops; the 0.9 at
			// offset 50 lies before the first change (100) and waits. Suffix
			// 1600-100-900 = 600, cost 6000 > saving 900 x 5 = 4500: the price does
			// not stop it (the compaction it avoids costs more).
			"hard limit down to the mark, whatever the price", with(func(in *Input) {
				in.Context, in.PriceForced, in.PayFactor = 1600, true, 2
				in.Pending = []Pending{{Offset: 100, Saves: 900, Keep: 0.1}, {Offset: 50, Saves: 100, Keep: 0.9}}
			}),
			Rewrite{Apply: []int{0}, Reason: ReasonHardLimit, Frees: 900, Suffix: 600, Cost: 6000, Saving: 4500},
		},
		{
			// Pending prunes short of the mark: the rule prune (1600 -> 1400), then
			// candidates not yet pending by lowest keep-probability: 0.5 (-> 1100), 0.7
			// (-> 800, the mark); the 0.9 stays. First change at 400; frees
			// 200+300+300 = 800; suffix 1600-400-800 = 400, cost 4000; saving 800 x 5.
			"hard limit takes candidates not yet pending", with(func(in *Input) {
				in.Context = 1600
				in.Pending = []Pending{{Offset: 1000, Saves: 200, Rule: true}}
				in.Extra = []Pending{{Offset: 200, Saves: 300, Keep: 0.9}, {Offset: 400, Saves: 300, Keep: 0.5}, {Offset: 600, Saves: 300, Keep: 0.7}}
			}),
			Rewrite{Apply: []int{0}, Extra: []int{1, 2}, Reason: ReasonHardLimit, Frees: 800, Suffix: 400, Cost: 4000, Saving: 4000},
		},
		{
			// HardLowWater 600 under the low-water mark 800: the rewrite goes on to 600.
			// Lowest keep first: 0.1 (1600 -> 1200), 0.3 (-> 900), 0.5 (-> 600, the
			// mark); the 0.9 at offset 100 lies before the first change (200) and
			// waits. Frees 400+300+300 = 1000;
			// suffix 1600-200-1000 = 400, cost 4000; saving 1000 x 5 = 5000.
			"hard limit down to its own lower mark", with(func(in *Input) {
				in.Context, in.HardLowWater = 1600, 600
				in.Pending = []Pending{{Offset: 200, Saves: 400, Keep: 0.1}, {Offset: 300, Saves: 300, Keep: 0.3}, {Offset: 400, Saves: 300, Keep: 0.5}, {Offset: 100, Saves: 100, Keep: 0.9}}
			}),
			Rewrite{Apply: []int{0, 1, 2}, Reason: ReasonHardLimit, Frees: 1000, Suffix: 400, Cost: 4000, Saving: 5000},
		},
		{
			// HardLowWater above the low-water mark changes nothing: 0.1 alone
			// reaches 800 (1600 -> 800). Suffix 1600-100-800 = 700, cost 7000.
			"hard limit's own mark above the low-water mark", with(func(in *Input) {
				in.Context, in.HardLowWater = 1600, 1200
				in.Pending = []Pending{{Offset: 100, Saves: 800, Keep: 0.1}, {Offset: 900, Saves: 100, Keep: 0.2}}
			}),
			Rewrite{Apply: []int{0, 1}, Reason: ReasonHardLimit, Frees: 900, Suffix: 600, Cost: 6000, Saving: 4500},
		},
		{
			// Nothing pending, one unscored candidate (Keep 1): it goes. Suffix
			// 1600-100-1000 = 500.
			"hard limit with nothing pending", with(func(in *Input) {
				in.Context = 1600
				in.Extra = []Pending{{Offset: 100, Saves: 1000, Keep: 1}}
			}),
			Rewrite{Extra: []int{0}, Reason: ReasonHardLimit, Frees: 1000, Suffix: 500, Cost: 5000, Saving: 5000},
		},
		{
			// The last resort (Protected): the rule prune (1600 -> 1400) and the one
			// candidate (-> 1200) stay above the mark, so protected outputs go, lowest
			// keep-probability first: 0.4 (-> 900), then 1 (-> 500, past the mark: it
			// is taken while the context is still above it). First change at 300;
			// frees 200+200+300+400 = 1100; suffix 1600-300-1100 = 200, cost 2000.
			"hard limit takes protected outputs last", with(func(in *Input) {
				in.Context = 1600
				in.Pending = []Pending{{Offset: 1000, Saves: 200, Rule: true}}
				in.Extra = []Pending{{Offset: 700, Saves: 200, Keep: 0.9}}
				in.Protected = []Pending{{Offset: 1200, Saves: 400, Keep: 1}, {Offset: 300, Saves: 300, Keep: 0.4}, {Offset: 1500, Saves: 50, Keep: 1}}
			}),
			Rewrite{Apply: []int{0}, Extra: []int{0}, Protected: []int{0, 1}, Reason: ReasonHardLimit, Frees: 1100, Suffix: 200, Cost: 2000, Saving: 5500},
		},
		{
			// Candidates reach the mark (1600 -> 700): the protected output stays.
			"hard limit leaves protected outputs when candidates reach the mark", with(func(in *Input) {
				in.Context = 1600
				in.Extra = []Pending{{Offset: 100, Saves: 900, Keep: 0.3}}
				in.Protected = []Pending{{Offset: 1200, Saves: 400, Keep: 0}}
			}),
			Rewrite{Extra: []int{0}, Reason: ReasonHardLimit, Frees: 900, Suffix: 600, Cost: 6000, Saving: 4500},
		},
		{
			// Only protected outputs, past the hard limit: the earliest of two equal
			// keep-probabilities first (offset 200, -> 1000), then the other (-> 700).
			"hard limit with only protected outputs", with(func(in *Input) {
				in.Context = 1600
				in.Protected = []Pending{{Offset: 900, Saves: 300, Keep: 1}, {Offset: 200, Saves: 600, Keep: 1}}
			}),
			Rewrite{Protected: []int{0, 1}, Reason: ReasonHardLimit, Frees: 900, Suffix: 500, Cost: 5000, Saving: 4500},
		},
		{
			// Under the hard limit protected outputs are never taken.
			"protected ignored under the hard limit", with(func(in *Input) {
				in.Context = 1400
				in.Protected = []Pending{{Offset: 100, Saves: 1000, Keep: 0}}
			}),
			Rewrite{},
		},
		{
			// Under the budget, candidates not yet pending are never taken.
			"extra ignored under the budget", with(func(in *Input) {
				in.Context = 900
				in.Extra = []Pending{{Offset: 100, Saves: 1000, Keep: 0}}
			}),
			Rewrite{},
		},
		{
			// Over the budget (rule b), candidates not yet pending are taken when the
			// pending prunes (none) do not reach the low-water mark: 1400 - 1000 =
			// 400 <= 800; suffix 1400 - 100 - 1000 = 300, cost 300 x 10, saving 1000 x 1 x 5.
			"extra over the budget", with(func(in *Input) {
				in.Context = 1400
				in.Extra = []Pending{{Offset: 100, Saves: 1000, Keep: 0}}
			}),
			Rewrite{Extra: []int{0}, Reason: ReasonOverBudget, Frees: 1000, Suffix: 300, Cost: 3000, Saving: 5000},
		},
		{
			// Pending first (100: 1300 left), then extra by lowest Keep: 0.2 (400:
			// 900 left), 0.3 (300: 600 <= 800), and not 0.5; the first change is at
			// 100, so the pending prune rides along. Suffix 1400 - 100 - 800 = 500.
			"extra over the budget, lowest keep first, down to the mark", with(func(in *Input) {
				in.Context = 1400
				in.Pending = []Pending{{Offset: 1200, Saves: 100, Keep: 0.1}}
				in.Extra = []Pending{{Offset: 300, Saves: 200, Keep: 0.5}, {Offset: 200, Saves: 400, Keep: 0.2}, {Offset: 100, Saves: 300, Keep: 0.3}}
			}),
			Rewrite{Apply: []int{0}, Extra: []int{1, 2}, Reason: ReasonOverBudget, Frees: 800, Suffix: 500, Cost: 5000, Saving: 4000},
		},
		{
			// The same under price_forced: $4000 saved for $5000 does not pay, and the
			// pending prune alone (suffix 100, cost 1000, saving 500) does not either.
			"extra over the budget that does not pay (price_forced)", with(func(in *Input) {
				in.Context, in.PriceForced = 1400, true
				in.Pending = []Pending{{Offset: 1200, Saves: 100, Keep: 0.1}}
				in.Extra = []Pending{{Offset: 300, Saves: 200, Keep: 0.5}, {Offset: 200, Saves: 400, Keep: 0.2}, {Offset: 100, Saves: 300, Keep: 0.3}}
			}),
			Rewrite{Wait: "over budget, but the rewrite would cost $5000.0000 and save $4000.0000 over the expected remaining steps, under the 1 x cost it must save (price_forced; false forces it)"},
		},
		{
			// A cold cache makes the rewrite free: everything, cost 0.
			"cold", with(func(in *Input) {
				in.Context, in.Cold = 500, true
				in.Pending = []Pending{{Offset: 100, Saves: 300, Keep: 0.2}}
			}),
			Rewrite{Apply: []int{0}, Reason: ReasonColdCache, Frees: 300, Suffix: 100, Cost: 0, Saving: 1500},
		},
		{
			// Over budget: rule first (600/250: 1200 -> 950), then the lowest score
			// (700/200 at 0.05: -> 750 <= 800, the mark): stop. First change at 600; the
			// prune at 100 lies before it and waits. Suffix 1200-600-450 = 150.
			"over budget down to the mark", with(func(in *Input) {
				in.Context = 1200
				in.Pending = []Pending{{Offset: 100, Saves: 300, Keep: 0.2}, {Offset: 600, Saves: 250, Rule: true}, {Offset: 700, Saves: 200, Keep: 0.05}}
			}),
			Rewrite{Apply: []int{1, 2}, Reason: ReasonOverBudget, Frees: 450, Suffix: 150, Cost: 1500, Saving: 2250},
		},
		{
			// The same with price_forced (the default), pay factor 1: the budget's
			// rewrite saves 2,250 >= 1 x its cost 1,500: applied as it is.
			"over budget, price_forced, pays", with(func(in *Input) {
				in.Context, in.PriceForced = 1200, true
				in.Pending = []Pending{{Offset: 100, Saves: 300, Keep: 0.2}, {Offset: 600, Saves: 250, Rule: true}, {Offset: 700, Saves: 200, Keep: 0.05}}
			}),
			Rewrite{Apply: []int{1, 2}, Reason: ReasonOverBudget, Frees: 450, Suffix: 150, Cost: 1500, Saving: 2250},
		},
		{
			// Pay factor 2: 2,250 < 2 x 1,500, and no rewrite that pays exists (from
			// 700: frees 200, suffix 300, cost 3,000, saving 1,000; from 600: the
			// budget's; from 100: frees 750, suffix 350, cost 3,500, saving 3,750):
			// it waits, over the budget, saying why.
			"over budget, price_forced, does not pay", with(func(in *Input) {
				in.Context, in.PriceForced, in.PayFactor = 1200, true, 2
				in.Pending = []Pending{{Offset: 100, Saves: 300, Keep: 0.2}, {Offset: 600, Saves: 250, Rule: true}, {Offset: 700, Saves: 200, Keep: 0.05}}
			}),
			Rewrite{Wait: "over budget, but the rewrite would cost $1500.0000 and save $2250.0000 over the expected remaining steps, under the 2 x cost it must save (price_forced; false forces it)"},
		},
		{
			// Over budget, the priority order reaches the mark with the prune at 100
			// (0.1 before 0.3): first change at 100, so the one at 700 (0.3) rides along
			// for free. Frees 300+400+100 = 800; suffix 1300-100-800 = 400.
			"free riders", with(func(in *Input) {
				in.Context = 1300
				in.Pending = []Pending{{Offset: 100, Saves: 300, Keep: 0.1}, {Offset: 400, Saves: 400, Rule: true}, {Offset: 700, Saves: 100, Keep: 0.3}}
			}),
			Rewrite{Apply: []int{0, 1, 2}, Reason: ReasonOverBudget, Frees: 800, Suffix: 400, Cost: 4000, Saving: 4000},
		},
		{
			// Over budget by 10, the only prune frees 20 < 50 and 990 > 800: it waits.
			"over budget, too little", with(func(in *Input) {
				in.Context = 1010
				in.Pending = []Pending{{Offset: 900, Saves: 20, Keep: 0.1}}
			}),
			Rewrite{Wait: "over budget, but pending prunes free 20 tokens: less than the least rewrite (50) and short of the low-water mark (800)"},
		},
		{
			// Frees only 20 < 50, but reaches the mark (1005-20 = 985 <= 990): applied.
			"over budget, reaches the mark", with(func(in *Input) {
				in.Context, in.LowWater = 1005, 990
				in.Pending = []Pending{{Offset: 900, Saves: 20, Keep: 0.1}}
			}),
			Rewrite{Apply: []int{0}, Reason: ReasonOverBudget, Frees: 20, Suffix: 85, Cost: 850, Saving: 100},
		},
		{
			// Under budget: from offset 950 (40 freed): suffix 1000-950-40 = 10, cost
			// 100, saving 40 x 1 x 5 = 200: pays, net 100. From offset 0 (both, 140
			// freed): suffix 860, cost 8600 > saving 700. The later start wins.
			"pays", with(func(in *Input) {
				in.Context = 1000
				in.Pending = []Pending{{Offset: 0, Saves: 100, Keep: 0.1}, {Offset: 950, Saves: 40, Keep: 0.1}}
			}),
			Rewrite{Apply: []int{1}, Reason: ReasonPays, Frees: 40, Suffix: 10, Cost: 100, Saving: 200},
		},
		{
			// The same with PayFactor 3: 200 < 3 x 100, nothing pays.
			"does not pay", with(func(in *Input) {
				in.Context, in.PayFactor = 1000, 3
				in.Pending = []Pending{{Offset: 0, Saves: 100, Keep: 0.1}, {Offset: 950, Saves: 40, Keep: 0.1}}
			}),
			Rewrite{Wait: "under budget, warm cache, and no rewrite pays for itself"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.in.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if d := cmp.Diff(tt.want, Decide(tt.in)); d != "" {
				t.Errorf("Decide (-want +got):\n%s", d)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Input{Context: 10, Budget: 100, HardLimit: 200, LowWater: 80, Remaining: 1, Read: 0.1, Premium: 1, PayFactor: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid input: %v", err)
	}
	for _, tt := range []struct {
		name string
		f    func(*Input)
	}{
		{"hard limit under budget", func(in *Input) { in.HardLimit = 50 }},
		{"low water over budget", func(in *Input) { in.LowWater = 101 }},
		{"hard limit's mark over the hard limit", func(in *Input) { in.HardLowWater = 201 }},
		{"negative hard limit's mark", func(in *Input) { in.HardLowWater = -1 }},
		{"remaining below 1", func(in *Input) { in.Remaining = 0.5 }},
		{"NaN price", func(in *Input) { in.Read = math.NaN() }},
		{"pay factor below 1", func(in *Input) { in.PayFactor = 0.5 }},
		{"empty prune", func(in *Input) { in.Pending = []Pending{{Offset: 1, Saves: 0}} }},
		{"score out of range", func(in *Input) { in.Pending = []Pending{{Offset: 1, Saves: 5, Keep: 1.5}} }},
	} {
		in := ok
		tt.f(&in)
		if err := in.Validate(); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func TestEstimator(t *testing.T) {
	e := Estimator{Factor: 0.5, Min: 3}
	for _, tt := range []struct {
		t    int
		want float64
	}{{0, 3}, {4, 3}, {10, 5}, {100, 50}} {
		if got := e.Remaining(tt.t); got != tt.want {
			t.Errorf("Remaining(%d) = %v, want %v", tt.t, got, tt.want)
		}
	}
	// One session of 3 calls: sum (T-t+1) t = 3+4+3 = 10, sum t^2 = 1+4+9 = 14.
	if f, ok := FitFactor([]int{3}); !ok || math.Abs(f-10.0/14) > 1e-12 {
		t.Errorf("FitFactor([3]) = %v, %v; want 10/14", f, ok)
	}
	if _, ok := FitFactor([]int{0}); ok {
		t.Error("FitFactor of no steps reported a fit")
	}
}
