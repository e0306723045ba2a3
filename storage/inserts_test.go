package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// The small INSERTs of record rounds run from statements prepared once
// (prepareInserts), in pieces of a power of two rows: rows written through them read
// back the same and in order, a round of a new shape prepares only the pieces not
// prepared before, and Close closes them all.
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
	round(4, cachedInsertRows+1) // in two pieces: 32 rows and 1
	if got := cached(); got != 4 {
		t.Errorf("after a round of %d asks: %d statements cached; want 4", cachedInsertRows+1, got)
	}
	round(5, 7) // 4 + 2 + 1: the 4-row piece is new
	if got := cached(); got != 5 {
		t.Errorf("after a round of 7 asks: %d statements cached; want 5", got)
	}
	h, err := db.SessionHistory(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	wantAsks := 2 + cachedInsertRows + 1 + 7
	if len(h.Asks) != wantAsks || h.Last.Step != 5 || h.Last.ContextTokens != 1005 || !h.Last.At.Equal(at.Add(5*time.Second)) {
		t.Errorf("history: %d asks, last step %+v; want %d asks, step 5 with 1005 tokens at %v", len(h.Asks), h.Last, wantAsks, at.Add(5*time.Second))
	}
	for i, a := range h.Asks[2:] { // round 4's and 5's, in the order recorded
		step, key := 4, string(rune('a'+i))
		if i > cachedInsertRows {
			step, key = 5, string(rune('a'+i-cachedInsertRows-1))
		}
		if a.Step != step || a.OutputKey != key {
			t.Fatalf("ask %d: step %d key %q; want step %d key %q", i+2, a.Step, a.OutputKey, step, key)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := cached(); got != 0 {
		t.Errorf("after Close: %d statements cached; want 0", got)
	}
}

func TestInsertPiece(t *testing.T) {
	for rows, want := range map[int]int{1: 1, 2: 2, 3: 2, 7: 4, 8: 8, 31: 16, 32: 32, 33: 32, 1000: 32} {
		if got := insertPiece(rows); got != want {
			t.Errorf("insertPiece(%d) = %d; want %d", rows, got, want)
		}
	}
}
