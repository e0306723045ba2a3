package advisor_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

var updateStubs = flag.Bool("update-stubs", false, "rewrite testdata/stubs-*.golden from the current stub code")

// TestRealStubsGolden: the stubs of a real Claude Code session, pruned as far as
// the protections allow (every card scored 0, every pending prune paying for
// its rewrite at once), byte for byte: the frame, the reasons and the digests with
// their names in the documented order (evidence/digest.go), one space between two.
// A change to any of them shows here as a diff of real stubs; rewrite the golden
// file with go test ./advisor -run TestRealStubsGolden -update-stubs after an
// intended one.
func TestRealStubsGolden(t *testing.T) {
	const session = "sessions/claude-code/57bb5674-54b1-4ce6-9157-2d341cd9bfc1.jsonl"
	path := filepath.Join("../../shared", session)
	if _, err := os.Stat(path); err != nil {
		sessionfiles.Missing(t, "%s: %v", path, err)
	}
	s, err := transcript.ReadFile(path, transcript.Options{Lenient: true}) // the file has truncated lines
	if err != nil {
		t.Fatal(err)
	}
	cfg := advisor.DefaultConfig()
	cfg.Budget = 20_000
	cfg.PriceForced = false
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), nil), s)
	stubs := steps[len(steps)-1].plan.Stubs
	keys := make([]string, 0, len(stubs))
	for k := range stubs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	digests := 0
	for _, k := range keys {
		b.WriteString(k + "\t" + stubs[k] + "\n")
		if strings.Contains(stubs[k], "; it named ") {
			digests++
		}
	}
	if len(keys) < 10 || digests < 5 {
		t.Fatalf("%d stubs, %d with a digest: the golden file would check too little", len(keys), digests)
	}
	file := "testdata/stubs-57bb5674.golden"
	if *updateStubs {
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), b.String()); d != "" {
		t.Errorf("stubs of %s (-%s +now):\n%s", session, file, d)
	}
}
