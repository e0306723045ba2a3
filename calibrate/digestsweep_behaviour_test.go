package calibrate

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// digestOutsAt gives the hand session (TestEvaluateHand) with the stubs of each
// digest budget: at 0 the 40-token stubs that hold nothing; at 64 100-token stubs
// whose digest holds A's use at 6; at any other budget 100-token stubs that hold
// nothing (a digest that names nothing later used: the stub only grows).
func digestOutsAt(b int) []Output {
	outs, _ := handOutputs()
	if b == 0 {
		return outs
	}
	for i := range outs {
		outs[i].StubTokens = 100
	}
	if b == 64 {
		outs[0].Held = []bool{true}
	}
	return outs
}

// DigestSweep recommends the budget whose best front point keeps the most net
// token-steps out within the target, whatever order the budgets come in; a
// budget whose stubs only grow is not recommended over one with shorter stubs;
// on a tie the smaller budget; no budget (-1) when no front point of any budget
// is within the target. Best net token-steps, target 0, cutoffs 0 and 0.25
// refined (TestDigestSweepHand): 15,680 at budget 0; 47,300 at 64; at another
// budget the same prunes as at 0 with 100-token stubs: 16,000 - 100 x (4 + 4) =
// 15,200. With 0.25 alone, A misses at every budget but 64: at 0 nothing is
// within target 0.
func TestDigestSweepRecommendsTheBestBudget(t *testing.T) {
	_, sessions := handOutputs()
	for _, tt := range []struct {
		name    string
		budgets []int
		cutoffs []float64
		want    int
	}{
		{"a longer stub that holds nothing", []int{0, 32}, []float64{0, 0.25}, 0},
		{"budgets in ascending order", []int{0, 64}, []float64{0, 0.25}, 64},
		{"budgets in descending order", []int{64, 0}, []float64{0, 0.25}, 64},
		{"a tie: the smaller", []int{32, 48}, []float64{0, 0.25}, 32},
		{"a tie, descending: the smaller", []int{48, 32}, []float64{0, 0.25}, 32},
		{"nothing within the target", []int{0}, []float64{0.25}, -1},
	} {
		points, rec, err := DigestSweep(tt.budgets, digestOutsAt, sessions, DefaultOptions(), "x", tt.cutoffs, 0)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if rec != tt.want {
			var nets []int64
			for _, p := range points {
				if p.Best != nil {
					nets = append(nets, p.Best.Net())
				}
			}
			t.Errorf("%s: budgets %v recommend %d, want %d (best nets %v)", tt.name, tt.budgets, rec, tt.want, nets)
		}
	}
}

// A budget's point: its front, the best of it within the target (on equal net
// token-steps the lower cutoff, the one that prunes less readily), and the
// oracle's token-steps net of its stubs at that budget. The hand session at
// cutoffs 0.25 and 0.3, which prune the same (A at 4, missing at 6; B at 5; C by
// its rule at 7): 3,000 x 2 + 4,000 x 6 + 1,000 x 4 = 34,000 token-steps, stubs
// 40 x (2 + 6 + 4) = 480, miss rate 1/3, target 1. The oracle prunes A at 7 after
// its last use, B at 5, C at 6 (eligible, its use at 5 past): 3,000 x 4 + 4,000 x
// 6 + 1,000 x 5 = 41,000 token-steps; less its stubs, 40 x 15 = 600 at budget 0,
// 100 x 15 = 1,500 at budget 64. With one session every resample is that session,
// so the band is the share itself: (34,000 - 480) / 40,400.
func TestDigestPointBestAndOracle(t *testing.T) {
	_, sessions := handOutputs()
	points, _, err := DigestSweep([]int{0, 64}, digestOutsAt, sessions, DefaultOptions(), "x", []float64{0.25, 0.3}, 1)
	if err != nil {
		t.Fatal(err)
	}
	at0 := FrontPoint{Cutoff: 0.25, MissRate: 1.0 / 3, TokenSteps: 34_000, StubTokenSteps: 480}
	want := DigestPoint{Budget: 0, Front: []FrontPoint{at0, {Cutoff: 0.3, MissRate: 1.0 / 3, TokenSteps: 34_000, StubTokenSteps: 480}},
		Best: &at0, OracleTokenSteps: 40_400,
		Band: &ShareBand{Samples: BandSamples, P10: 33_520.0 / 40_400, Median: 33_520.0 / 40_400, P90: 33_520.0 / 40_400}}
	if d := cmp.Diff(want, points[0], cmp.Comparer(approx)); d != "" {
		t.Errorf("budget 0 (-want +got):\n%s", d)
	}
	if got := points[1].OracleTokenSteps; got != 39_500 {
		t.Errorf("budget 64: oracle %d net token-steps, want 41,000 - 1,500 = 39,500", got)
	}
}

// drawShare by hand: one front point that prunes one output in each of two
// sessions, kept out 100 token-steps in A without a miss and 50 in B with one (B's
// stub costing 10 of them); the oracle keeps 100 out of each. At target 0.5: A
// twice, 200 / 200 = 1; A and B, miss rate 1/2 within the target, (100 + 40) /
// 200 = 0.7; B twice, miss rate 1, no point: 0. At target 0 the mixed draw has no
// point either.
func TestDrawShareByHand(t *testing.T) {
	per := [][]tally{{{pruned: 1, tokenSteps: 100}, {pruned: 1, misses: 1, tokenSteps: 50, stubSteps: 10}}}
	oracle := []tally{{tokenSteps: 100}, {tokenSteps: 100}}
	for _, tt := range []struct {
		draw   []int
		target float64
		want   float64
	}{
		{[]int{0, 0}, 0.5, 1},
		{[]int{0, 1}, 0.5, 0.7},
		{[]int{1, 0}, 0.5, 0.7},
		{[]int{1, 1}, 0.5, 0},
		{[]int{0, 1}, 0, 0},
		{[]int{0, 0}, 0, 1},
	} {
		if got := drawShare(per, oracle, tt.draw, tt.target); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("draw %v at target %v: share %v, want %v", tt.draw, tt.target, got, tt.want)
		}
	}
	if got := drawShare(per, []tally{{}, {}}, []int{0, 1}, 0.5); got != 0 {
		t.Errorf("an oracle that keeps nothing out: share %v, want 0", got)
	}
}
