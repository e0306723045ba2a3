package advisor_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// Several advisors sharing one store (proxy replicas) advise one session, each
// step by whichever the order names: in turn, at random, or the first for a
// stretch and then the other. Every step's plan and messages are those of one
// advisor that advises every step (the decisions of the steps an advisor did not
// advise come to it from the store: their asks, stubs and latest step record).
func TestReplicasGiveSamePlans(t *testing.T) {
	for _, c := range restartCases(t) {
		t.Run(c.name, func(t *testing.T) {
			ref := newRunner(t, newAdvisor(t, c.cfg, c.scorer(), advisor.NewMemoryStore(), newClock()), c.s).all()
			stubs := 0
			for _, st := range ref {
				stubs += st.plan.Pruned
			}
			if stubs < 3 {
				t.Fatalf("the reference run pruned %d outputs: the test needs rewrites", stubs)
			}
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 35))
			orders := map[string]func(k int) int{
				"alternating": func(k int) int { return k % 2 },
				"three":       func(k int) int { return k % 3 },
				"random":      func(int) int { return rng.IntN(2) },
				"stretches":   func(k int) int { return k / 5 % 2 },
			}
			for name, pick := range orders {
				store := advisor.NewMemoryStore()
				clk := newClock()
				advs := make([]*advisor.Advisor, 3)
				for i := range advs {
					advs[i] = newAdvisor(t, c.cfg, c.scorer(), store, clk)
				}
				r := newRunner(t, advs[0], c.s)
				for k := 0; !r.done(); k++ {
					r.adv = advs[pick(k)]
					st := r.next()
					if d := cmp.Diff(ref[k].plan, st.plan, plansEqual); d != "" {
						t.Fatalf("%s (seed %d): step %d differs (-one advisor +replicas):\n%s", name, seed, st.plan.Step, d)
					}
					if fmt.Sprint(stubsIn(c.s, st.out)) != fmt.Sprint(stubsIn(c.s, ref[k].out)) {
						t.Fatalf("%s (seed %d): step %d sends other messages", name, seed, st.plan.Step)
					}
				}
			}
			t.Logf("%d steps, %d stubs, the same through replicas in every order", len(ref), stubs)
		})
	}
}
