package replay

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/cards"
)

// constKeep scores every card keep.
type constKeep float64

func (c constKeep) Name() string { return "const" }

func (c constKeep) Score(_ context.Context, b cards.Batch) ([]cards.Score, error) {
	out := make([]cards.Score, len(b.Cards))
	for i := range out {
		out[i] = cards.Score{Keep: float64(c), OK: true}
	}
	return out, nil
}

// TestTiesAtTheCutoff: a score equal to the cutoff keeps the output, live (the
// advisor's pending prunes in a replay) and in calibration (calibrate's decisions of
// the scorer at that cutoff) alike, and the two agree output by output; a score just
// under it prunes in both. (Issue 40: `score < cutoff` turned into `<=` pruned 251
// more item-steps on a real session and set the advisor against calibrate's sweep.)
func TestTiesAtTheCutoff(t *testing.T) {
	srcs := sharedSources(t)
	cfg := advisor.DefaultConfig()
	cfg.Budget = 20_000 // asks happen
	cutoff := cfg.CutoffFor("const")
	for _, tc := range []struct {
		name      string
		keep      float64
		wantScore bool // some output pending by its score
	}{
		{"at the cutoff", cutoff, false},
		{"under it", cutoff - 1e-9, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			byScore := 0
			for _, src := range srcs[:6] {
				rec, err := (&Replayer{Config: cfg, Scorer: constKeep(tc.keep), Lenient: true}).Replay(context.Background(), src)
				if err != nil {
					t.Fatal(err)
				}
				live := rec.PendingDecisions()
				calib := calibrate.ScorerPrunes(rec.CalibrateOutputs(), cutoff)
				steps := func(ds []calibrate.Decision) []int {
					out := make([]int, len(ds))
					for i, d := range ds {
						out[i] = d.Step
					}
					return out
				}
				if d := cmp.Diff(steps(calib), steps(live)); d != "" {
					t.Errorf("%s: the advisor's pending steps differ from calibrate's decisions at cutoff %.2f (-calibrate +live):\n%s", src.Path, cutoff, d)
				}
				for i, d := range live {
					if d.Step > 0 && !d.Rule && rec.Outputs[i].RuleDeadAt != d.Step {
						byScore++
					}
				}
			}
			if (byScore > 0) != tc.wantScore {
				t.Errorf("scored %.10f against cutoff %.2f: %d outputs pending by score; want some: %v", tc.keep, cutoff, byScore, tc.wantScore)
			}
		})
	}
}
