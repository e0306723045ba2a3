package tuning

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// TestInOrder: every index is worked once and folded once, in index order, with
// its own result and error, whatever order the work finishes in; no more than
// 2*workers results wait unfolded.
func TestInOrder(t *testing.T) {
	const n, workers = 50, 3
	var mu sync.Mutex
	started, folded := map[int]int{}, 0
	var order []int
	maxAhead := 0
	InOrder(n, workers, func(i int) (int, error) {
		mu.Lock()
		started[i]++
		if ahead := i - folded; ahead > maxAhead {
			maxAhead = ahead
		}
		mu.Unlock()
		time.Sleep(time.Duration((n-i)%7) * time.Millisecond) // later indexes often finish first
		if i%10 == 3 {
			return 0, errors.New("odd one")
		}
		return i * i, nil
	}, func(i, v int, err error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, i)
		folded++
		if (err != nil) != (i%10 == 3) || err == nil && v != i*i {
			t.Errorf("index %d folded with %d, %v", i, v, err)
		}
	})
	for i := range n {
		if started[i] != 1 || order[i] != i {
			t.Fatalf("index %d started %d times, folded %d-th as %d", i, started[i], i, order[i])
		}
	}
	if maxAhead >= 2*workers {
		t.Errorf("work started %d indexes ahead of the next fold, want under %d", maxAhead, 2*workers)
	}
}

// TestParseSchedules: every-step asking first (added when missing), repeats by
// canonical form dropped, bad schedules refused.
func TestParseSchedules(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"3,6,12,24;every:2", []string{"1", "3,6,12,24", "every:2"}},
		{"3; 1 ;3;", []string{"1", "3"}},
		{"", []string{"1"}},
	} {
		got, err := ParseSchedules(tc.text)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.text, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: %q, want %q", tc.text, got, tc.want)
				break
			}
		}
	}
	if _, err := ParseSchedules("1;sometimes"); err == nil {
		t.Error(`"sometimes" accepted`)
	}
}
