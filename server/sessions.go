package server

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/report"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// maxBudgets bounds how many distinct per-request budgets (POST /v1/advise "budget")
// and recall tool names (X-Pruneadvisor-Recall-Tool) together a server keeps an
// advisor for.
const maxBudgets = 16

// advisorKey is what tells the server's advisors apart: the budget (0: the
// configured one), the recall tool stubs name ("": the configured one; with
// noRecall, none: the agent has no recall tool, recallKey) and the provider whose
// prices plan the rewrites, and the agent (whose compaction point is the hard
// limit): a proxy route's (wire.Spec.Provider), so that the
// planner prices a request as the ledger bills it; "" for the sidecar
// (Config.Provider, else the format's).
type advisorKey struct {
	budget     int
	recallTool string
	noRecall   bool
	provider   prices.Provider
	// agent is the request's agent (Server.agentOf), whose compaction point is
	// the hard limit; "" for the configured one, or none.
	agent string
}

// sessionTable keeps one advisor per budget and bounds the sessions whose state the
// advisors hold in memory: past max, the least recently used idle session is
// forgotten (advisor.Forget), and so is every session without a request for longer
// than idle (looked at on each acquire and release). Its frozen stubs stay in the
// store and come back on its next request. A session with a request in flight is
// never forgotten.
type sessionTable struct {
	mu       sync.Mutex
	max      int
	build    func(k advisorKey) (*advisor.Advisor, error)
	advisors map[advisorKey]*advisor.Advisor
	lru      *list.List // of *sessionEntry, most recent first
	byKey    map[sessionKey]*list.Element
	onSize   func(n int)
	idle     time.Duration    // 0: never by time
	now      func() time.Time // nil: time.Now
}

type sessionKey struct {
	adv advisorKey
	id  string
}

// sessionEntry is one session's slot. inflight is guarded by the table's lock.
type sessionEntry struct {
	key      sessionKey
	adv      *advisor.Advisor
	inflight int
	last     time.Time // when its latest request started or ended (the lru's order)
	// mu serialises the session's steps in the server: the advisor serialises
	// Advise itself, but the plan it returns shares the advisor's item table, which
	// the session's next step updates in place.
	mu sync.Mutex
	// warnedNoRecall is set once the server logged that the session's agent has no
	// recall tool (warnNoRecall).
	warnedNoRecall atomic.Bool
	// live is what /ui/ shows of the session (ui.go), under its own lock so that
	// the page never waits for a step in progress.
	live liveState
}

// runStep runs one step of the session of e on sess under the advise timeout
// (Options.AdviseTimeout), the step's records written as one round of the record
// queue before it returns: what the proxy and the sidecar both do for a step.
func (s *Server) runStep(ctx context.Context, e *sessionEntry, sess *transcript.Session) (advisor.Plan, error) {
	actx, cancel := context.WithTimeout(ctx, s.adviseTimeout)
	defer cancel()
	actx, queue := s.records.collect(actx)
	plan, err := e.advise(actx, sess)
	queue() // the step's records, one round of the record queue
	return plan, err
}

// advise runs one step of the session and returns a plan of its own (a clone, so a
// concurrent request of the same session cannot change it).
func (e *sessionEntry) advise(ctx context.Context, s *transcript.Session) (advisor.Plan, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	plan, err := e.adv.Advise(ctx, s)
	if err != nil {
		return plan, err
	}
	plan = plan.Clone()
	e.live.note(plan)
	return plan, nil
}

func newSessionTable(max int, build func(advisorKey) (*advisor.Advisor, error), onSize func(int)) *sessionTable {
	return &sessionTable{
		max: max, build: build, onSize: onSize,
		advisors: map[advisorKey]*advisor.Advisor{},
		lru:      list.New(),
		byKey:    map[sessionKey]*list.Element{},
	}
}

// errTooManyBudgets is returned by acquire for a budget past maxBudgets distinct ones.
var errTooManyBudgets = fmt.Errorf("at most %d distinct budgets and recall tool names per server", maxBudgets)

// acquire returns the session's entry, marked in flight; release it when done.
func (t *sessionTable) acquire(ak advisorKey, id string) (*sessionEntry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := sessionKey{ak, id}
	if el, ok := t.byKey[k]; ok {
		t.lru.MoveToFront(el)
		e := el.Value.(*sessionEntry)
		e.inflight++
		e.last = t.clock()
		return e, nil
	}
	adv, ok := t.advisors[ak]
	if !ok {
		if t.tooMany(ak) {
			return nil, errTooManyBudgets
		}
		var err error
		if adv, err = t.build(ak); err != nil {
			return nil, err
		}
		t.advisors[ak] = adv
	}
	e := &sessionEntry{key: k, adv: adv, inflight: 1, last: t.clock()}
	t.byKey[k] = t.lru.PushFront(e)
	t.evictLocked()
	return e, nil
}

// tooMany reports whether an advisor for ak would pass maxBudgets distinct budgets
// and recall tool names (the advisors of one pair for several providers count once).
func (t *sessionTable) tooMany(ak advisorKey) bool {
	pair := func(k advisorKey) advisorKey { return advisorKey{budget: k.budget, recallTool: k.recallTool} }
	pairs := map[advisorKey]bool{}
	for k := range t.advisors {
		pairs[pair(k)] = true
	}
	return !pairs[pair(ak)] && len(pairs) >= maxBudgets
}

// release marks one request of e done and evicts idle sessions over the bound.
func (t *sessionTable) release(e *sessionEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.inflight--
	e.last = t.clock()
	if el, ok := t.byKey[e.key]; ok {
		t.lru.MoveToFront(el) // the list stays in the order of last
	}
	t.evictLocked()
}

func (t *sessionTable) clock() time.Time {
	if t.now == nil {
		return time.Now()
	}
	return t.now()
}

// evictLocked forgets idle sessions from the least recently used end: while there
// are more than max, and those idle for longer than t.idle.
func (t *sessionTable) evictLocked() {
	var stale time.Time // sessions last used before it are shed
	if t.idle > 0 {
		stale = t.clock().Add(-t.idle)
	}
	for el := t.lru.Back(); el != nil; {
		prev := el.Prev()
		e := el.Value.(*sessionEntry)
		over := t.lru.Len() > t.max
		if !over && !e.last.Before(stale) {
			break // the rest were used later
		}
		if e.inflight == 0 {
			t.lru.Remove(el)
			delete(t.byKey, e.key)
			e.adv.Forget(e.key.id)
		}
		el = prev
	}
	if t.onSize != nil {
		t.onSize(t.lru.Len())
	}
}

// snapshot returns what /ui/ shows of every session held, the most recently used
// first.
func (t *sessionTable) snapshot() []report.LiveSession {
	t.mu.Lock()
	entries := make([]*sessionEntry, 0, t.lru.Len())
	for el := t.lru.Front(); el != nil; el = el.Next() {
		entries = append(entries, el.Value.(*sessionEntry))
	}
	t.mu.Unlock()
	out := make([]report.LiveSession, 0, len(entries))
	for _, e := range entries {
		if ls, ok := e.live.get(); ok {
			out = append(out, ls)
		}
	}
	return out
}

// len returns the number of sessions held.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}
