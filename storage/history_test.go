package storage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
)

// What an advisor starting on a session already advised reads back: every ask with
// its signals, in order, and the latest step record.
func TestSessionHistory(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		h, err := db.SessionHistory(ctx, "s")
		if err != nil || len(h.Asks) != 0 || h.Last.Step != 0 {
			t.Fatalf("empty history = %+v, %v", h, err)
		}
		sig := cards.Signals{Step: 9, Age: 5, Tokens: 812, Chars: 3000, Action: "read", Uses: 2, LastUseAgo: 3, EditedSince: true, Lexical: 0.42, HasReaction: true}
		asks := []advisor.AskRecord{
			{SessionID: "s", OutputKey: "a", Step: 9, CardHash: "h", Scorer: "fitted", Score: 0.1, OK: true, Signals: sig},
			{SessionID: "s", OutputKey: "b", Step: 9, Scorer: "fitted", FailKind: "timeout"},
			{SessionID: "other", OutputKey: "a", Step: 2, Scorer: "fitted", Score: 0.9, OK: true},
		}
		if err := db.RecordAsks(ctx, asks); err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
		steps := []advisor.StepRecord{
			{SessionID: "s", Step: 9, At: at, ContextTokens: 9000, FullTokens: 9500, Rewrite: "pays", Pruned: 1, Frees: 500, Suffix: 300, CostUSD: 0.0003, SavingUSD: 0.0009},
			{SessionID: "s", Step: 10, At: at.Add(time.Minute), ContextTokens: 9100, FullTokens: 9600},
			{SessionID: "other", Step: 40, At: at.Add(time.Hour), ContextTokens: 1, FullTokens: 1},
		}
		if err := db.RecordSteps(ctx, steps); err != nil {
			t.Fatal(err)
		}
		h, err = db.SessionHistory(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		want := advisor.History{Asks: asks[:2], Last: steps[1]}
		if d := cmp.Diff(want, h, cmp.Comparer(func(a, b float64) bool { return a == b || a != a && b != b })); d != "" {
			t.Errorf("history (-want +got):\n%s", d)
		}
		all, err := db.Steps(ctx, "s")
		if err != nil || len(all) != 2 || all[0] != steps[0] {
			t.Errorf("Steps = %+v, %v", all, err)
		}
		if err := db.RecordSteps(ctx, []advisor.StepRecord{{SessionID: "s"}}); err == nil {
			t.Error("RecordSteps of step 0: no error")
		}
	})
}
