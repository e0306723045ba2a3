// Package testkit holds the helpers the module's tests share, so that no test
// package keeps a copy of its own: scorers that score by a fixed rule in process
// (Func, Const, Noise, Recording) and a buffer one goroutine writes while the test
// reads it (SyncBuffer). Test code only: nothing outside _test.go files imports it.
package testkit

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

// Func is a scorer (advisor.Scorer) named Label that gives each card of a batch
// the keep-probability Keep returns for it, always OK; a nil Keep scores nothing
// (a scorer that only has a name). It never fails.
type Func struct {
	Label string
	Keep  func(cards.Card) float64
}

// Name returns f.Label.
func (f Func) Name() string { return f.Label }

// Score returns one OK score per card, Keep(card) each; nil without Keep.
func (f Func) Score(_ context.Context, b cards.Batch) ([]cards.Score, error) {
	if f.Keep == nil {
		return nil, nil
	}
	out := make([]cards.Score, len(b.Cards))
	for i, c := range b.Cards {
		out[i] = cards.Score{Keep: f.Keep(c), OK: true}
	}
	return out, nil
}

// Const is a scorer named name that gives every card keep.
func Const(name string, keep float64) Func {
	return Func{Label: name, Keep: func(cards.Card) float64 { return keep }}
}

// Noise is a scorer named name that gives keep 0.05 to the cards whose head holds
// "NOISE" and 0.9 to the others, so a test knows exactly which outputs go under a
// cutoff between the two.
func Noise(name string) Func {
	return Func{Label: name, Keep: func(c cards.Card) float64 {
		if strings.Contains(c.Head, "NOISE") {
			return 0.05
		}
		return 0.9
	}}
}

// Scorer is what Recording wraps: advisor.Scorer's method set, declared here so
// that testkit does not import advisor (whose own tests use testkit).
type Scorer interface {
	Name() string
	Score(ctx context.Context, b cards.Batch) ([]cards.Score, error)
}

// Recording is a scorer that keeps every batch it is asked and answers with the
// Scorer it wraps. Not safe for concurrent asks.
type Recording struct {
	Scorer
	Batches []cards.Batch
}

// Score records b and returns what the wrapped scorer answers.
func (r *Recording) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	r.Batches = append(r.Batches, b)
	return r.Scorer.Score(ctx, b)
}

// SyncBuffer is a bytes.Buffer that one goroutine (a logger, a child process's
// output) writes while others read it. The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p, under the lock.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
