package replay

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"errors"
	"testing"
)

// sharedDir is the real sessions, relative to this package; corpusDir the larger
// corpus of real sessions beside them.
const (
	sharedDir = "../../shared/sessions"
	corpusDir = "../../shared/corpus"
)

// sharedFiles returns the session files under sharedDir (Discover), skipping the
// test when the folder is absent.
func sharedFiles(tb testing.TB) []string { return filesUnder(tb, sharedDir) }

// filesUnder returns the session files under dir (Discover), skipping the test when
// the folder is absent.
func filesUnder(tb testing.TB, dir string) []string {
	tb.Helper()
	found, _, _, fails := Discover([]string{dir})
	if len(fails) > 0 {
		sessionfiles.Missing(tb, "real sessions not available: %v", fails[0])
	}
	var out []string
	for _, f := range found {
		out = append(out, f.Path)
	}
	return out
}

// sharedSources loads every session under sharedDir, leniently.
func sharedSources(tb testing.TB) []*Source { return sourcesUnder(tb, sharedDir) }

// sourcesUnder loads every session under dir, leniently; files that hold no
// session (ErrNotSession: an empty Claude Code file) are left out.
func sourcesUnder(tb testing.TB, dir string) []*Source {
	tb.Helper()
	var out []*Source
	for _, f := range filesUnder(tb, dir) {
		src, err := Load(f, true)
		if errors.Is(err, ErrNotSession) {
			continue
		}
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out = append(out, src)
	}
	return out
}
