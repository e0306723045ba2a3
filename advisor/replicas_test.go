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

// With asks in the background (AskRunner), an ask in flight is its replica's own:
// another replica advising the session meanwhile does not know of it and asks
// about the same output itself; the answer is stored, with the step it was asked
// at, by the replica that sent it, when it folds it in; a stub that answer leads to
// is the one every replica sends (docs/TEAM.md, "Several replicas").
func TestBackgroundAsksAcrossReplicas(t *testing.T) {
	s := lagSession(t)
	cfg := lagConfig()
	store := advisor.NewMemoryStore()
	clk := newClock()
	replica := func() (*advisor.Advisor, *gateScorer, *advisor.AskRunner) {
		g := newGate()
		adv := newAdvisor(t, cfg, g, store, clk)
		return adv, g, withRunner(t, adv)
	}
	a, ga, ra := replica()
	b, gb, rb := replica()
	r := newRunner(t, a, s)
	for range 4 { // steps 1-4 on A: c1 asked a step ahead, at step 4, unanswered
		r.next()
	}
	started(t, ga)
	r.adv = b
	if p := r.next().plan; p.Asked == 0 { // step 5 on B, which knows nothing of A's ask
		t.Fatalf("step 5 on B asked nothing; want c1 asked again (A's ask is A's own)")
	}
	started(t, gb)
	close(ga.gate)
	waitIdle(t, ra)
	r.adv = a
	p6 := r.next().plan // step 6 on A folds in its answer: c1 scored 0.1 as of step 4
	if it := item(t, p6, "c1"); it.Score != 0.1 || it.Decision != advisor.DecisionPruned {
		t.Fatalf("step 6 on A: c1 %s, score %v; want pruned with A's answer", it.Decision, it.Score)
	}
	var steps []int
	for _, ask := range store.Asks() {
		steps = append(steps, ask.Step)
	}
	if d := cmp.Diff([]int{4}, steps); d != "" {
		t.Errorf("stored ask steps after step 6 (-want +got):\n%s", d)
	}
	r.adv = b
	p7 := r.next().plan // step 7 on B: A's stub is adopted; B's own ask is still out
	if got, want := item(t, p7, "c1").Stub, item(t, p6, "c1").Stub; got != want || got == "" {
		t.Errorf("step 7 on B sends c1 as %q; want A's stub %q", got, want)
	}
	close(gb.gate)
	waitIdle(t, rb)
	r.next() // step 8 on B folds in its own answer, stored with step 5
	var c1 []int
	for _, ask := range store.Asks() {
		if ask.OutputKey == "c1" {
			c1 = append(c1, ask.Step)
		}
	}
	if d := cmp.Diff([]int{4, 5}, c1); d != "" {
		t.Errorf("stored asks about c1, by step (-want +got: A's, then B's):\n%s", d)
	}
	n := 0
	for _, st := range store.Stubs() {
		if st.OutputKey == "c1" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d stubs stored for c1; want 1", n)
	}
}
