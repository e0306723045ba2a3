package server

import (
	"context"
	"sync"
	"time"
)

// writerLinger is how long a batchQueue's writer goroutine waits for more items
// after its queue empties before it ends. A goroutine starts with a small stack, and
// the store's writes (modernc.org/sqlite's deep call chains) grew it by copying on
// every start: runtime.copystack was 0.04 s of CPU in a 600-request in-process
// BenchmarkProxy200k/steady profile (about 0.07 ms a request) when the writer started
// afresh for each one, none with it lingering (docs/PERFORMANCE.md, "3 December,
// afternoon": "The writers stay"). 30 seconds spans the usual pause between an
// agent's steps (the model's answer, the tools' run); stop ends a lingering writer
// at once.
const writerLinger = 30 * time.Second

// batchQueue is the background writer the record queue (records.go) and the ledger
// (ledger.go) share: items are queued without waiting for the store, and one
// goroutine, started by the first add and ending after writerLinger without any
// (or at stop), takes everything queued so far and writes it as one batch per
// round, in the order queued. A queue of max items or more makes the next add wait
// until the writer takes them. flush waits for the writer to go idle; mark and
// writtenUpTo wait for the items queued before a point only, so they end under any
// load.
type batchQueue[T any] struct {
	write  func([]T)     // writes one round's batch; called by the writer goroutine only
	max    int           // items queued at most before add waits
	linger time.Duration // writerLinger; tests shorten it

	mu      sync.Mutex
	items   []T
	writing bool          // items are queued or being written
	alive   bool          // the writer goroutine runs (writing or lingering)
	stopped bool          // stop was called: the writer ends as soon as it is idle
	wake    chan struct{} // a lingering writer's signal that items came (or stop); capacity 1
	idle    chan struct{} // closed when the writer goes idle; replaced when it starts writing
	room    *sync.Cond    // signalled when the writer takes the queue
	queued  uint64        // add calls so far
	done    uint64        // add calls whose items are written (or dropped by write)
	round   chan struct{} // closed when the writer ends a round; replaced then
}

// newBatchQueue returns an idle queue that writes with write and holds at most max
// items (at least one).
func newBatchQueue[T any](max int, write func([]T)) *batchQueue[T] {
	q := &batchQueue[T]{write: write, max: max, linger: writerLinger,
		wake: make(chan struct{}, 1), idle: make(chan struct{}), round: make(chan struct{})}
	close(q.idle)
	q.room = sync.NewCond(&q.mu)
	return q
}

// add queues items (once there is room) and starts the writer, or wakes it. then,
// when not nil, runs under the queue's lock after the items are queued (for
// counters that must change with them).
func (q *batchQueue[T]) add(then func(), items ...T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) >= q.max {
		q.room.Wait()
	}
	q.items = append(q.items, items...)
	q.queued++
	if then != nil {
		then()
	}
	if !q.writing {
		q.writing = true
		q.idle = make(chan struct{})
	}
	if !q.alive {
		q.alive = true
		go q.run()
		return
	}
	q.signal()
}

// signal wakes a lingering writer; a signal already pending is enough.
func (q *batchQueue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run writes the queue until it is empty, then lingers for more (rest).
func (q *batchQueue[T]) run() {
	timer := time.NewTimer(q.linger)
	defer timer.Stop()
	for {
		q.mu.Lock()
		items, upto := q.items, q.queued
		q.items = nil
		if len(items) == 0 {
			if q.writing {
				q.writing = false
				close(q.idle)
			}
			q.mu.Unlock()
			if !q.rest(timer) {
				return
			}
			continue
		}
		q.room.Broadcast()
		q.mu.Unlock()
		q.write(items)
		q.mu.Lock()
		q.done = upto
		close(q.round)
		q.round = make(chan struct{})
		q.mu.Unlock()
	}
}

// rest waits, the queue empty, until items come (true) or the linger passes or stop
// is called with nothing queued (false: the writer has ended, alive is false).
func (q *batchQueue[T]) rest(timer *time.Timer) bool {
	timer.Reset(q.linger)
	q.mu.Lock()
	stopped := q.stopped
	q.mu.Unlock()
	if !stopped {
		select {
		case <-q.wake:
			return true
		case <-timer.C:
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) > 0 {
		return true // came as the linger ended
	}
	q.alive = false
	return false
}

// stop ends the writer once it is idle, without waiting: a server shutting down
// leaves no goroutine behind. Items added later are still written (the writer then
// ends as soon as they are).
func (q *batchQueue[T]) stop() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	q.signal()
}

// mark returns the queue's position: every add so far is before it, and
// writtenUpTo(ctx, mark) waits for them.
func (q *batchQueue[T]) mark() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

// writtenUpTo waits until the items of every add before mark seq are written, or
// ctx ends (its error). Items added after the mark are not waited for; seq 0
// returns at once.
func (q *batchQueue[T]) writtenUpTo(ctx context.Context, seq uint64) error {
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
func (q *batchQueue[T]) flush(ctx context.Context) error {
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
