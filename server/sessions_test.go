package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/prices"
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

// The bound on advisors counts budgets and recall tool names: a pair's advisors for
// the three providers count once, and a seventeenth pair is refused.
func TestSessionTableAdvisorBound(t *testing.T) {
	built := map[advisorKey]string{}
	build := func(k advisorKey) (*advisor.Advisor, error) {
		cfg := advisor.DefaultConfig()
		cfg.Provider = string(k.provider)
		a, err := advisor.New(cfg, nil, advisor.NewMemoryStore())
		if err != nil {
			return nil, err
		}
		built[k] = a.Config.Provider
		return a, nil
	}
	tab := newSessionTable(1000, build, nil)
	for i := range maxBudgets {
		for _, p := range prices.Providers() {
			k := advisorKey{recallTool: fmt.Sprintf("tool%d", i), provider: p}
			e, err := tab.acquire(k, "s")
			if err != nil {
				t.Fatalf("pair %d, %s: %v", i, p, err)
			}
			tab.release(e)
			if built[k] != string(p) {
				t.Errorf("the advisor for %v plans with %q", k, built[k])
			}
		}
	}
	if got, want := len(built), maxBudgets*len(prices.Providers()); got != want {
		t.Errorf("%d advisors; want %d", got, want)
	}
	if _, err := tab.acquire(advisorKey{recallTool: "one-too-many", provider: prices.OpenAI}, "s"); !errors.Is(err, errTooManyBudgets) {
		t.Errorf("pair %d: %v; want errTooManyBudgets", maxBudgets+1, err)
	}
}
