package advisor_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// failingPrunes is a store whose commit of a rewrite fails.
type failingPrunes struct{ *advisor.MemoryStore }

func (failingPrunes) SavePrunes(context.Context, []advisor.Prune) error {
	return errors.New("disk full")
}

// storage.DB decides and stubs exactly as MemoryStore does (one transaction per
// rewrite in both); a failed commit prunes nothing.
func TestPruneStoreBatch(t *testing.T) {
	s, err := transcript.ReadFile("../testdata/sessions/fix-port.jsonl", transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	type row struct {
		Key, Decision, Stub string
	}
	final := func(store advisor.Store) ([]row, int) {
		cfg := advisor.DefaultConfig()
		cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
		steps := simulate(t, newAdvisor(t, cfg, lexical.New(), store, nil), s)
		errs := 0
		for _, st := range steps {
			if st.plan.StorageError != "" {
				errs++
			}
		}
		var out []row
		for _, it := range steps[len(steps)-1].plan.Items {
			out = append(out, row{it.Key, string(it.Decision), it.Stub})
		}
		return out, errs
	}
	batch, errs := final(db)
	each, _ := final(advisor.NewMemoryStore())
	if errs != 0 {
		t.Errorf("%d storage errors through storage.DB", errs)
	}
	if d := cmp.Diff(each, batch); d != "" {
		t.Errorf("storage.DB differs from MemoryStore (-memory +db):\n%s", d)
	}
	pruned := 0
	for _, r := range batch {
		if r.Decision == string(advisor.DecisionPruned) {
			pruned++
			if _, err := db.Original(context.Background(), recallIDOf(t, r.Stub)); err != nil {
				t.Errorf("stub %q has no original: %v", r.Stub, err)
			}
		}
	}
	if pruned != 3 {
		t.Errorf("pruned %d outputs, want 3 (superseded read, duplicate, go env)", pruned)
	}

	failed, errs := final(failingPrunes{advisor.NewMemoryStore()})
	for _, r := range failed {
		if r.Decision == string(advisor.DecisionPruned) || r.Stub != "" {
			t.Errorf("output %s pruned although the batch commit failed", r.Key)
		}
	}
	if errs == 0 {
		t.Error("no plan reported the storage error")
	}
}

// recallIDOf returns the recall id a stub names.
func recallIDOf(t *testing.T, stub string) string {
	t.Helper()
	for i := 0; i+advisor.RecallIDLen <= len(stub); i++ {
		if stub[i:i+2] == "o_" && advisor.ValidRecallID(stub[i:i+advisor.RecallIDLen]) {
			return stub[i : i+advisor.RecallIDLen]
		}
	}
	t.Fatalf("no recall id in %q", stub)
	return ""
}
