package tuning

import (
	"math/rand/v2"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/calibrate"
)

// TestHeldOutRuleIsRecommendBy: over random sweeps in ascending cutoff order
// (HeldOutCutoffs' order), the cutoff Evaluate takes from calibrate.RecommendBy
// (token-steps, none when it keeps nothing out) is the one fit's own rule took
// before it used RecommendBy: the first cutoff with the most token-steps among
// those within the target, none when no such cutoff saves a token-step.
func TestHeldOutRuleIsRecommendBy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := 1 + rng.IntN(30)
		cutoffs := HeldOutCutoffs(nil)[:n]
		sweep := make([]calibrate.Result, n)
		for i := range sweep {
			r := &sweep[i]
			r.Cutoff = cutoffs[i]
			r.Pruned = rng.IntN(4)
			if r.Pruned > 0 {
				r.TokenSteps = int64(rng.IntN(5)) * 100 // ties and zeros
				r.MissRate = float64(rng.IntN(5)) / 100
			}
		}
		target := float64(rng.IntN(5)) / 100
		var former calibrate.Result // fit's rule before RecommendBy
		for _, r := range sweep {
			if r.MissRate <= target && r.TokenSteps > former.TokenSteps {
				former = r
			}
		}
		rec, err := calibrate.RecommendBy(sweep, target, calibrate.ObjectiveTokenSteps)
		now := err == nil && rec.Result.TokenSteps > 0
		if was := former.Pruned > 0; now != was || now && rec.Result.Cutoff != former.Cutoff {
			t.Fatalf("trial %d (target %.2f): RecommendBy gives %v (cutoff %v), fit's rule %v (cutoff %v)", trial, target, now, rec.Result.Cutoff, was, former.Cutoff)
		}
	}
}
