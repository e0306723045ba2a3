package server

import (
	"context"
	"sync"
)

// batchQueue is the background writer the record queue (records.go) and the ledger
// (ledger.go) share: items are queued without waiting for the store, and one
// goroutine, running only while there is something to write, takes everything
// queued so far and writes it as one batch per round, in the order queued. A
// queue of max items or more makes the next add wait until the writer takes them.
// flush waits for the writer to go idle; mark and writtenUpTo wait for the items
// queued before a point only, so they end under any load.
type batchQueue[T any] struct {
	write func([]T) // writes one round's batch; called by the writer goroutine only
	max   int       // items queued at most before add waits

	mu      sync.Mutex
	items   []T
	writing bool
	idle    chan struct{} // closed when the writer stops; replaced when it starts
	room    *sync.Cond    // signalled when the writer takes the queue
	queued  uint64        // add calls so far
	done    uint64        // add calls whose items are written (or dropped by write)
	round   chan struct{} // closed when the writer ends a round; replaced then
}

// newBatchQueue returns an idle queue that writes with write and holds at most max
// items (at least one).
func newBatchQueue[T any](max int, write func([]T)) *batchQueue[T] {
	q := &batchQueue[T]{write: write, max: max, idle: make(chan struct{}), round: make(chan struct{})}
	close(q.idle)
	q.room = sync.NewCond(&q.mu)
	return q
}

// add queues items (once there is room) and starts the writer. then, when not nil,
// runs under the queue's lock after the items are queued (for counters that must
// change with them).
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
		go q.run()
	}
}

// run writes the queue until it is empty.
func (q *batchQueue[T]) run() {
	for {
		q.mu.Lock()
		items, upto := q.items, q.queued
		q.items = nil
		if len(items) == 0 {
			q.writing = false
			close(q.idle)
			q.mu.Unlock()
			return
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
