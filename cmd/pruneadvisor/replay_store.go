package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/tuning"
)

// replayStore is a replay store as package tuning reads it (tuning.Store).
type replayStore struct{ db *storage.DB }

var _ tuning.Store = replayStore{}

// ReplayedSessions lists the store's finished replays (storage.DB.ReplayedSessions).
func (s replayStore) ReplayedSessions(ctx context.Context) ([]tuning.Replayed, error) {
	rs, err := s.db.ReplayedSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]tuning.Replayed, len(rs))
	for i, r := range rs {
		out[i] = tuning.Replayed{ID: r.ID, Path: r.Path, ContentHash: r.ContentHash, SettingsHash: r.SettingsHash, Scorer: r.Scorer, Settings: r.Settings}
	}
	return out, nil
}

// LoadReplay reads a replay back (storage.DB.LoadReplay).
func (s replayStore) LoadReplay(ctx context.Context, id string) (*replay.Record, error) {
	return s.db.LoadReplay(ctx, id)
}

// PendingDecisions reads a replay's pending decisions (storage.DB.Decisions).
func (s replayStore) PendingDecisions(ctx context.Context, id string) ([]advisor.DecisionRecord, error) {
	return s.db.Decisions(ctx, storage.DecisionFilter{SessionID: id, Decision: advisor.DecisionPending})
}

// openGroups opens the replay store at path and returns it with the replays
// selected by settings-hash prefixes (all when prefixes is empty), grouped by
// settings, most sessions first (tuning.LoadGroups); the caller closes the store.
// A missing SQLite file is errNoStore (requireStore), not created; a store without
// a finished replay says to run replay first; prefixes matching no replay are a
// usageError listing the stored ones.
func openGroups(ctx context.Context, path string, prefixes []string) (*storage.DB, func(), []*tuning.Group, error) {
	if err := requireStore(path, hintReplayFirst(path)); err != nil {
		return nil, nil, nil, err
	}
	db, closeDB, err := openStoreReading(ctx, io.Discard, path, "")
	if err != nil {
		return nil, nil, nil, err
	}
	all, err := tuning.LoadGroups(ctx, replayStore{db})
	if errors.Is(err, tuning.ErrNoReplays) {
		err = fmt.Errorf("no finished replays in %s: run `pruneadvisor replay --db %s PATH...` first", db.Path(), db.Path())
	}
	if err == nil {
		if groups := tuning.SelectGroups(all, prefixes); len(groups) > 0 {
			return db, closeDB, groups, nil
		}
		err = usageError{fmt.Errorf("--settings %s matches no stored replay; stored: %s", strings.Join(prefixes, ","), tuning.GroupList(all))}
	}
	closeDB()
	return nil, nil, nil, err
}
