package advisor

import (
	"context"
	"fmt"
	"math"
	"sync"
)

// MemoryStore is an in-memory Store (and recall.Store) for
// library use without a database and for tests. Originals live only as long as the
// process: use storage.DB when pruned outputs must survive a restart. Several
// Advisors may share one MemoryStore, as several processes share one database. Its
// zero value is not ready; use NewMemoryStore.
type MemoryStore struct {
	mu        sync.Mutex
	originals map[string]Original          // by recall id
	stubs     map[string]StubRecord        // by recall id
	bySession map[string]map[string]string // session id -> output key -> recall id of its stub
	versions  map[string]int64             // session id -> SessionVersion
	lastStep  map[string]int               // session id -> its highest step record (SessionMark)
	recalls   map[string][]RecallEvent     // by session id, in order
	asks      []AskRecord
	decisions []DecisionRecord
	steps     []StepRecord
	// Fail, when set, makes SavePrunes, SaveOriginal and SaveStub return it (fault
	// injection: storage that cannot commit).
	Fail error
	// FailReads, when set, makes SessionStubs, SessionRecalls, SessionVersion,
	// SessionMark, SessionHistory and SessionHistoryBetween return it (fault injection: storage that cannot be read).
	FailReads error
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		originals: map[string]Original{},
		stubs:     map[string]StubRecord{},
		bySession: map[string]map[string]string{},
		versions:  map[string]int64{},
		lastStep:  map[string]int{},
		recalls:   map[string][]RecallEvent{},
	}
}

// SavePrunes implements Store: every original and stub, or (with Fail set, or a
// stub other than the one stored for an output: ErrConflict) none.
func (m *MemoryStore) SavePrunes(_ context.Context, prunes []Prune) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	for _, p := range prunes {
		if p.Stub.RecallID != p.Original.RecallID {
			return fmt.Errorf("save prunes: stub %s for original %s", p.Stub.RecallID, p.Original.RecallID)
		}
		if err := m.checkStub(p.Stub); err != nil {
			return fmt.Errorf("save prunes: %w", err)
		}
	}
	for _, p := range prunes {
		m.originals[p.Original.RecallID] = p.Original
		m.saveStub(p.Stub)
	}
	return nil
}

// SaveOriginal stores an original alone (the recall.Store side). Saving again under the same recall id replaces the
// record (an output pruned again after a recall).
func (m *MemoryStore) SaveOriginal(_ context.Context, o Original) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	m.originals[o.RecallID] = o
	return nil
}

// SaveStub stores a stub alone; it fails when the original was not saved first, so a
// stub never exists without its original. A stub is stored once (first writer
// wins): the same stub again is a no-op, another one for the recall id fails with
// ErrConflict.
func (m *MemoryStore) SaveStub(_ context.Context, s StubRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	if _, ok := m.originals[s.RecallID]; !ok {
		return fmt.Errorf("save stub %s: original not stored", s.RecallID)
	}
	if err := m.checkStub(s); err != nil {
		return fmt.Errorf("save stub: %w", err)
	}
	m.saveStub(s)
	return nil
}

// checkStub fails with ErrConflict when another stub is stored under s's recall id.
func (m *MemoryStore) checkStub(s StubRecord) error {
	if old, ok := m.stubs[s.RecallID]; ok && old.Stub != s.Stub {
		return fmt.Errorf("output %q of session %q: %w: %q", old.OutputKey, old.SessionID, ErrConflict, old.Stub)
	}
	return nil
}

// saveStub stores s unless its recall id has a stub already (then the same one:
// checkStub), and counts it in the session's version.
func (m *MemoryStore) saveStub(s StubRecord) {
	if _, ok := m.stubs[s.RecallID]; ok {
		return
	}
	m.stubs[s.RecallID] = s
	keys := m.bySession[s.SessionID]
	if keys == nil {
		keys = map[string]string{}
		m.bySession[s.SessionID] = keys
	}
	keys[s.OutputKey] = s.RecallID
	m.versions[s.SessionID]++
}

// RecordAsks implements Store.
func (m *MemoryStore) RecordAsks(_ context.Context, asks []AskRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asks = append(m.asks, asks...)
	return nil
}

// RecordDecisions implements Store.
func (m *MemoryStore) RecordDecisions(_ context.Context, ds []DecisionRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.decisions = append(m.decisions, ds...)
	return nil
}

// RecordSteps implements Store.
func (m *MemoryStore) RecordSteps(_ context.Context, steps []StepRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addSteps(steps)
	return nil
}

// addSteps appends steps and raises each session's latest step; m.mu is held.
func (m *MemoryStore) addSteps(steps []StepRecord) {
	m.steps = append(m.steps, steps...)
	for _, s := range steps {
		m.lastStep[s.SessionID] = max(m.lastStep[s.SessionID], s.Step)
	}
}

// RecordBatch stores asks, decisions and step records in one call under one lock,
// as RecordAsks, RecordDecisions and RecordSteps would (the shape of
// storage.DB.RecordBatch, which the proxy's record queue uses).
func (m *MemoryStore) RecordBatch(_ context.Context, asks []AskRecord, ds []DecisionRecord, steps []StepRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asks = append(m.asks, asks...)
	m.decisions = append(m.decisions, ds...)
	m.addSteps(steps)
	return nil
}

// SessionHistory returns the session's asks in the order recorded and its latest
// step record: SessionHistoryBetween(ctx, sessionID, 0, 0).
func (m *MemoryStore) SessionHistory(ctx context.Context, sessionID string) (History, error) {
	return m.SessionHistoryBetween(ctx, sessionID, 0, 0)
}

// SessionHistoryBetween implements Store: the session's asks at steps after step
// after and before step before (no bound for before <= 0), in the order recorded,
// and its latest step record before step before.
func (m *MemoryStore) SessionHistoryBetween(_ context.Context, sessionID string, after, before int) (History, error) {
	if before <= 0 {
		before = math.MaxInt
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.FailReads != nil {
		return History{}, m.FailReads
	}
	var h History
	for _, a := range m.asks {
		if a.SessionID == sessionID && a.Step > after && a.Step < before {
			h.Asks = append(h.Asks, a)
		}
	}
	for _, s := range m.steps {
		if s.SessionID == sessionID && s.Step >= h.Last.Step && s.Step < before {
			h.Last = s
		}
	}
	return h, nil
}

// Steps returns a copy of the step records so far.
func (m *MemoryStore) Steps() []StepRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]StepRecord(nil), m.steps...)
}

// SessionStubs implements Store: a fresh map, keyed by output key.
func (m *MemoryStore) SessionStubs(_ context.Context, sessionID string) (map[string]StubRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.FailReads != nil {
		return nil, m.FailReads
	}
	keys := m.bySession[sessionID]
	out := make(map[string]StubRecord, len(keys))
	for key, id := range keys {
		out[key] = m.stubs[id]
	}
	return out, nil
}

// SessionRecalls implements Store: a copy, in the order the recalls were recorded.
func (m *MemoryStore) SessionRecalls(_ context.Context, sessionID string) ([]RecallEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.FailReads != nil {
		return nil, m.FailReads
	}
	return append([]RecallEvent(nil), m.recalls[sessionID]...), nil
}

// SessionVersion implements Store: the number of stubs saved and recalls
// recorded in the session so far.
func (m *MemoryStore) SessionVersion(_ context.Context, sessionID string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.FailReads != nil {
		return 0, m.FailReads
	}
	return m.versions[sessionID], nil
}

// SessionMark implements Store: the session's version (SessionVersion) and its
// highest step record.
func (m *MemoryStore) SessionMark(_ context.Context, sessionID string) (Mark, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.FailReads != nil {
		return Mark{}, m.FailReads
	}
	return Mark{Version: m.versions[sessionID], Step: m.lastStep[sessionID]}, nil
}

// Original returns a stored original by recall id (the recall.Store method); the
// error wraps ErrNotFound for an unknown id.
func (m *MemoryStore) Original(_ context.Context, id string) (Original, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.originals[id]
	if !ok {
		return Original{}, fmt.Errorf("recall %q: %w", id, ErrNotFound)
	}
	return o, nil
}

// RecordRecall stores a recall event (the recall.Store method). An event with Step
// 0 gets the session's latest recorded step, as storage.DB does.
func (m *MemoryStore) RecordRecall(_ context.Context, e RecallEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Step == 0 {
		for _, r := range m.steps {
			if r.SessionID == e.SessionID {
				e.Step = max(e.Step, r.Step)
			}
		}
	}
	m.recalls[e.SessionID] = append(m.recalls[e.SessionID], e)
	m.versions[e.SessionID]++
	return nil
}

// Asks returns a copy of the ask records so far.
func (m *MemoryStore) Asks() []AskRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]AskRecord(nil), m.asks...)
}

// Decisions returns a copy of the decision records so far.
func (m *MemoryStore) Decisions() []DecisionRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]DecisionRecord(nil), m.decisions...)
}

// Stubs returns a copy of every stub stored, by recall id.
func (m *MemoryStore) Stubs() map[string]StubRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]StubRecord, len(m.stubs))
	for k, v := range m.stubs {
		out[k] = v
	}
	return out
}

var _ Store = (*MemoryStore)(nil)
