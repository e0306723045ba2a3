package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A call that reads several files and whose output was cut (pi's bash with its
// "Showing lines" note) does not say which lines of which file it shows: it
// supersedes no earlier read of them. Uncut, the same call supersedes the stale
// read of a.go (edited since) as a whole re-read does.
func TestCutReadOfSeveralFilesSupersedesNothing(t *testing.T) {
	src := "package a\n\nfunc A() {}\n"
	evs := func(out string) []ev {
		return []ev{
			{id: "r1", name: "read", args: map[string]any{"path": "a.go"}, out: src},
			{id: "e1", name: "edit", args: map[string]any{"path": "a.go", "oldText": "A", "newText": "B"}, out: "Successfully replaced text in a.go."},
			{id: "r2", name: "bash", args: map[string]any{"command": "cat a.go b.go"}, out: out},
		}
	}
	for _, tt := range []struct {
		name, out string
		want      []Death
	}{
		{"cut", "package a\n\n[Showing lines 1-2 of 9 (50.0KB limit). Use offset=3 to continue]", nil},
		{"whole", "package a\n\nfunc B() {}\npackage b\n", []Death{sup("r1", "r2", 3, "/repo/a.go")}},
	} {
		got := sortDeaths(Analyze(build(t, "/repo", evs(tt.out)...)))
		if d := cmp.Diff(sortDeaths(tt.want), got); d != "" {
			t.Errorf("%s: deaths (-want +got):\n%s", tt.name, d)
		}
	}
}
