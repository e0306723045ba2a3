package evidence

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestPreview: a use is held by Gemini CLI's preview when every compound the agent
// wrote has a name in the output's first or last PreviewChars characters. The
// output: head_name_a1 in the first line, mid_name_b2 in the middle, tail_name_c3
// in the last line, about 1,300 characters in all, and edge_name_d4 straddling the
// head's edge (only its first characters are in the head).
func TestPreview(t *testing.T) {
	var b strings.Builder
	b.WriteString("head_name_a1 opens the listing\n")
	for b.Len() < 250-6 {
		b.WriteString("x")
	}
	b.WriteString(" edge_name_d4 follows\n")
	for i := 0; b.Len() < 600; i++ {
		fmt.Fprintf(&b, "filler line %d\n", i)
	}
	b.WriteString("mid_name_b2 sits in the middle\n")
	for i := 0; b.Len() < 1250; i++ {
		fmt.Fprintf(&b, "more filler %d\n", i)
	}
	b.WriteString("the end: tail_name_c3\n")
	out := b.String()
	tests := []struct {
		said  string
		want  bool
		names int // Use.NamesPreviewed: the names of the use the preview holds
	}{
		{"Open head_name_a1.", true, 1},
		{"Open tail_name_c3.", true, 1},
		{"Open mid_name_b2.", false, 0},
		{"Open edge_name_d4.", false, 0},
		{"Compare head_name_a1 with tail_name_c3.", true, 2},
		{"Compare head_name_a1 with mid_name_b2.", false, 1},
	}
	for _, tt := range tests {
		c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: []byte(`{"command":"cat listing"}`), Step: 1}
		tr := NewTracker()
		got := addAll(t, tr, asst(1, "", c1), result(c1, out), asst(2, tt.said))
		if len(got) != 1 {
			t.Fatalf("%q: %d uses; want 1", tt.said, len(got))
		}
		if got[0].Preview != tt.want {
			t.Errorf("%q: Preview %v; want %v", tt.said, got[0].Preview, tt.want)
		}
		if got[0].NamesPreviewed != tt.names {
			t.Errorf("%q: NamesPreviewed %d; want %d (names %v)", tt.said, got[0].NamesPreviewed, tt.names, got[0].NameDigests)
		}
	}
	// A short output is its own preview.
	c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: []byte(`{"command":"ls"}`), Step: 1}
	got := addAll(t, NewTracker(), asst(1, "", c1), result(c1, "mid_name_b2\n"), asst(2, "Open mid_name_b2."))
	if d := cmp.Diff([]bool{true}, []bool{len(got) == 1 && got[0].Preview}); d != "" {
		t.Errorf("short output (-want +got):\n%s", d)
	}
}
