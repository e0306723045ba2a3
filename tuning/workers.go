package tuning

import (
	"runtime"
	"sync"
)

// InOrder runs work(i) for i in [0, n) on up to workers goroutines (workers < 1:
// runtime.NumCPU()) and calls fold with each result in index order, from one
// goroutine at a time, returning when every result is folded. A result waits for
// the ones before it, and no work starts more than 2*workers indexes ahead of the
// next to fold, so at most about that many results are held at once: a caller
// that folds each session into running totals holds a few sessions whatever
// their number. It is the one worker pool of the tuning commands (calibrate's
// in-process baselines, backoff's schedules).
func InOrder[T any](n, workers int, work func(i int) (T, error), fold func(i int, v T, err error)) {
	if workers < 1 {
		workers = runtime.NumCPU()
	}
	window := 2 * workers
	type result struct {
		v   T
		err error
	}
	var mu sync.Mutex
	room := sync.NewCond(&mu)
	next := 0
	held := map[int]result{}
	each(n, workers, func(i int) {
		mu.Lock()
		for i >= next+window {
			room.Wait()
		}
		mu.Unlock()
		v, err := work(i)
		mu.Lock()
		defer mu.Unlock()
		held[i] = result{v, err}
		for r, ok := held[next]; ok; r, ok = held[next] {
			delete(held, next)
			fold(next, r.v, r.err)
			next++
		}
		room.Broadcast()
	})
}

// each runs fn(i) for i in [0, n), in index order of start, on min(workers, n)
// goroutines (at least one), and returns when all have returned.
func each(n, workers int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
