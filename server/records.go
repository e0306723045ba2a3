package server

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// maxQueuedRecords bounds the asks and decisions waiting for the background writer;
// past it, an advisor recording more waits for the writer to catch up.
const maxQueuedRecords = 100_000

// recordQueue is the store the server's advisors write through. Asks, decisions and
// step records (advisor.Store.RecordAsks, RecordDecisions and RecordSteps: read back
// only when an advisor starts on a session already advised) are queued and written by one goroutine, in the
// order they came, batched into one Store.RecordBatch per round (one commit, with
// storage.DB crash-safe rather than fsynced), so a request does not wait for their
// commits.
// Everything else, originals and stubs included, goes straight to the store: a stub
// is still forwarded only once its original is durable. The goroutine runs only
// while there is something to write; flush waits for it. Records not yet written
// when the process dies are lost, except that a proxied request's response reaches
// its client only once the records queued before it was forwarded are written
// (mark, writtenUpTo): the asks a later step restores (advisor.Store.SessionHistory) are then
// in the store before the agent can send that step, also across kill -9. A failed
// write is logged and its records dropped, as the advisor does with a synchronous
// failure.
type recordQueue struct {
	Store
	log *slog.Logger

	mu        sync.Mutex
	asks      []advisor.AskRecord
	decisions []advisor.DecisionRecord
	steps     []advisor.StepRecord
	writing   bool
	idle      chan struct{} // closed when the writer stops; replaced when it starts
	room      *sync.Cond    // signalled when the writer takes the queue
	queued    uint64        // enqueue calls so far
	done      uint64        // enqueue calls whose records are written (or dropped on error)
	round     chan struct{} // closed when the writer ends a round; replaced then
}

// newRecordQueue wraps store. Every advisor.Store method the queue does not
// override (SavePrunes, SessionVersion, the reads) goes straight to store: the
// interface carries them, so the wrapper cannot drop one.
func newRecordQueue(store Store, log *slog.Logger) (advisor.Store, *recordQueue) {
	q := &recordQueue{Store: store, log: log, idle: make(chan struct{}), round: make(chan struct{})}
	close(q.idle)
	q.room = sync.NewCond(&q.mu)
	return q, q
}

// RecordAsks implements advisor.Store: it queues the asks and returns nil.
func (q *recordQueue) RecordAsks(_ context.Context, asks []advisor.AskRecord) error {
	if len(asks) > 0 {
		q.enqueue(func() { q.asks = append(q.asks, asks...) })
	}
	return nil
}

// RecordDecisions implements advisor.Store: it queues the decisions and returns nil.
func (q *recordQueue) RecordDecisions(_ context.Context, ds []advisor.DecisionRecord) error {
	if len(ds) > 0 {
		q.enqueue(func() { q.decisions = append(q.decisions, ds...) })
	}
	return nil
}

// RecordSteps implements advisor.Store: it queues the step records and returns nil.
func (q *recordQueue) RecordSteps(_ context.Context, rs []advisor.StepRecord) error {
	if len(rs) > 0 {
		q.enqueue(func() { q.steps = append(q.steps, rs...) })
	}
	return nil
}

// enqueue runs add under the lock once there is room, and starts the writer.
func (q *recordQueue) enqueue(add func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.asks)+len(q.decisions)+len(q.steps) >= maxQueuedRecords {
		q.room.Wait()
	}
	add()
	q.queued++
	if !q.writing {
		q.writing = true
		q.idle = make(chan struct{})
		go q.run()
	}
}

// run writes the queue until it is empty.
func (q *recordQueue) run() {
	for {
		q.mu.Lock()
		asks, decisions, steps := q.asks, q.decisions, q.steps
		q.asks, q.decisions, q.steps = nil, nil, nil
		upto := q.queued
		if len(asks)+len(decisions)+len(steps) == 0 {
			q.writing = false
			close(q.idle)
			q.mu.Unlock()
			return
		}
		q.room.Broadcast()
		q.mu.Unlock()
		if err := q.Store.RecordBatch(context.Background(), slices.Clip(asks), slices.Clip(decisions), slices.Clip(steps)); err != nil {
			q.log.Warn("storage: cannot record asks, decisions and steps", "asks", len(asks), "decisions", len(decisions), "steps", len(steps), "err", err)
		}
		q.mu.Lock()
		q.done = upto
		close(q.round)
		q.round = make(chan struct{})
		q.mu.Unlock()
	}
}

// mark returns the queue's position: every record queued so far is before it, and
// writtenUpTo(ctx, mark) waits for them.
func (q *recordQueue) mark() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

// writtenUpTo waits until every record queued before mark seq is written,
// or ctx ends (its error). Unlike flush it does not wait for records queued after
// the mark, so it ends under any load; seq 0 returns at once.
func (q *recordQueue) writtenUpTo(ctx context.Context, seq uint64) error {
	for {
		q.mu.Lock()
		done, round := q.done, q.round
		q.mu.Unlock()
		if done >= seq {
			return nil
		}
		select {
		case <-round:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// flush waits until everything queued so far is written, or ctx ends (its error).
func (q *recordQueue) flush(ctx context.Context) error {
	for {
		q.mu.Lock()
		writing, idle := q.writing, q.idle
		q.mu.Unlock()
		if !writing {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
