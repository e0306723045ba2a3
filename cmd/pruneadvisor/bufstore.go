package main

import (
	"context"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// flushEvery is how many records bufferedStore holds before it writes them.
const flushEvery = 5000

// bufferedStore is the store `advise` runs the advisor on: rewrites (SavePrunes) and
// every read go straight to the database, so an original is committed before its
// stub as always; asks, decisions and step records (the log, which a simulation
// never reads back) are held and written in batches of flushEvery, and by flush.
// Without it a 100,000-step session made two SQLite commits per step.
type bufferedStore struct {
	advisor.Store
	asks      []advisor.AskRecord
	decisions []advisor.DecisionRecord
	steps     []advisor.StepRecord
	err       error // the first write error
}

func (b *bufferedStore) RecordAsks(ctx context.Context, asks []advisor.AskRecord) error {
	b.asks = append(b.asks, asks...)
	return b.maybeFlush(ctx)
}

func (b *bufferedStore) RecordDecisions(ctx context.Context, ds []advisor.DecisionRecord) error {
	b.decisions = append(b.decisions, ds...)
	return b.maybeFlush(ctx)
}

func (b *bufferedStore) RecordSteps(ctx context.Context, rs []advisor.StepRecord) error {
	b.steps = append(b.steps, rs...)
	return b.maybeFlush(ctx)
}

func (b *bufferedStore) maybeFlush(ctx context.Context) error {
	if len(b.asks)+len(b.decisions)+len(b.steps) < flushEvery {
		return nil
	}
	return b.flush(ctx)
}

// flush writes what is held; it returns (and keeps) the first error.
func (b *bufferedStore) flush(ctx context.Context) error {
	if b.err == nil && len(b.asks) > 0 {
		b.err = b.Store.RecordAsks(ctx, b.asks)
	}
	if b.err == nil && len(b.decisions) > 0 {
		b.err = b.Store.RecordDecisions(ctx, b.decisions)
	}
	if b.err == nil && len(b.steps) > 0 {
		b.err = b.Store.RecordSteps(ctx, b.steps)
	}
	b.asks, b.decisions, b.steps = b.asks[:0], b.decisions[:0], b.steps[:0]
	return b.err
}
