package advisor_test

import (
	"fmt"
	"github.com/pruneadvisor/pruneadvisor/planner"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// survey returns a session of n 600-token file reads, one per step.
func survey(t *testing.T, n int) *transcript.Session {
	c := newChat("Survey the code base")
	for i := 1; i <= n; i++ {
		c.read("", fmt.Sprintf("/src/m%d.go", i), filler(fmt.Sprintf("m%d", i), 600))
	}
	return c.session(t, "survey.json")
}

// unchanged fails when a step's bytes differ from the previous step's without a
// rewrite (docs/DESIGN.md step 6: between two rewrites the bytes sent do not change).
func unchanged(t *testing.T, steps []step) {
	t.Helper()
	for i := 1; i < len(steps); i++ {
		if steps[i].plan.Rewrite {
			continue
		}
		prev, cur := steps[i-1].out, steps[i].out
		for j := range prev {
			if !cmp.Equal(texts(cur[j]), texts(prev[j])) {
				t.Fatalf("step %d: message %d changed without a rewrite", steps[i].plan.Step, j)
			}
		}
	}
}

// Doing nothing is the default: under the budget, with a warm cache and no rewrite
// that pays, 27 pending prunes wait and the bytes never change; after 4 idle minutes
// still nothing; after 6 the cache is cold and all 27 go at once, for free.
func TestRegimeWarmUnderBudget(t *testing.T) {
	cfg := advisor.DefaultConfig()
	cfg.PayFactor = 1000 // nothing pays
	t.Run("warm", func(t *testing.T) {
		steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), survey(t, 30))
		for _, st := range steps {
			if st.plan.Rewrite {
				t.Fatalf("step %d: rewrite (%s)", st.plan.Step, st.plan.RewriteReason)
			}
			for i, m := range st.out {
				if m != st.in[i] {
					t.Fatalf("step %d: message %d was changed", st.plan.Step, i)
				}
			}
		}
		final := steps[len(steps)-1].plan
		n := 0
		for _, it := range final.Items {
			if it.Decision == advisor.DecisionPending {
				n++
			}
		}
		// Reads of steps 1..27 are candidates at step 31, all scored 0.
		if n != 27 || final.Waiting != "under budget, warm cache, and no rewrite pays for itself" {
			t.Errorf("%d pending, waiting %q; want 27 waiting for a reason", n, final.Waiting)
		}
	})
	for _, tt := range []struct {
		idle    time.Duration
		rewrite bool
	}{{4 * time.Minute, false}, {6 * time.Minute, true}} {
		t.Run(fmt.Sprintf("idle %s", tt.idle), func(t *testing.T) {
			clk := newClock()
			r := newRunner(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), clk), survey(t, 30))
			var st step
			for len(r.ends)-r.k > 1 {
				if st = r.next(); st.plan.Rewrite {
					t.Fatalf("step %d: early rewrite", st.plan.Step)
				}
			}
			clk.Advance(tt.idle)
			st = r.next()
			if st.plan.Rewrite != tt.rewrite || st.plan.Cold != tt.rewrite {
				t.Fatalf("after %s idle: Rewrite %v (%q), cold %v; want %v", tt.idle, st.plan.Rewrite, st.plan.RewriteReason, st.plan.Cold, tt.rewrite)
			}
			if tt.rewrite && (st.plan.RewriteReason != "cold-cache" || st.plan.Pruned != 27 || st.plan.PendingTokens != 0 || st.plan.RewriteCostUSD != 0) {
				t.Errorf("cold rewrite: reason %q, %d pruned, %d pending, cost %v; want cold-cache, 27, 0, 0",
					st.plan.RewriteReason, st.plan.Pruned, st.plan.PendingTokens, st.plan.RewriteCostUSD)
			}
		})
	}
}

// With price_forced (the default) a rewrite the budget would force waits until it
// pays: over 60 reads at a 10,000-token budget, the plan waits while the cache write
// would cost more than it saves, and every rewrite made saves at least PayFactor
// times its cost (once enough old reads are pending that the suffix after them is
// short).
func TestRegimePriceForced(t *testing.T) {
	cfg := advisor.DefaultConfig()
	cfg.Budget = 10_000
	// Without stub digests: the survey's stubs with digests (up to a quarter of
	// these small outputs) save too little for a rewrite to pay its cache write,
	// and the test is about the regime, not the digest.
	cfg.DigestTokens = 0
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), survey(t, 60))
	unchanged(t, steps)
	waited, rewrites := 0, 0
	for _, st := range steps {
		p := st.plan
		if strings.Contains(p.Waiting, "over budget, but the rewrite would cost $") {
			waited++
		}
		if !p.Rewrite {
			continue
		}
		rewrites++
		if p.RewriteSavingUSD < cfg.PayFactor*p.RewriteCostUSD {
			t.Errorf("step %d: %s rewrite saves $%g for a cost of $%g", p.Step, p.RewriteReason, p.RewriteSavingUSD, p.RewriteCostUSD)
		}
	}
	if waited == 0 || rewrites == 0 {
		t.Errorf("%d steps waited for a paying rewrite, %d rewrites; want both", waited, rewrites)
	}
}

// Over the budget (10,000 tokens; 60 reads of about 600 tokens): every rewrite is an
// over-budget one that frees at least 5% of the budget or reaches the low-water mark
// (8,000), the context after it is at most the budget, and between rewrites the bytes
// do not change. Digests of 64 tokens: with 128, 60 stubs of a quarter of their
// 600-token reads no longer fit under the budget.
func TestRegimeOverBudget(t *testing.T) {
	cfg := advisor.DefaultConfig()
	cfg.Budget = 10_000
	cfg.DigestTokens = 64
	cfg.PayFactor = 1000    // only the budget forces rewrites here
	cfg.PriceForced = false // whatever they cost (docs/DESIGN.md step 6b)
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), survey(t, 60))
	unchanged(t, steps)
	rewrites := 0
	for i, st := range steps {
		p := st.plan
		if !p.Rewrite {
			if i > 0 && steps[i-1].plan.ContextTokens > cfg.Budget && p.PendingTokens >= cfg.LeastRewriteTokens() {
				t.Errorf("step %d: over budget with %d tokens pending and no rewrite", p.Step, p.PendingTokens)
			}
			continue
		}
		rewrites++
		freed := p.SavedTokens - steps[i-1].plan.SavedTokens
		if p.RewriteReason != "over-budget" || freed < cfg.LeastRewriteTokens() && p.ContextTokens > cfg.LowWaterTokens() {
			t.Errorf("step %d: rewrite %q freed %d tokens to %d; want over-budget, >= %d or down to %d",
				p.Step, p.RewriteReason, freed, p.ContextTokens, cfg.LeastRewriteTokens(), cfg.LowWaterTokens())
		}
		if p.ContextTokens > cfg.Budget {
			t.Errorf("step %d: %d tokens after the rewrite, over the budget %d", p.Step, p.ContextTokens, cfg.Budget)
		}
	}
	// The context grows by one 600-token read a step; a rewrite takes it to the
	// low-water mark at most, so the next comes at least 2,000/600 steps later.
	if rewrites == 0 || rewrites > 60/3 {
		t.Errorf("%d rewrites over 60 steps, want 1..20", rewrites)
	}
}

// A rewrite that pays: the planner's price of it matches one worked out here from
// the messages themselves: the tokens after its first changed message as sent
// (stubs in place) times (cache write - cache read), and the tokens it frees times
// the cache-read price times the expected remaining steps.
func TestRegimePays(t *testing.T) {
	cfg := advisor.DefaultConfig()
	cfg.RemainingFactor, cfg.PayFactor = 0.5, 1 // the mean estimate, break-even
	regimePrices(t, cfg, "pays", cfg.Estimator())
	// Over a budget of 4,000 tokens under price_forced, the rewrites forced by the
	// budget are priced on over_budget_remaining_factor (0.5), not remaining_factor
	// (0.05, with which none would pay).
	over := advisor.DefaultConfig()
	over.BudgetFraction, over.PayFactor, over.RemainingFactor, over.OverBudgetRemainingFactor = 0.02, 1, 0.05, 0.5
	regimePrices(t, over, "over-budget", over.EstimatorOver())
	// With the defaults (remaining max(3, 0.15 x steps), saving >= 2 x cost) two
	// do, at steps 27 and 40, priced from the messages as above: the estimate is
	// 3 steps up to step 20 and grows after it (4.05 at step 27), where with the
	// former factor 0.05 it stayed at 3 through step 40 and one rewrite paid, at
	// step 39. Every name a read carries
	// (value_0, value_7, ...) is carried again by the reads after it, so none is live for
	// it and its stub holds no digest (evidence/digest.go, "Live names only"): a
	// 612-token read leaves a stub of about 25 tokens. With digests made when the
	// reads arrived (before replay-14), the stubs kept a quarter of each read and
	// none paid.
	def := advisor.DefaultConfig()
	regimePrices(t, def, "pays", def.Estimator())
	var at []int
	for _, st := range simulate(t, newAdvisor(t, def, constScorer(0), advisor.NewMemoryStore(), newClock()), survey(t, 40)) {
		if st.plan.Rewrite {
			at = append(at, st.plan.Step)
			if st.plan.RewriteSavingUSD < def.PayFactor*st.plan.RewriteCostUSD {
				t.Errorf("step %d: saving %g under %g x cost %g", st.plan.Step, st.plan.RewriteSavingUSD, def.PayFactor, st.plan.RewriteCostUSD)
			}
			if first := firstOut(st.out); !strings.HasPrefix(first, "[pruned: Read /src/m1.go, 612 tokens, score 0.00; recall(") {
				t.Errorf("step %d: the first read's stub %q; want one without a digest", st.plan.Step, first)
			}
		}
	}
	if d := cmp.Diff([]int{27, 40}, at); d != "" {
		t.Errorf("rewrites with the default estimate at steps (-want +got):\n%s", d)
	}
}

// regimePrices checks every rewrite of cfg's advisor on a 40-read survey (each
// for reason) against a price worked out from the messages, the remaining steps
// from est.
func regimePrices(t *testing.T, cfg advisor.Config, reason string, est planner.Estimator) {
	t.Helper()
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), survey(t, 40))
	unchanged(t, steps)
	checked := 0
	price := prices.MustDefault(prices.OpenAI) // an OpenAI chat session
	for i, st := range steps {
		p := st.plan
		if !p.Rewrite {
			continue
		}
		if p.RewriteReason != reason {
			t.Fatalf("step %d: rewrite %q, want %s", p.Step, p.RewriteReason, reason)
		}
		prev := steps[i-1].plan.Stubs
		first, frees := -1, 0
		for mi, m := range st.out {
			for j, o := range m.Outputs {
				if _, was := prev[o.Key]; was || o.Text == st.in[mi].Outputs[j].Text {
					continue
				}
				if first < 0 {
					first = mi
				}
				frees += st.in[mi].Outputs[j].Tokens - tokencount.Count(o.Text)
			}
		}
		suffix := 0
		for _, m := range st.out[first:] {
			suffix += m.Tokens
			for _, o := range m.Outputs {
				suffix += tokencount.Count(o.Text) - o.Tokens // o.Tokens is the original's
			}
		}
		cost := float64(suffix) * (price.Write() - price.Read())
		saving := float64(frees) * price.Read() * est.Remaining(p.Step)
		if math.Abs(cost-p.RewriteCostUSD) > 1e-12 || math.Abs(saving-p.RewriteSavingUSD) > 1e-12 || saving < cost {
			t.Errorf("step %d: planner cost %g saving %g; from the messages %g and %g (suffix %d, frees %d)",
				p.Step, p.RewriteCostUSD, p.RewriteSavingUSD, cost, saving, suffix, frees)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no rewrite paid for itself over 40 steps")
	}
	t.Logf("%s: %d rewrites paid for themselves", reason, checked)
}

// firstOut is the text of the first tool output of ms ("" when none).
func firstOut(ms []*transcript.Message) string {
	for _, m := range ms {
		for _, o := range m.Outputs {
			return o.Text
		}
	}
	return ""
}
