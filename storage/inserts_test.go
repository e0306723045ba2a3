package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// The small INSERTs of record rounds run from statements prepared once
// (prepareInserts): rows written through them read back the same, a round of a
// new shape prepares one more, a round over cachedInsertRows rows prepares none,
// and Close closes them all.
func TestInsertStatementsCached(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "pa.db"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	round := func(step, asks int) {
		t.Helper()
		var as []advisor.AskRecord
		for k := range asks {
			as = append(as, advisor.AskRecord{SessionID: "s", OutputKey: string(rune('a' + k)), Step: step, CardHash: "h", Scorer: "fitted", Score: 0.5, OK: true, Tokens: 100})
		}
		steps := []advisor.StepRecord{{SessionID: "s", Step: step, At: at.Add(time.Duration(step) * time.Second), ContextTokens: 1000 + step, FullTokens: 2000}}
		if err := db.RecordBatch(ctx, as, nil, steps); err != nil {
			t.Fatal(err)
		}
	}
	cached := func() int {
		db.stmtMu.Lock()
		defer db.stmtMu.Unlock()
		return len(db.inserts)
	}
	round(1, 0)
	round(2, 0)
	if got := cached(); got != 1 {
		t.Errorf("after two rounds of one step record: %d statements cached; want 1", got)
	}
	round(3, 2)
	if got := cached(); got != 2 {
		t.Errorf("after a round with two asks: %d statements cached; want 2", got)
	}
	round(4, cachedInsertRows+1)
	if got := cached(); got != 2 {
		t.Errorf("after a round of %d asks: %d statements cached; want 2", cachedInsertRows+1, got)
	}
	h, err := db.SessionHistory(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Asks) != 2+cachedInsertRows+1 || h.Last.Step != 4 || h.Last.ContextTokens != 1004 || !h.Last.At.Equal(at.Add(4*time.Second)) {
		t.Errorf("history: %d asks, last step %+v; want %d asks, step 4 with 1004 tokens at %v", len(h.Asks), h.Last, 2+cachedInsertRows+1, at.Add(4*time.Second))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := cached(); got != 0 {
		t.Errorf("after Close: %d statements cached; want 0", got)
	}
}
