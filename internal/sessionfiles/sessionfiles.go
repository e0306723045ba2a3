// Package sessionfiles lists the real sessions that tests comparing an old and a
// new implementation run over (HELPERS.md: ../shared/sessions for unit tests,
// ../shared/corpus for scale), so that every such test reads the same sample.
package sessionfiles

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Sample returns every file of root/sessions/*/* and every third file (in glob
// order) of root/corpus/*/*, without the licence texts; root is ../shared as seen
// from the test's package directory ("../../shared"). Files a reader rejects are the
// caller's to skip; nil when root holds neither folder.
func Sample(root string) []string {
	var out []string
	sessions, _ := filepath.Glob(filepath.Join(root, "sessions", "*", "*"))
	for _, f := range sessions {
		if filepath.Base(filepath.Dir(f)) != "LICENSES" && !strings.HasSuffix(f, ".md") {
			out = append(out, f)
		}
	}
	corpus, _ := filepath.Glob(filepath.Join(root, "corpus", "*", "*"))
	for i, f := range corpus {
		if i%3 == 0 {
			out = append(out, f)
		}
	}
	return out
}

// RequiredEnv is the environment variable that makes the real sessions mandatory:
// .ci/run sets it, so that a test that needs ../shared fails there, saying why,
// instead of passing as skipped.
const RequiredEnv = "PRUNEADVISOR_TEST_SHARED_REQUIRED"

// Missing reports that the real sessions a test needs (../shared) cannot be read:
// it fails tb when RequiredEnv is set (CI), else skips it; either way with the
// message (format and args as fmt.Sprintf's).
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(RequiredEnv) != "" {
		tb.Fatalf("%s (%s is set: the real sessions in ../shared are required)", msg, RequiredEnv)
	}
	tb.Skip(msg)
}
