package replay_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// kindErr is a scorer error of one failure kind, as the Ollama and lexical
// scorers' sentinels carry it.
type kindErr string

func (k kindErr) Error() string { return "scorer down: " + string(k) }
func (k kindErr) Kind() string  { return string(k) }

// switchScorer is the lexical scorer under one fixed name that fails every batch
// with kind while kind is set, or only batch failAt (1-based) when that is set.
type switchScorer struct {
	kind    atomic.Value // string; "" means answer
	failAt  int64
	batches atomic.Int64
}

func (s *switchScorer) Name() string { return "switch" }

func (s *switchScorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	n := s.batches.Add(1)
	k, _ := s.kind.Load().(string)
	if k != "" && (s.failAt == 0 || n == s.failAt) {
		return make([]cards.Score, len(b.Cards)), kindErr(k)
	}
	return lexical.New().Score(ctx, b)
}

func switchRunner(db replay.Sink, sc *switchScorer) *replay.Runner {
	return &replay.Runner{
		Replayer: &replay.Replayer{Config: advisor.DefaultConfig(), Scorer: sc, Lenient: true},
		Sink:     db, Workers: 1,
	}
}

// TestScorerFailuresCounted (issue 12.2): with the scorer down, every ask of the
// three sessions fails; the summary counts them by kind and names the sessions,
// and they are not marked done: the next run, with the scorer back, replays them
// and asks again, and the run after finds everything done. Before, the summary said nothing and the second run
// found "0 sessions to replay", so the lost scores were never asked again.
func TestScorerFailuresCounted(t *testing.T) {
	db := openDB(t, t.TempDir()+"/f.db")
	sc := &switchScorer{}
	sc.kind.Store("unreachable")
	sum, err := switchRunner(db, sc).Run(t.Context(), runFiles)
	if err != nil || sum.Replayed != 3 || len(sum.Failures) > 0 {
		t.Fatalf("first run: %+v, %v", sum, err)
	}
	if sum.Asks == 0 || sum.FailedAsks != sum.Asks {
		t.Errorf("%d of %d asks failed, want all", sum.FailedAsks, sum.Asks)
	}
	if diff := cmp.Diff(map[string]int{"unreachable": sum.Asks}, sum.ScorerFailures); diff != "" {
		t.Errorf("ScorerFailures (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(runFiles, sum.Incomplete); diff != "" {
		t.Errorf("Incomplete (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(runFiles, sum.AllAsksFailed); diff != "" {
		t.Errorf("AllAsksFailed (-want +got):\n%s", diff)
	}
	// The failed sessions are stored (calibrate sees their rows) but not done.
	if n := doneRuns(t, db); n != 3 {
		t.Errorf("%d sessions listed as replayed, want 3", n)
	}

	sc.kind.Store("")
	again, err := switchRunner(db, sc).Run(t.Context(), runFiles)
	if err != nil {
		t.Fatal(err)
	}
	// The ask counts of the two runs need not match: a failed ask is retried when the
	// back-off allows (the cache goes cold in these sessions' pauses), a score under
	// the cutoff makes its output pending and is never asked again.
	if again.Replayed != 3 || again.AlreadyDone != 0 || again.FailedAsks != 0 || again.Asks == 0 || len(again.Incomplete) != 0 {
		t.Errorf("second run: replayed %d, already done %d, %d of %d asks failed, incomplete %v; want the 3 sessions asked again, all scored",
			again.Replayed, again.AlreadyDone, again.FailedAsks, again.Asks, again.Incomplete)
	}
	third, err := switchRunner(db, sc).Run(t.Context(), runFiles)
	if err != nil || third.Replayed != 0 || third.AlreadyDone != 3 {
		t.Errorf("third run: replayed %d, already done %d (%v); want all done", third.Replayed, third.AlreadyDone, err)
	}
	if n := doneRuns(t, db); n != 3 {
		t.Errorf("%d sessions listed as replayed after the reruns, want 3 (replaced, not added)", n)
	}
}

// TestScorerFailuresPartial: one failed batch of many leaves its session not done
// but not among AllAsksFailed.
func TestScorerFailuresPartial(t *testing.T) {
	db := openDB(t, t.TempDir()+"/p.db")
	sc := &switchScorer{failAt: 1}
	sc.kind.Store("timeout")
	cfg := advisor.DefaultConfig()
	cfg.Budget = 2000 // re-asks, so the session has several batches
	r := &replay.Runner{Replayer: &replay.Replayer{Config: cfg, Scorer: sc, Lenient: true}, Sink: db, Workers: 1}
	sum, err := r.Run(t.Context(), runFiles[:1])
	if err != nil {
		t.Fatal(err)
	}
	if sum.FailedAsks == 0 || sum.FailedAsks >= sum.Asks || sum.ScorerFailures["timeout"] != sum.FailedAsks {
		t.Errorf("%d of %d asks failed (%v); want some, as timeout", sum.FailedAsks, sum.Asks, sum.ScorerFailures)
	}
	if len(sum.Incomplete) != 1 || len(sum.AllAsksFailed) != 0 {
		t.Errorf("incomplete %v, all failed %v; want the session incomplete only", sum.Incomplete, sum.AllAsksFailed)
	}
}

// TestFinalFailuresDone: failures a new ask cannot mend (FinalFailKinds) are
// counted, but the session is done: asking again would only fail again.
func TestFinalFailuresDone(t *testing.T) {
	db := openDB(t, t.TempDir()+"/d.db")
	sc := &switchScorer{}
	sc.kind.Store("empty_query")
	sum, err := switchRunner(db, sc).Run(t.Context(), runFiles)
	if err != nil || sum.FailedAsks == 0 || sum.ScorerFailures["empty_query"] != sum.FailedAsks || len(sum.Incomplete) != 0 {
		t.Fatalf("first run: %d failed (%v), incomplete %v, %v", sum.FailedAsks, sum.ScorerFailures, sum.Incomplete, err)
	}
	again, err := switchRunner(db, sc).Run(t.Context(), runFiles)
	if err != nil || again.Replayed != 0 || again.AlreadyDone != 3 {
		t.Errorf("second run: replayed %d, already done %d (%v); want all done", again.Replayed, again.AlreadyDone, err)
	}
}

func TestIncomplete(t *testing.T) {
	tests := []struct {
		asks []advisor.AskRecord
		want bool
		byKn map[string]int
	}{
		{nil, false, nil},
		{[]advisor.AskRecord{{OK: true}}, false, nil},
		{[]advisor.AskRecord{{OK: true}, {FailKind: "timeout"}}, true, map[string]int{"timeout": 1}},
		{[]advisor.AskRecord{{FailKind: "too_large"}, {FailKind: "empty_query"}}, false, map[string]int{"too_large": 1, "empty_query": 1}},
		{[]advisor.AskRecord{{FailKind: "not_pulled"}, {FailKind: "not_pulled"}, {}}, true, map[string]int{"not_pulled": 2, "error": 1}},
	}
	for _, tt := range tests {
		rec := &replay.Record{Asks: tt.asks}
		if got := replay.Incomplete(rec); got != tt.want {
			t.Errorf("Incomplete(%+v) = %v, want %v", tt.asks, got, tt.want)
		}
		if diff := cmp.Diff(tt.byKn, replay.AskFailures(rec)); diff != "" {
			t.Errorf("AskFailures(%+v) (-want +got):\n%s", tt.asks, diff)
		}
	}
}
