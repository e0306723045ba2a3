package calibrate

import "testing"

// TestDigestSweepHand runs the hand session (TestEvaluateHand) at two digest
// budgets, target miss rate 0, cutoffs 0 and 0.25 refined by Front:
//
//   - budget 0 (40-token stubs that hold nothing): at 0.25 A misses (used at 6,
//     pruned at 4); the refined cutoffs under 0.1 prune A at its second ask (0.05
//     at 7, after its use) and C by its rule at 7: no miss, 3,000 x 4 + 1,000 x 4
//     = 16,000 token-steps, stubs 40 x 4 x 2 = 320: net 15,680.
//   - budget 64 (100-token stubs whose digest holds A's use): at 0.25 nothing
//     misses: A from 4 (3,000 x 7), B from 5 (4,000 x 6), C from 7 (1,000 x 4)
//     = 49,000, stubs 100 x (7 + 6 + 4) = 1,700: net 47,300. Recommended: 64.
func TestDigestSweepHand(t *testing.T) {
	outs, sessions := handOutputs()
	at := func(b int) []Output {
		o := append([]Output(nil), outs...)
		if b > 0 {
			for i := range o {
				o[i].StubTokens = 100
			}
			o[0].Held = []bool{true}
		}
		return o
	}
	points, rec, err := DigestSweep([]int{0, 64}, at, sessions, DefaultOptions(), "x", []float64{0, 0.25}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 2 || points[0].Best == nil || points[1].Best == nil {
		t.Fatalf("points %+v", points)
	}
	if b := points[0].Best; b.MissRate != 0 || b.TokenSteps != 16_000 || b.Net() != 15_680 || b.Cutoff >= 0.1 {
		t.Errorf("budget 0: best %+v (net %d); want no miss, 16,000 token-steps, net 15,680 at a cutoff under 0.1", *b, b.Net())
	}
	if b := points[1].Best; b.MissRate != 0 || b.TokenSteps != 49_000 || b.Net() != 47_300 {
		t.Errorf("budget 64: best %+v (net %d); want no miss, 49,000 token-steps, net 47,300", *b, b.Net())
	}
	if rec != 64 {
		t.Errorf("recommended %d; want 64", rec)
	}
	for _, p := range points {
		if p.OracleTokenSteps <= 0 {
			t.Errorf("budget %d: oracle %d token-steps", p.Budget, p.OracleTokenSteps)
		}
	}
}
