package advisor_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// raceStore runs before ahead of every SavePrunes (another replica advising the
// same step at that moment, so it stores first) and counts the conflicts.
type raceStore struct {
	*advisor.MemoryStore
	before    func()
	conflicts int
}

func (r *raceStore) SavePrunes(ctx context.Context, ps []advisor.Prune) error {
	r.before()
	err := r.MemoryStore.SavePrunes(ctx, ps)
	if errors.Is(err, advisor.ErrConflict) {
		r.conflicts++
	}
	return err
}

// Two replicas advise every step of one session at the same moment; the second
// one's rewrites always reach the store just after the first one's. Their scorers
// differ (as when one replica reaches Ollama and the other does not), so their stubs
// for one output would differ. The second loses every race: its rewrite stores
// nothing, it adopts the first one's stubs in the same step, with no storage error,
// and no output is ever sent with two different stubs.
func TestLostRaceAdoptsWinnersStubs(t *testing.T) {
	s := frozenSession(t)
	cfg := advisor.DefaultConfig()
	cfg.Budget = 6000
	cfg.RewriteFraction = 0.2
	cfg.PriceForced = false // rewrite over the budget whatever the price: races every few steps
	shared := advisor.NewMemoryStore()
	clk := newClock()
	first := newRunner(t, newAdvisor(t, cfg, constScorer(0.1), shared, clk), s)
	var firstStep step
	catchUp := func(k int) {
		if first.k < k {
			firstStep = first.next()
		}
	}
	second := &raceStore{MemoryStore: shared}
	secondRunner := newRunner(t, newAdvisor(t, cfg, constScorer(0.05), second, clk), s)
	second.before = func() { catchUp(secondRunner.k) }

	sent := map[string]string{} // output key -> the stub sent for it
	check := func(who string, st step) {
		t.Helper()
		for key, stub := range stubsIn(s, st.out) {
			if old, ok := sent[key]; ok && old != stub {
				t.Fatalf("step %d (%s): %s sent as %q, before as %q", st.plan.Step, who, key, stub, old)
			}
			sent[key] = stub
		}
	}
	adopted := 0
	for !secondRunner.done() {
		conflicts := second.conflicts
		st := secondRunner.next()
		catchUp(secondRunner.k)
		check("first", firstStep)
		check("second", st)
		if second.conflicts == conflicts {
			continue
		}
		adopted++
		if st.plan.StorageError != "" || st.plan.Pruned != 0 || !strings.Contains(st.plan.Waiting, "pruned first") {
			t.Errorf("step %d, race lost: storage error %q, pruned %d, waiting %q; want none, 0 and the adoption", st.plan.Step, st.plan.StorageError, st.plan.Pruned, st.plan.Waiting)
		}
		for key, stub := range stubsIn(s, firstStep.out) {
			if got := stubsIn(s, st.out)[key]; got != stub {
				t.Errorf("step %d: the loser sends %s as %q; want the winner's %q", st.plan.Step, key, got, stub)
			}
		}
	}
	if adopted == 0 {
		t.Fatal("the second replica never lost a race: the test exercises nothing")
	}
	for _, stub := range shared.Stubs() {
		if !strings.Contains(stub.Stub, "score 0.10") {
			t.Errorf("stored stub %q is not the winner's", stub.Stub)
		}
	}
	t.Logf("%d races lost and adopted, %d outputs stubbed", adopted, len(sent))
}
