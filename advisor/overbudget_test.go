package advisor_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
)

// Over the budget, far from the hard limit, with nothing pending (cutoff 0.01): a
// rewrite forced by the budget takes the kept candidates scored under
// over_budget_cutoff (the odd files, 0.2 < 0.3) and never the even ones (0.5):
// at the last step every odd file past the 3 protected steps (m1 ... m37: 19)
// is a stub; the even ones keep the context over the budget, so the rewrites
// come whenever new odd files free the least rewrite (5% of the budget). With
// over_budget_cutoff 0 no step rewrites at all.
func TestOverBudgetCutoff(t *testing.T) {
	sc := &fakeScorer{fn: func(_ int, b cards.Batch) ([]cards.Score, error) {
		out := make([]cards.Score, len(b.Cards))
		for i, c := range b.Cards {
			out[i] = cards.Score{Keep: 0.5, OK: true}
			if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(c.Args, "/src/m"), ".go")); err == nil && n%2 == 1 {
				out[i].Keep = 0.2
			}
		}
		return out, nil
	}}
	cfg := advisor.DefaultConfig()
	cfg.BudgetFraction, cfg.Cutoff, cfg.PriceForced = 0.05, 0.01, false // budget 10,000
	cfg.LowWaterFraction = 0.8                                          // low-water 8,000
	cfg.OverBudgetCutoff = 0.3                                          // between the odd files' 0.2 and the even ones' 0.5
	run := func(cfg advisor.Config) (rewrites, odd, even int, last advisor.Plan) {
		steps := simulate(t, newAdvisor(t, cfg, sc, advisor.NewMemoryStore(), newClock()), survey(t, 40))
		for _, st := range steps {
			if p := st.plan; p.Rewrite {
				rewrites++
				if p.RewriteReason != "over-budget" {
					t.Errorf("step %d: rewrite %q; want over-budget", p.Step, p.RewriteReason)
				}
			}
		}
		last = steps[len(steps)-1].plan
		for _, it := range last.Items {
			if it.Decision != advisor.DecisionPruned {
				continue
			}
			if it.Score == 0.2 && it.Reason == "over budget, score 0.20 < over-budget cutoff 0.30" {
				odd++
			} else {
				even++
				t.Errorf("%s (score %.2f) pruned for %q", it.Key, it.Score, it.Reason)
			}
		}
		return rewrites, odd, even, last
	}
	rewrites, odd, _, pruned := run(cfg)
	if rewrites == 0 || odd != 19 {
		t.Fatalf("%d rewrites, %d odd files pruned; want the budget's rewrites to take the 19 under 0.3", rewrites, odd)
	}
	cfg.OverBudgetCutoff = 0
	rewrites, odd, even, kept := run(cfg)
	if rewrites != 0 || odd+even != 0 || kept.ContextTokens <= kept.Budget {
		t.Errorf("over_budget_cutoff 0: %d rewrites, %d pruned, last context %d (budget %d); want none, over the budget", rewrites, odd+even, kept.ContextTokens, kept.Budget)
	}
	if saved := kept.ContextTokens - pruned.ContextTokens; saved < 19*400 {
		t.Errorf("the stubs saved %d tokens at the last step; want at least 19 x 400", saved)
	}
}
