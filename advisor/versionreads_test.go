package advisor_test

import (
	"context"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// readCounter is a MemoryStore counting its SessionMark and SessionStubs calls.
type readCounter struct {
	*advisor.MemoryStore
	versions, stubs int
}

func (r *readCounter) SessionMark(ctx context.Context, id string) (advisor.Mark, error) {
	r.versions++
	return r.MemoryStore.SessionMark(ctx, id)
}

func (r *readCounter) SessionStubs(ctx context.Context, id string) (map[string]advisor.StubRecord, error) {
	r.stubs++
	return r.MemoryStore.SessionStubs(ctx, id)
}

// Every step reads the session's version once, a step that applies a rewrite too:
// the next step's read tells whether the version moved by this process's own stubs
// alone (then the stubs are not read back) or by another process's writes as well
// (then they are, and adopted).
func TestOneVersionReadPerStep(t *testing.T) {
	cfg := advisor.DefaultConfig()
	cfg.Budget = 10_000
	cfg.PayFactor = 1000
	cfg.PriceForced = false
	s := survey(t, 40)
	store := &readCounter{MemoryStore: advisor.NewMemoryStore()}
	r := newRunner(t, newAdvisor(t, cfg, constScorer(0), store, newClock()), s)
	rewrites, steps := 0, 0
	var last step
	for !r.done() {
		v, st := store.versions, store.stubs
		last = r.next()
		steps++
		if last.plan.Rewrite {
			rewrites++
		}
		if store.versions-v != 1 {
			t.Errorf("step %d (rewrite %v): %d version reads, want 1", last.plan.Step, last.plan.Rewrite, store.versions-v)
		}
		if steps > 1 && store.stubs != st {
			t.Errorf("step %d: the stubs were read back though only this process wrote", last.plan.Step)
		}
	}
	if rewrites < 2 {
		t.Fatalf("%d rewrites in %d steps; the test needs at least 2", rewrites, steps)
	}

	// Another process records a recall of a pruned output: the next step reads the
	// stubs and recalls back and the output is recalled.
	var it advisor.Item
	for _, i := range last.plan.Items {
		if i.Decision == advisor.DecisionPruned {
			it = i
			break
		}
	}
	if it.Key == "" {
		t.Fatal("no pruned output to recall")
	}
	if err := store.RecordRecall(context.Background(), advisor.RecallEvent{RecallID: it.RecallID, SessionID: last.plan.SessionID, OutputKey: it.Key}); err != nil {
		t.Fatal(err)
	}
	st := store.stubs
	view := *s
	p, err := r.adv.Advise(context.Background(), &view)
	if err != nil {
		t.Fatal(err)
	}
	got := item(t, p, it.Key)
	if store.stubs != st+1 || got.Decision != advisor.DecisionRecalled {
		t.Errorf("after another process's recall: %d stub reads, %s %s; want 1 and recalled", store.stubs-st, it.Key, got.Decision)
	}
}
