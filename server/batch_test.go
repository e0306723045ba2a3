package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// writtenUpTo waits for the rounds holding the adds before its mark and not for
// later ones; each round takes everything queued when it starts; flush waits for
// the writer to go idle.
func TestBatchQueueMark(t *testing.T) {
	started := make(chan []string)
	release := make(chan struct{})
	q := newBatchQueue(10, func(batch []string) {
		started <- batch
		<-release
	})
	ctx := context.Background()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	if err := q.writtenUpTo(short(), 0); err != nil {
		t.Errorf("writtenUpTo(0) = %v; want nil at once", err)
	}
	q.add(nil, "a")
	if d := cmp.Diff([]string{"a"}, <-started); d != "" {
		t.Errorf("round 1 (-want +got):\n%s", d)
	}
	m := q.mark()
	q.add(nil, "b")
	q.add(nil, "c")
	if err := q.writtenUpTo(short(), m); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("writtenUpTo(mark) while round 1 is written = %v; want a deadline error", err)
	}
	release <- struct{}{}
	if d := cmp.Diff([]string{"b", "c"}, <-started); d != "" {
		t.Errorf("round 2 (-want +got):\n%s", d)
	}
	if err := q.writtenUpTo(short(), m); err != nil {
		t.Errorf("writtenUpTo(mark) after round 1 = %v; want nil (round 2 holds only later adds)", err)
	}
	if err := q.writtenUpTo(short(), q.mark()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("writtenUpTo(now) while round 2 is written = %v; want a deadline error", err)
	}
	if err := q.flush(short()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("flush while round 2 is written = %v; want a deadline error", err)
	}
	release <- struct{}{}
	if err := q.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.writtenUpTo(short(), q.mark()); err != nil {
		t.Errorf("writtenUpTo(now) when idle = %v; want nil", err)
	}
}

// recordingQueue returns a queue of at most 10 items whose writer keeps what it
// writes, and the function that returns it so far.
func recordingQueue() (*batchQueue[string], func() []string) {
	var mu sync.Mutex
	var got []string
	q := newBatchQueue(10, func(batch []string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, batch...)
	})
	return q, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// writerAlive reports whether q's writer goroutine runs (writing or lingering).
func writerAlive[T any](q *batchQueue[T]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.alive
}

// waitWriterEnd waits up to 5 seconds for q's writer to end and says whether it did.
func waitWriterEnd[T any](q *batchQueue[T]) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !writerAlive(q) {
			return true
		}
	}
	return false
}

// The writer stays after its queue empties (flush returns: it is idle, not gone),
// writes what comes meanwhile, ends once the linger passes with nothing queued, and
// starts again for the next add.
func TestBatchQueueLinger(t *testing.T) {
	q, written := recordingQueue()
	q.linger = 200 * time.Millisecond
	ctx := context.Background()
	q.add(nil, "a")
	if err := q.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if !writerAlive(q) {
		t.Fatal("writer ended as soon as its queue emptied; want it lingering")
	}
	q.add(nil, "b") // taken by the lingering writer
	if err := q.writtenUpTo(ctx, q.mark()); err != nil {
		t.Fatal(err)
	}
	if !waitWriterEnd(q) {
		t.Fatalf("writer still running 5 s after its queue emptied (linger %v)", q.linger)
	}
	q.add(nil, "c")
	if err := q.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a", "b", "c"}, written()); d != "" {
		t.Errorf("written (-want +got):\n%s", d)
	}
}

// stop ends a lingering writer at once; an add after it is still written, by a
// writer that ends when it is done.
func TestBatchQueueStop(t *testing.T) {
	q, written := recordingQueue()
	q.linger = time.Hour
	ctx := context.Background()
	q.add(nil, "a")
	if err := q.flush(ctx); err != nil {
		t.Fatal(err)
	}
	q.stop()
	if !waitWriterEnd(q) {
		t.Fatal("writer still lingering 5 s after stop")
	}
	q.add(nil, "b")
	if err := q.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if !waitWriterEnd(q) {
		t.Fatal("writer started after stop still running 5 s after its write")
	}
	if d := cmp.Diff([]string{"a", "b"}, written()); d != "" {
		t.Errorf("written (-want +got):\n%s", d)
	}
}
