package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDiscover walks a tree shaped like the agents' session folders, with side
// files, a version-control folder, a symlink loop, a second link to a folder and
// a link to a file already found.
func TestDiscover(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target, rel string) {
		if err := os.Symlink(target, filepath.Join(root, rel)); err != nil {
			t.Skipf("symlinks not supported: %v", err)
		}
	}
	// Claude Code: projects/<cwd>/<session>.jsonl, subagents with .meta.json, tool-results.
	write("claude/-home-me-proj/aaa.jsonl", "x")
	write("claude/-home-me-proj/aaa/subagents/agent-1.jsonl", "x")
	write("claude/-home-me-proj/aaa/subagents/agent-1.meta.json", "{}")
	write("claude/-home-me-proj/aaa/tool-results/toolu_1.txt", "big output")
	// pi and Codex layouts.
	write("pi/--home-me-proj--/2025-01-01T00-00-00_u.jsonl", "x")
	write("codex/2025/08/14/rollout-1.jsonl", "x")
	// SWE-agent and mini-swe-agent.
	write("swe/run/x.traj", "x")
	write("swe/run/y.TRAJ.JSON", "x")
	// Not sessions by name, and a folder never entered.
	write("claude/README.md", "hi")
	write("claude/.git/objects/zz.json", "x")
	write("node_modules/pkg/package.json", "x")
	// Links: a loop back to the root, a second link to the pi folder, a link to a
	// file found already.
	link(root, "claude/-home-me-proj/loop")
	link(filepath.Join(root, "pi"), "pi-again")
	link(filepath.Join(root, "codex/2025/08/14/rollout-1.jsonl"), "codex/latest.jsonl")
	explicit := write("other/notes.txt", "x")
	missing := filepath.Join(root, "nope")

	found, skips, ignored, fails := Discover([]string{root, explicit, missing})
	rel := func(p string) string {
		r, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var gotFound []string
	for _, f := range found {
		s := rel(f.Path)
		if f.Explicit {
			s += " (explicit)"
		}
		gotFound = append(gotFound, s)
	}
	wantFound := []string{
		"claude/-home-me-proj/aaa/subagents/agent-1.jsonl",
		"claude/-home-me-proj/aaa.jsonl",
		"codex/2025/08/14/rollout-1.jsonl",
		"pi/--home-me-proj--/2025-01-01T00-00-00_u.jsonl",
		"swe/run/x.traj",
		"swe/run/y.TRAJ.JSON",
		"other/notes.txt (explicit)",
	}
	if diff := cmp.Diff(wantFound, gotFound); diff != "" {
		t.Errorf("found (-want +got):\n%s", diff)
	}
	var gotSkips []string
	for _, s := range skips {
		reason := s.Reason
		if i := strings.Index(reason, " as "); i >= 0 {
			reason = reason[:i]
		}
		if strings.HasPrefix(reason, "same file") {
			reason = "same file"
		}
		gotSkips = append(gotSkips, rel(s.Path)+": "+reason)
	}
	wantSkips := []string{
		"claude/-home-me-proj/loop: folder already walked",
		"codex/latest.jsonl: same file",
		"pi-again: folder already walked",
	}
	if diff := cmp.Diff(wantSkips, gotSkips); diff != "" {
		t.Errorf("skips (-want +got):\n%s", diff)
	}
	// The walk passes over README.md, agent-1.meta.json, toolu_1.txt and
	// other/notes.txt by name; notes.txt is still found, as named explicitly.
	if ignored != 4 {
		t.Errorf("ignored = %d, want 4 (README.md, agent-1.meta.json, toolu_1.txt, other/notes.txt by name)", ignored)
	}
	if len(fails) != 1 || fails[0].Path != missing || !os.IsNotExist(fails[0].Err) {
		t.Errorf("failures = %v, want the missing path only", fails)
	}
}
