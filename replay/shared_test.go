package replay

import (
	"testing"
)

// sharedDir is the real sessions, relative to this package.
const sharedDir = "../../shared/sessions"

// sharedFiles returns the session files under sharedDir (Discover), skipping the
// test when the folder is absent.
func sharedFiles(tb testing.TB) []string {
	tb.Helper()
	found, _, _, fails := Discover([]string{sharedDir})
	if len(fails) > 0 {
		tb.Skipf("real sessions not available: %v", fails[0])
	}
	var out []string
	for _, f := range found {
		out = append(out, f.Path)
	}
	return out
}

// sharedSources loads every session under sharedDir, leniently.
func sharedSources(tb testing.TB) []*Source {
	tb.Helper()
	var out []*Source
	for _, f := range sharedFiles(tb) {
		src, err := Load(f, true)
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out = append(out, src)
	}
	return out
}
