package advisor

import (
	"context"
	"fmt"
	"sync"
)

// MemoryStore is an in-memory Store for library use without a database and for
// tests. Originals live only as long as the process: use storage.DB when pruned
// outputs must survive a restart. Its zero value is not ready; use NewMemoryStore.
type MemoryStore struct {
	mu        sync.Mutex
	originals map[string]Original   // by recall id
	stubs     map[string]StubRecord // by recall id
	recalls   []RecallEvent
	asks      []AskRecord
	decisions []DecisionRecord
	// Fail, when set, makes SaveOriginal and SaveStub return it (fault injection).
	Fail error
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{originals: map[string]Original{}, stubs: map[string]StubRecord{}}
}

// SaveOriginal implements Store.
func (m *MemoryStore) SaveOriginal(_ context.Context, o Original) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	m.originals[o.RecallID] = o
	return nil
}

// SaveStub implements Store; it fails when the original was not saved first.
func (m *MemoryStore) SaveStub(_ context.Context, s StubRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	if _, ok := m.originals[s.RecallID]; !ok {
		return fmt.Errorf("save stub %s: original not stored", s.RecallID)
	}
	m.stubs[s.RecallID] = s
	return nil
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

// SessionStubs implements Store.
func (m *MemoryStore) SessionStubs(_ context.Context, sessionID string) (map[string]StubRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]StubRecord{}
	for _, s := range m.stubs {
		if s.SessionID == sessionID {
			out[s.OutputKey] = s
		}
	}
	return out, nil
}

// SessionRecalls implements Store.
func (m *MemoryStore) SessionRecalls(_ context.Context, sessionID string) ([]RecallEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []RecallEvent
	for _, r := range m.recalls {
		if r.SessionID == sessionID {
			out = append(out, r)
		}
	}
	return out, nil
}

// Original returns a stored original by recall id (the recall.Store method).
func (m *MemoryStore) Original(_ context.Context, id string) (Original, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.originals[id]
	if !ok {
		return Original{}, fmt.Errorf("recall %q: %w", id, ErrNotFound)
	}
	return o, nil
}

// RecordRecall stores a recall event (the recall.Store method).
func (m *MemoryStore) RecordRecall(_ context.Context, e RecallEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recalls = append(m.recalls, e)
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
