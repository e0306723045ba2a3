package tuning

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/planner"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// atCutoff scores every card at its own cutoff (planner.CutoffAt of cutoff, the
// card's tokens, exponent and capTokens) less under: a tie when under is 0.
func atCutoff(cutoff, exponent float64, capTokens int, under float64) testkit.Func {
	return testkit.Func{Label: "const", Keep: func(card cards.Card) float64 {
		return min(planner.CutoffAt(cutoff, card.Tokens, exponent, capTokens)-under, 1)
	}}
}

// TestTiesAtTheCutoff: a score equal to the cutoff keeps the output, live (the
// advisor's pending prunes in a replay) and in calibration (calibrate's decisions of
// the scorer at that cutoff) alike, and the two agree output by output; a score just
// under it prunes in both. (Issue 40: `score < cutoff` turned into `<=` pruned 251
// more item-steps on a real session and set the advisor against calibrate's sweep.)
// The same with the cutoff scaled by each output's size (size_exponent 0.5, up
// to size_cap_tokens 3,000, and without the cap): the advisor and calibrate scale
// it by one function, planner.CutoffAt.
func TestTiesAtTheCutoff(t *testing.T) {
	srcs := sharedSources(t)
	for _, sc := range []struct {
		exponent  float64
		capTokens int
	}{{0, 0}, {0.5, 3000}, {0.5, 0}} {
		exponent := sc.exponent
		cfg := advisor.DefaultConfig()
		cfg.Budget = 20_000 // asks happen
		cfg.SizeExponent, cfg.SizeCapTokens = exponent, sc.capTokens
		// Candidates the budget's rewrites take by over_budget_cutoff are pending by
		// no cutoff of the scorer: calibrate's decisions leave them out.
		cfg.OverBudgetCutoff = 0
		cutoff := cfg.CutoffFor("const")
		for _, tc := range []struct {
			name      string
			under     float64
			wantScore bool // some output pending by its score
		}{
			{"at the cutoff", 0, false},
			{"under it", 1e-9, true},
		} {
			t.Run(fmt.Sprintf("exponent %.1f cap %d/%s", exponent, sc.capTokens, tc.name), func(t *testing.T) {
				byScore := 0
				for _, src := range srcs[:6] {
					rec, err := (&replay.Replayer{Config: cfg, Scorer: atCutoff(cutoff, exponent, sc.capTokens, tc.under), Lenient: true}).Replay(context.Background(), src)
					if err != nil {
						t.Fatal(err)
					}
					live := PendingPrunes(rec)
					calib := calibrate.ScorerPrunes(Outputs(rec), cutoff, exponent, sc.capTokens)
					steps := func(ds []calibrate.PruneAt) []int {
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
					t.Errorf("scored %g under the cutoff %.2f: %d outputs pending by score; want some: %v", tc.under, cutoff, byScore, tc.wantScore)
				}
			})
		}
	}
}
