package evidence

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestLive: an output's live names (Tracker.Live) are the specific names a later
// use would still credit to it. Each clause that takes one away, in turn: the
// agent writes it (a name serves one use), a later output carries it (latest
// carrier), the user writes it. With no digest every live name is undigested;
// with a digest that holds them all, none is.
func TestLive(t *testing.T) {
	type counts struct{ R1, R1Out, C2, C2Out int }
	for _, tc := range []struct {
		digest int
		want   []counts // after each stage
	}{
		{0, []counts{{3, 3, 0, 0}, {2, 2, 0, 0}, {1, 1, 1, 1}, {0, 0, 1, 1}}},
		{64, []counts{{3, 0, 0, 0}, {2, 0, 0, 0}, {1, 0, 1, 0}, {0, 0, 1, 0}}},
	} {
		tr := NewTracker() // no word statistics: plain words ("func") are never specific
		tr.DigestTokens = tc.digest
		r1 := read("r1", "/x/a.go", 1, toolcall.Range{Start: 1, End: 50})
		c2 := &transcript.ToolCall{ID: "c2", Name: "bash", Args: json.RawMessage(`{"command":"grep -n cfg ."}`), Step: 3}
		stages := [][]*transcript.Message{
			{asst(1, "", r1), result(r1, "func parseHeader_v2()\nfunc loadConfig_v3()\nconst maxRetries_42")},
			{asst(2, "Fix parseHeader_v2 first.")},
			{asst(3, "", c2), result(c2, "loadConfig_v3 = 7")},
			{{Role: transcript.RoleUser, Step: 4, Text: "And maxRetries_42?"}},
		}
		var got []counts
		for _, msgs := range stages {
			addAll(t, tr, msgs...)
			var c counts
			c.R1, c.R1Out = tr.Live("r1")
			c.C2, c.C2Out = tr.Live("c2")
			got = append(got, c)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("digest %d: live counts after each stage (-want +got):\n%s", tc.digest, d)
		}
		if l, u := tr.Live("nope"); l != 0 || u != 0 {
			t.Errorf("unknown key: %d, %d", l, u)
		}
	}
}
