package tuning

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// Sentinel errors of reading stored replays.
var (
	// ErrNoReplays means a store holds no finished replay (LoadGroups).
	ErrNoReplays = errors.New("no finished replays")
	// ErrNoPath means a stored replay names no session file to read again
	// (LoadSource).
	ErrNoPath = errors.New("has no stored path")
)

// Replayed is one finished replay of a session as a store lists it.
type Replayed struct {
	ID           string // the replay's session id (replay.SessionID)
	Path         string // the session file, as replay stored it (absolute when found by a walk)
	ContentHash  string // hex SHA-256 of the file's bytes when replayed
	SettingsHash string // replay.Settings.Hash of the replay
	Scorer       string // the scorer recorded with the run (replay.Settings.Scorer)
	Settings     string // the replay.Settings JSON the settings hash stands for
}

// Store is what tuning reads a replay store through (the commands adapt
// storage.DB to it), so that tuning links no storage.
type Store interface {
	// ReplayedSessions lists every session with a finished replay, ordered by
	// settings hash, then path, then id.
	ReplayedSessions(ctx context.Context) ([]Replayed, error)
	// LoadReplay reads back the replay stored under a session id (its Decisions
	// are not read back: PendingDecisions gives them).
	LoadReplay(ctx context.Context, id string) (*replay.Record, error)
	// PendingDecisions returns the pending decisions the advisor recorded in the
	// replay stored under a session id, in the order recorded.
	PendingDecisions(ctx context.Context, id string) ([]advisor.DecisionRecord, error)
}

// Group is the finished replays stored under one settings hash.
type Group struct {
	Hash     string          // the settings hash
	Settings replay.Settings // what it stands for
	Scorer   string          // the scorer recorded (replay.Settings.Scorer)
	Sessions []Replayed      // by path
}

// Cutoff is the cutoff the group's advisor pruned its scorer's scores under:
// advisor.Config.CutoffFor the recorded scorer's name.
func (g *Group) Cutoff() float64 { return g.Settings.Config.CutoffFor(g.Scorer) }

// Label names the group in reports: its scorer, settings hash, cutoff, schedule,
// digest share when the replay's digests grow with the output
// (advisor.Config.DigestShare) and number of sessions.
func (g *Group) Label() string {
	share := ""
	if d := g.Settings.Config.DigestShare; d > 0 && g.Settings.Config.DigestTokens > 0 {
		share = fmt.Sprintf(", digest_share %g", d)
	}
	return fmt.Sprintf("%s (settings %s, cutoff %s, schedule %s%s, %d sessions)", g.Scorer, short(g.Hash), calibrate.CutoffText(g.Cutoff()), g.Settings.Config.ScheduleFor(g.Scorer), share, len(g.Sessions))
}

// Scored reports whether the group's replay asked a scorer whose scores can be
// calibrated: not rules only (replay.ScorerNone), not a training replay ("keep",
// fitted.KeepScorer, which keeps everything).
func (g *Group) Scored() bool { return g.Scorer != replay.ScorerNone && g.Scorer != "keep" }

// LoadGroups reads the finished replays of store grouped by settings, most
// sessions first (then by hash). Errors: the store's; ErrNoReplays when it holds
// none; a stored settings text that does not parse (replay.ErrSettings, naming
// the hash).
func LoadGroups(ctx context.Context, store Store) ([]*Group, error) {
	rs, err := store.ReplayedSessions(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]*Group{}
	var groups []*Group
	for _, r := range rs {
		g := by[r.SettingsHash]
		if g == nil {
			st, err := replay.ParseSettings(r.Settings)
			if err != nil {
				return nil, fmt.Errorf("settings %s: %w", short(r.SettingsHash), err)
			}
			g = &Group{Hash: r.SettingsHash, Settings: st, Scorer: r.Scorer}
			by[r.SettingsHash] = g
			groups = append(groups, g)
		}
		g.Sessions = append(g.Sessions, r)
	}
	if len(groups) == 0 {
		return nil, ErrNoReplays
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if len(groups[i].Sessions) != len(groups[j].Sessions) {
			return len(groups[i].Sessions) > len(groups[j].Sessions)
		}
		return groups[i].Hash < groups[j].Hash
	})
	return groups, nil
}

// SelectGroups keeps the groups whose settings hash starts with one of prefixes
// (all groups when prefixes is empty), in their order; none when no group
// matches.
func SelectGroups(groups []*Group, prefixes []string) []*Group {
	if len(prefixes) == 0 {
		return groups
	}
	var out []*Group
	for _, g := range groups {
		for _, p := range prefixes {
			if p != "" && strings.HasPrefix(g.Hash, p) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// GroupList joins the groups' labels with "; ".
func GroupList(groups []*Group) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g.Label()
	}
	return strings.Join(parts, "; ")
}

// ScorerName is the scorer's name in a label ScorerLabel made: the label less its
// "@" and settings hash, the name a config's scorer_cutoffs and scorer_schedules
// are keyed by ("fitted" of "fitted@1a2b3c4d").
func ScorerName(label string) string {
	i := strings.LastIndexByte(label, '@')
	if i < 0 || len(label)-i-1 != 8 || strings.Trim(label[i+1:], "0123456789abcdef") != "" {
		return label // no hash suffix (a name may hold an '@' of its own)
	}
	return label[:i]
}

// ScorerLabel names a group's scorer in a report: the scorer's name, with the
// first 8 digits of the settings hash when two of groups share the scorer.
func ScorerLabel(g *Group, groups []*Group) string {
	n := 0
	for _, o := range groups {
		if o.Scorer == g.Scorer {
			n++
		}
	}
	if n > 1 {
		return g.Scorer + "@" + short(g.Hash)[:8]
	}
	return g.Scorer
}

// LoadSource reads a stored session's file again (replay.Load) and checks its
// content hash. Errors: ErrNoPath (naming the session); replay.Load's;
// replay.ErrChanged when the file's bytes changed since the replay.
func LoadSource(rs Replayed, lenient bool) (*replay.Source, error) {
	if rs.Path == "" {
		return nil, fmt.Errorf("session %s %w", rs.ID, ErrNoPath)
	}
	src, err := replay.Load(rs.Path, lenient)
	if err != nil {
		return nil, err
	}
	if src.ContentHash != rs.ContentHash {
		return nil, fmt.Errorf("%s: %w (stored %s, now %s)", rs.Path, replay.ErrChanged, short(rs.ContentHash), short(src.ContentHash))
	}
	return src, nil
}

// short returns the first 12 characters of a hash, as the commands print it.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
