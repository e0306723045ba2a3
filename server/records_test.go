package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// slowStore is a MemoryStore whose RecordBatch (the queue's one write per round)
// waits for gate (when set) and fails with fail (when set), counting the calls.
type slowStore struct {
	*advisor.MemoryStore
	gate  chan struct{}
	fail  error
	mu    sync.Mutex
	calls int
}

func (s *slowStore) RecordBatch(ctx context.Context, a []advisor.AskRecord, d []advisor.DecisionRecord, st []advisor.StepRecord) error {
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	return s.MemoryStore.RecordBatch(ctx, a, d, st)
}

// Asks and decisions return at once and reach the store in order, batched, once
// the writer runs; flush waits for them; a rewrite's commit goes straight to the
// store (one transaction, not queued); a failed write is logged, not returned.
func TestRecordQueue(t *testing.T) {
	st := &slowStore{MemoryStore: advisor.NewMemoryStore(), gate: make(chan struct{})}
	adv, q := newRecordQueue(st, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	prune := advisor.Prune{
		Original: advisor.Original{RecallID: "o_0123456789", SessionID: "s", OutputKey: "k0", Text: "x", Hash: "h"},
		Stub:     advisor.StubRecord{RecallID: "o_0123456789", SessionID: "s", OutputKey: "k0", Stub: "[pruned]"},
	}
	if err := adv.SavePrunes(ctx, []advisor.Prune{prune}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Stubs()["o_0123456789"]; !ok {
		t.Error("SavePrunes did not reach the store before returning")
	}
	var want []advisor.DecisionRecord
	start := time.Now()
	for i := range 50 {
		d := advisor.DecisionRecord{SessionID: "s", OutputKey: fmt.Sprintf("k%d", i), Step: i, Decision: advisor.DecisionKeep}
		want = append(want, d)
		if err := adv.RecordDecisions(ctx, []advisor.DecisionRecord{d}); err != nil {
			t.Fatal(err)
		}
		if err := adv.RecordAsks(ctx, []advisor.AskRecord{{SessionID: "s", OutputKey: d.OutputKey, Step: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("recording waited for the store: %v", d)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if err := q.flush(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("flush with the store blocked = %v; want a deadline error", err)
	}
	cancel()
	close(st.gate)
	if err := q.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, st.Decisions()); d != "" {
		t.Errorf("decisions (-want +got):\n%s", d)
	}
	if n := len(st.Asks()); n != 50 {
		t.Errorf("%d asks stored; want 50", n)
	}
	// The first round took what was queued when the writer started, while the gate
	// was closed; the rest came in the next round: 2 calls, not 100.
	if st.calls > 2 {
		t.Errorf("%d store calls for 100 records; want one per round (at most 2)", st.calls)
	}

	var logBuf bytes.Buffer
	bad := &slowStore{MemoryStore: advisor.NewMemoryStore(), fail: errors.New("disk full")}
	adv, q = newRecordQueue(bad, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err := adv.RecordAsks(ctx, []advisor.AskRecord{{SessionID: "s", OutputKey: "k"}}); err != nil {
		t.Errorf("RecordAsks = %v; want nil (the write happens later)", err)
	}
	if err := q.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(logBuf.Bytes(), []byte("cannot record asks")) || !bytes.Contains(logBuf.Bytes(), []byte("disk full")) {
		t.Errorf("failure not logged: %q", logBuf.String())
	}
}

// A step's records, collected (collect), reach the queue together when the step
// ends: nothing before, one store call for all three kinds after; a call without
// the collector's context queues at once.
func TestRecordQueueCollectsAStep(t *testing.T) {
	st := &slowStore{MemoryStore: advisor.NewMemoryStore()}
	adv, q := newRecordQueue(st, slog.New(slog.DiscardHandler))
	ctx, queue := q.collect(context.Background())
	asks := []advisor.AskRecord{{SessionID: "s", OutputKey: "k1", Step: 4}, {SessionID: "s", OutputKey: "k2", Step: 4}}
	if err := adv.RecordAsks(ctx, asks); err != nil {
		t.Fatal(err)
	}
	asks[0].OutputKey = "changed" // the caller reuses its slice
	if err := adv.RecordDecisions(ctx, []advisor.DecisionRecord{{SessionID: "s", OutputKey: "k1", Step: 4, Decision: advisor.DecisionKeep}}); err != nil {
		t.Fatal(err)
	}
	if err := adv.RecordSteps(ctx, []advisor.StepRecord{{SessionID: "s", Step: 4}}); err != nil {
		t.Fatal(err)
	}
	if err := q.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st.calls != 0 || q.mark() != 0 {
		t.Fatalf("before the step ended: %d store calls, mark %d; want nothing queued", st.calls, q.mark())
	}
	queue()
	if q.mark() != 1 {
		t.Errorf("mark after the step = %d, want 1 (one add)", q.mark())
	}
	if err := q.flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := [3]int{len(st.Asks()), len(st.Decisions()), len(st.Steps())}
	if st.calls != 1 || got != [3]int{2, 1, 1} {
		t.Errorf("after the step: %d store calls, asks, decisions, steps = %v; want 1 call, [2 1 1]", st.calls, got)
	}
	if k := st.Asks()[0].OutputKey; k != "k1" {
		t.Errorf("first ask stored for %q, want k1 (copied when recorded)", k)
	}
	if err := adv.RecordAsks(context.Background(), asks); err != nil {
		t.Fatal(err)
	}
	if q.mark() != 2 {
		t.Errorf("mark after an ask outside the step = %d, want 2 (queued at once)", q.mark())
	}
}

// versionStore is a MemoryStore counting its SessionMark calls.
type versionStore struct {
	*advisor.MemoryStore
	calls atomic.Int32
}

func (s *versionStore) SessionMark(ctx context.Context, id string) (advisor.Mark, error) {
	s.calls.Add(1)
	return s.MemoryStore.SessionMark(ctx, id)
}

// A version read ahead answers the step's first SessionMark call of that
// session, once, with what the store said when it was read; later calls, and calls
// for another session or without one read ahead, go to the store.
func TestVersionPrefetched(t *testing.T) {
	st := &versionStore{MemoryStore: advisor.NewMemoryStore()}
	adv, q := newRecordQueue(st, slog.New(slog.DiscardHandler))
	if ctx := q.prefetchVersion(context.Background(), ""); ctx != context.Background() {
		t.Error("a request without a session header read a version ahead")
	}
	ctx := q.prefetchVersion(context.Background(), "s")
	<-ctx.Value(versionKey{}).(*versionAhead).done
	if err := st.RecordRecall(ctx, advisor.RecallEvent{SessionID: "s", RecallID: "o_0123456789", Step: 3}); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, id := range []string{"s", "s", "other"} {
		m, err := adv.SessionMark(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Version)
	}
	if d := cmp.Diff([]int64{0, 1, 0}, got); d != "" {
		t.Errorf("versions of s, s, other (-want +got):\n%s", d)
	}
	if n := st.calls.Load(); n != 3 {
		t.Errorf("%d SessionMark calls reached the store; want 3 (the read ahead, the second s, other)", n)
	}
}
