package server

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// maxQueuedRecordSets bounds the record sets (one advisor call's asks, decisions or
// step records) waiting for the background writer; past it, an advisor recording
// more waits for the writer to catch up.
const maxQueuedRecordSets = 20_000

// recordQueue is the store the server's advisors write through. Asks, decisions and
// step records (advisor.Store.RecordAsks, RecordDecisions and RecordSteps: read back
// only when an advisor starts on a session already advised) are queued and written
// by one goroutine (batchQueue), in the order they came, in one Store.RecordBatch
// per round (one commit, with storage.DB crash-safe rather than fsynced), so a
// request does not wait for their commits. A proxied request's step records are
// collected and queued together when its step ends (collect). Everything else, originals and stubs
// included, goes straight to the store: a stub is still forwarded only once its
// original is durable. flush waits for the writer. Records not yet written when the
// process dies are lost, except that a proxied request's response reaches its
// client only once the records queued before it was forwarded are written (mark,
// writtenUpTo): the asks a later step restores (advisor.Store.SessionHistoryBetween) are
// then in the store before the agent can send that step, also across kill -9. A
// failed write is logged and its records dropped, as the advisor does with a
// synchronous failure.
type recordQueue struct {
	Store
	*batchQueue[recordSet]
}

// recordSet is what one advisor call queues.
type recordSet struct {
	asks      []advisor.AskRecord
	decisions []advisor.DecisionRecord
	steps     []advisor.StepRecord
}

// newRecordQueue wraps store. Every advisor.Store method the queue does not
// override (SavePrunes, the reads) goes straight to store: the interface carries
// them, so the wrapper cannot drop one. SessionMark does too, unless a query
// for the request was started ahead (prefetchVersion).
func newRecordQueue(store Store, log *slog.Logger) (advisor.Store, *recordQueue) {
	q := &recordQueue{Store: store}
	q.batchQueue = newBatchQueue(maxQueuedRecordSets, func(sets []recordSet) {
		if len(sets) == 0 {
			return
		}
		// The sets are the queue's own (collect and the Record methods copy), so the
		// first takes the others' records: a round of one set (a sequential
		// client's) is written without a copy.
		all := sets[0]
		for _, s := range sets[1:] {
			all.asks = append(all.asks, s.asks...)
			all.decisions = append(all.decisions, s.decisions...)
			all.steps = append(all.steps, s.steps...)
		}
		if err := store.RecordBatch(context.Background(), all.asks, all.decisions, all.steps); err != nil {
			log.Warn("storage: cannot record asks, decisions and steps", "asks", len(all.asks), "decisions", len(all.decisions), "steps", len(all.steps), "err", err)
		}
	})
	return q, q
}

// stepKey is the context key of a step's collected records (collect).
type stepKey struct{}

// collect returns ctx carrying a collector for what one advisor step records, and
// the function that queues it all as one set (call it when the step returned,
// whatever it returned). The advisor records asks in the middle of a step and
// decisions and the step record at its end: queued as they come, the asks start a
// round (a commit) of their own and the rest waits for the next one, so a response
// that waits for its step's records waited for two commits one after the other.
// Collected, a step's records are one add and one round. Calls with ctx other than
// the returned one (or ones derived from it) queue at once as before. The advisor
// records on the goroutine that calls Advise, before Advise returns (advisor/step.go
// askDue and finish), so the set needs no lock.
func (q *recordQueue) collect(ctx context.Context) (context.Context, func()) {
	set := &recordSet{}
	return context.WithValue(ctx, stepKey{}, set), func() {
		if len(set.asks)+len(set.decisions)+len(set.steps) > 0 {
			q.add(nil, *set)
		}
	}
}

// collecting returns the step collector ctx carries, nil when none.
func collecting(ctx context.Context) *recordSet {
	set, _ := ctx.Value(stepKey{}).(*recordSet)
	return set
}

// RecordAsks implements advisor.Store: it queues the asks (or adds them to the
// step's collected set, collect) and returns nil.
func (q *recordQueue) RecordAsks(ctx context.Context, asks []advisor.AskRecord) error {
	if set := collecting(ctx); set != nil {
		set.asks = append(set.asks, asks...) // a copy: the caller may reuse its slice
	} else if len(asks) > 0 {
		q.add(nil, recordSet{asks: slices.Clone(asks)})
	}
	return nil
}

// RecordDecisions implements advisor.Store: it queues the decisions (or collects
// them) and returns nil.
func (q *recordQueue) RecordDecisions(ctx context.Context, ds []advisor.DecisionRecord) error {
	if set := collecting(ctx); set != nil {
		set.decisions = append(set.decisions, ds...)
	} else if len(ds) > 0 {
		q.add(nil, recordSet{decisions: slices.Clone(ds)})
	}
	return nil
}

// RecordSteps implements advisor.Store: it queues the step records (or collects
// them) and returns nil.
func (q *recordQueue) RecordSteps(ctx context.Context, rs []advisor.StepRecord) error {
	if set := collecting(ctx); set != nil {
		set.steps = append(set.steps, rs...)
	} else if len(rs) > 0 {
		q.add(nil, recordSet{steps: slices.Clone(rs)})
	}
	return nil
}

// versionKey is the context key of a request's session version read ahead
// (prefetchVersion).
type versionKey struct{}

// versionAhead is one SessionMark query started ahead of the advisor's step.
type versionAhead struct {
	id   string
	used atomic.Bool   // the advisor's first call took it
	done chan struct{} // closed once v and err are set
	v    advisor.Mark
	err  error
}

// prefetchVersion starts the store's SessionMark query (the session's version and
// latest step) for session id on a goroutine of its own and returns ctx carrying
// it: the advisor's first SessionMark call for id with that ctx (or one derived from it) takes its answer
// instead of querying, so the query (a read transaction, 0.15-0.25 ms) runs beside
// reading the body into a session rather than after it. Any read of the version is
// of some moment of the request: a stub another process saves after it is seen at
// the next step, as one saved just after a later read would be; a stub of its own
// that another process stored first fails the advisor's SavePrunes (first writer
// wins), and the advisor then reads the stubs back itself (a second SessionMark
// call in a step goes to the store). id "" (no session header: the id comes from
// the body) prefetches nothing.
func (q *recordQueue) prefetchVersion(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	f := &versionAhead{id: id, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.v, f.err = q.Store.SessionMark(ctx, id)
	}()
	return context.WithValue(ctx, versionKey{}, f)
}

// SessionMark implements advisor.Store: the answer prefetchVersion read ahead
// for this request and session, once, else the store's.
func (q *recordQueue) SessionMark(ctx context.Context, sessionID string) (advisor.Mark, error) {
	if f, _ := ctx.Value(versionKey{}).(*versionAhead); f != nil && f.id == sessionID && f.used.CompareAndSwap(false, true) {
		select {
		case <-f.done:
			return f.v, f.err
		case <-ctx.Done():
			return advisor.Mark{}, ctx.Err()
		}
	}
	return q.Store.SessionMark(ctx, sessionID)
}
