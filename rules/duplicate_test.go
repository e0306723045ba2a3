package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDifferentToolsAreNotDuplicates: an output is a duplicate only of a later
// output of the same tool with the same arguments and text. Glob and Grep take the
// same arguments ({"pattern": …}) and can print the same text (one path), but a
// Grep that finds the pattern in a file says something a Glob of file names does
// not: the earlier one stays. (Issue 40: a duplicate key built without the tool
// name killed the Glob.)
func TestDifferentToolsAreNotDuplicates(t *testing.T) {
	const hit = "/repo/src/handler.go\n"
	tests := []struct {
		name string
		evs  []ev
		want []Death
	}{
		{"Glob then Grep, same pattern and text", []ev{
			{id: "g1", name: "Glob", args: map[string]any{"pattern": "handler"}, out: hit},
			{id: "g2", name: "Grep", args: map[string]any{"pattern": "handler"}, out: hit},
		}, nil},
		{"Grep twice, same pattern and text", []ev{
			{id: "g1", name: "Grep", args: map[string]any{"pattern": "handler"}, out: hit},
			{id: "g2", name: "Grep", args: map[string]any{"pattern": "handler"}, out: hit},
		}, []Death{dup("g1", "g2", 2)}},
		{"Grep twice, other text", []ev{
			{id: "g1", name: "Grep", args: map[string]any{"pattern": "handler"}, out: hit},
			{id: "g2", name: "Grep", args: map[string]any{"pattern": "handler"}, out: "/repo/src/other.go\n"},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sortDeaths(Analyze(build(t, "/repo", tt.evs...)))
			if d := cmp.Diff(sortDeaths(tt.want), got); d != "" {
				t.Errorf("deaths (-want +got):\n%s", d)
			}
		})
	}
}
