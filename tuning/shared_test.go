package tuning

import (
	"errors"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// sharedDir is the real sessions, relative to this package.
const sharedDir = "../../shared/sessions"

// sharedSources loads every session under sharedDir (replay.Discover),
// leniently, skipping the test when the folder is absent; files that hold no
// session (replay.ErrNotSession: an empty Claude Code file) are left out.
func sharedSources(tb testing.TB) []*replay.Source {
	tb.Helper()
	found, _, _, fails := replay.Discover([]string{sharedDir})
	if len(fails) > 0 {
		sessionfiles.Missing(tb, "real sessions not available: %v", fails[0])
	}
	var out []*replay.Source
	for _, f := range found {
		src, err := replay.Load(f.Path, true)
		if errors.Is(err, replay.ErrNotSession) {
			continue
		}
		if err != nil {
			tb.Fatalf("%s: %v", f.Path, err)
		}
		out = append(out, src)
	}
	return out
}
