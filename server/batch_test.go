package server

import (
	"context"
	"errors"
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
