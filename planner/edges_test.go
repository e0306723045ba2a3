package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The planner at the edges of its rules, with a read price other than 1: read
// 0.25 and premium 3.5 (dollars per token, scaled: the ratio is about Anthropic's
// 0.30 to 3.45), 4 remaining steps, so a rewrite's saving is exactly its freed
// tokens (F x 0.25 x 4) and its cost 3.5 x its suffix, exact in binary. Every
// expected value is worked by hand in the case's comment.
func TestPlanAtTheEdges(t *testing.T) {
	base := Input{Budget: 1000, HardLimit: 1500, LowWater: 800, LeastRewrite: 50, Remaining: 4, Read: 0.25, Premium: 3.5, PayFactor: 1}
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
		{
			// 1500 is at the hard limit, not past it: the budget's rule decides, and 30
			// freed tokens are short of both its marks (50, and 1470 > 800): it waits.
			"at exactly the hard limit the budget's rule decides", with(func(in *Input) {
				in.Context = 1500
				in.Pending = []Pending{{Offset: 1400, Saves: 30, Keep: 0.1}}
			}),
			Rewrite{Wait: "over budget, but pending prunes free 30 tokens: less than the least rewrite (50) and short of the low-water mark (800)"},
		},
		{
			// Past the hard limit: 900 freed (1600 -> 700), suffix 1600-100-900 = 600,
			// cost 600 x 3.5 = 2100, saving 900 x 0.25 x 4 = 900.
			"past the hard limit the saving is the freed tokens read over the remaining steps", with(func(in *Input) {
				in.Context = 1600
				in.Pending = []Pending{{Offset: 100, Saves: 900, Keep: 0.1}}
			}),
			Rewrite{Apply: []int{0}, Reason: ReasonHardLimit, Frees: 900, Suffix: 600, Cost: 2100, Saving: 900},
		},
		{
			// Over budget, least rewrite 500: the lowest score (0.1 at 600) frees 400,
			// 1200 -> 800, exactly the mark: that reaches it, and the 0.2 at 300 (before
			// the first change) is not taken. Suffix 1200-600-400 = 200, cost 700.
			"over budget stops at exactly the low-water mark", with(func(in *Input) {
				in.Context, in.LeastRewrite = 1200, 500
				in.Pending = []Pending{{Offset: 600, Saves: 400, Keep: 0.1}, {Offset: 300, Saves: 100, Keep: 0.2}}
			}),
			Rewrite{Apply: []int{0}, Reason: ReasonOverBudget, Frees: 400, Suffix: 200, Cost: 700, Saving: 400},
		},
		{
			// Over budget by 10: the prune frees exactly the least rewrite, 50 (1010 ->
			// 960, short of the mark): enough. Suffix 1010-900-50 = 60, cost 210.
			"over budget, freeing exactly the least rewrite is enough", with(func(in *Input) {
				in.Context = 1010
				in.Pending = []Pending{{Offset: 900, Saves: 50, Keep: 0.1}}
			}),
			Rewrite{Apply: []int{0}, Reason: ReasonOverBudget, Frees: 50, Suffix: 60, Cost: 210, Saving: 50},
		},
		{
			// price_forced, pay factor 2: the budget's rewrite frees 70 (>= 50), suffix
			// 1200-1120-70 = 10, cost 35, saving 70 = 2 x 35 exactly: it pays, and goes
			// as the budget's rewrite.
			"price_forced, a saving of exactly pay factor x cost is enough", with(func(in *Input) {
				in.Context, in.PriceForced, in.PayFactor = 1200, true, 2
				in.Pending = []Pending{{Offset: 1120, Saves: 70, Keep: 0.1}}
			}),
			Rewrite{Apply: []int{0}, Reason: ReasonOverBudget, Frees: 70, Suffix: 10, Cost: 35, Saving: 70},
		},
		{
			// Under budget, the only start: frees 70, suffix 1000-920-70 = 10, cost 35,
			// saving 70 = 2 x 35 exactly: it pays for itself.
			"under budget, a saving of exactly pay factor x cost pays", with(func(in *Input) {
				in.Context, in.PayFactor = 1000, 2
				in.Pending = []Pending{{Offset: 920, Saves: 70, Keep: 0.1}}
			}),
			Rewrite{Apply: []int{0}, Reason: ReasonPays, Frees: 70, Suffix: 10, Cost: 35, Saving: 70},
		},
		{
			// Frees 7, suffix 1000-991-7 = 2, cost 7 = saving 7: it would save nothing
			// net of its cost, so it is not made.
			"under budget, a rewrite that saves only its cost is not made", with(func(in *Input) {
				in.Context = 1000
				in.Pending = []Pending{{Offset: 991, Saves: 7, Keep: 0.1}}
			}),
			Rewrite{Wait: "under budget, warm cache, and no rewrite pays for itself"},
		},
		{
			// From 890: frees 100, suffix 1000-890-100 = 10, cost 35, net 65. From 820
			// (both): frees 150, suffix 30, cost 105, net 45. Both pay (pay factor 1);
			// the later start nets more and wins, though the earlier saves more.
			"under budget, the start that nets most wins, not the one that saves most", with(func(in *Input) {
				in.Context = 1000
				in.Pending = []Pending{{Offset: 820, Saves: 50, Keep: 0.1}, {Offset: 890, Saves: 100, Keep: 0.1}}
			}),
			Rewrite{Apply: []int{1}, Reason: ReasonPays, Frees: 100, Suffix: 10, Cost: 35, Saving: 100},
		},
		{
			// From 880: frees 100, suffix 20, cost 70, net 30. From 760 (both): frees
			// 200, suffix 1000-760-200 = 40, cost 140, net 60: the earlier start nets
			// more and wins.
			"under budget, an earlier start that nets more wins", with(func(in *Input) {
				in.Context = 1000
				in.Pending = []Pending{{Offset: 760, Saves: 100, Keep: 0.1}, {Offset: 880, Saves: 100, Keep: 0.1}}
			}),
			Rewrite{Apply: []int{0, 1}, Reason: ReasonPays, Frees: 200, Suffix: 40, Cost: 140, Saving: 200},
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
