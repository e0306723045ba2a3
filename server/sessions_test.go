package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// keys returns the session ids the table holds, most recently used first.
func (t *sessionTable) keys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for el := t.lru.Front(); el != nil; el = el.Next() {
		ids = append(ids, el.Value.(*sessionEntry).key.id)
	}
	return ids
}

// A session without a request for longer than the idle time is shed on the next
// acquire or release of any session; one with a request in flight is kept however
// long it runs, and the count bound still sheds the least recently used.
func TestSessionTableIdle(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	build := func(advisorKey) (*advisor.Advisor, error) {
		return advisor.New(advisor.DefaultConfig(), nil, advisor.NewMemoryStore())
	}
	tab := newSessionTable(3, build, nil)
	tab.idle = time.Hour
	tab.now = func() time.Time { return now }
	use := func(id string) {
		e, err := tab.acquire(advisorKey{}, id)
		if err != nil {
			t.Fatal(err)
		}
		tab.release(e)
	}
	use("a")
	now = now.Add(30 * time.Minute)
	use("b")
	long, _ := tab.acquire(advisorKey{}, "long") // in flight through the rest
	now = now.Add(31 * time.Minute)              // a: 61 min idle, b: 31
	use("c")
	if d := cmp.Diff([]string{"c", "long", "b"}, tab.keys()); d != "" {
		t.Errorf("after an hour (-want +got):\n%s", d)
	}
	now = now.Add(2 * time.Hour)
	use("d")
	if d := cmp.Diff([]string{"d", "long"}, tab.keys()); d != "" {
		t.Errorf("after three hours (-want +got):\n%s", d)
	}
	tab.release(long)
	use("e")
	use("f")
	use("g")
	if d := cmp.Diff([]string{"g", "f", "e"}, tab.keys()); d != "" {
		t.Errorf("past the count bound (-want +got):\n%s", d)
	}
}

// Past MaxAdvising requests being advised, the next waits for a slot: it gets one
// as soon as one is given back, and fails with errAdviseQueue after the advise
// timeout or with the context's error when the request goes away.
func TestAdvisingSlot(t *testing.T) {
	s := &Server{advising: make(chan struct{}, 2), adviseTimeout: 50 * time.Millisecond}
	ctx := context.Background()
	done1, err := s.advisingSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done2, err := s.advisingSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.advisingSlot(ctx); !errors.Is(err, errAdviseQueue) {
		t.Errorf("third slot: %v; want errAdviseQueue", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %v; want the advise timeout", d)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.advisingSlot(gone); !errors.Is(err, context.Canceled) {
		t.Errorf("slot for a gone request: %v", err)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		done1()
	}()
	done3, err := s.advisingSlot(ctx)
	if err != nil {
		t.Errorf("slot after one was given back: %v", err)
	} else {
		done3()
	}
	done2()
	if n := len(s.advising); n != 0 {
		t.Errorf("%d slots still taken", n)
	}
}
