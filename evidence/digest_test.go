package evidence

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestDigest works the digest rule out by hand on one output (digest.go):
//
//	candidates, by position: src/server.go (the last two segments of the path
//	/repo/src/server.go: specificity 3, cost 3: " src", "/server", ".go" in
//	o200k_base), parseConfigFile (inner capital: 2, cost 3: " parse", "Config",
//	"File"), MAX_SIZE ('_': 2, cost 2), 42000 (1, cost 3: " ", "420", "00");
//	"then" and "readme" are plain words common in the background: no candidates.
//	by specificity over the squared cost: MAX_SIZE 2/4, src/server.go 3/9,
//	parseConfigFile 2/9, 42000 1/9; cumulative cost 2, 5, 8, 11.
func TestDigest(t *testing.T) {
	bg := &Background{Sessions: 100, MinShare: DefaultMinShare, Counts: map[string]int{"then": 50, "readme": 9}}
	tr := NewTracker()
	tr.Background, tr.DigestTokens = bg, 100
	c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"cat notes"}`), Step: 1}
	m := result(c1, "see /repo/src/server.go and parseConfigFile then MAX_SIZE 42000 and readme\n")
	m.Outputs[0].Tokens = 30
	addAll(t, tr, asst(1, "", c1), m)
	for _, tt := range []struct {
		budget int
		want   []string
	}{
		{0, nil}, {1, nil}, {2, []string{"MAX_SIZE"}}, {4, []string{"MAX_SIZE"}},
		{5, []string{"MAX_SIZE", "src/server.go"}},
		{7, []string{"MAX_SIZE", "src/server.go"}},
		{8, []string{"MAX_SIZE", "src/server.go", "parseConfigFile"}},
		{10, []string{"MAX_SIZE", "src/server.go", "parseConfigFile"}},
		{11, []string{"MAX_SIZE", "src/server.go", "parseConfigFile", "42000"}},
		{100, []string{"MAX_SIZE", "src/server.go", "parseConfigFile", "42000"}},
	} {
		if d := cmp.Diff(tt.want, tr.Digest("c1", tt.budget)); d != "" {
			t.Errorf("Digest(c1, %d) (-want +got):\n%s", tt.budget, d)
		}
	}
	// The budget that holds a use: the path's base name is held with its
	// compound's candidate (5); two compounds need both (max of 11 and 8); a
	// common plain word is no use.
	got := addAll(t, tr, asst(2, "Open `server.go` next."), asst(3, "", &transcript.ToolCall{ID: "c2", Name: "bash", Args: json.RawMessage(`{"n":"42000","f":"parseConfigFile"}`), Step: 3}), asst(4, "", &transcript.ToolCall{ID: "c3", Name: "bash", Args: json.RawMessage(`{"x":"readme"}`), Step: 4}))
	var digests []int
	for _, u := range got {
		digests = append(digests, u.Digest)
	}
	if d := cmp.Diff([]int{5, 11}, digests); d != "" {
		t.Errorf("uses %+v: digest budgets (-want +got):\n%s", got, d)
	}
	// Per name (Use.NameDigests), in the order the agent's words are read (an
	// object's values in key order: "f" before "n"): server.go alone (5); then
	// parseConfigFile (8) and 42000 (11), so that a digest of 8 to 10 tokens
	// holds one of the two names of that use and not the use.
	var names [][]int
	for _, u := range got {
		names = append(names, u.NameDigests)
	}
	if d := cmp.Diff([][]int{{5}, {8, 11}}, names); d != "" {
		t.Errorf("uses %+v: digest budgets per name (-want +got):\n%s", got, d)
	}
	// Kept only up to DigestTokens, and only for outputs of DigestMinTokens or more.
	tr2 := NewTracker()
	tr2.Background, tr2.DigestTokens, tr2.DigestMinTokens = bg, 9, 31
	c9 := &transcript.ToolCall{ID: "c9", Name: "bash", Args: json.RawMessage(`{}`), Step: 1}
	m = result(c9, "see /repo/src/server.go and parseConfig then MAX_SIZE 42000 and readme\n")
	m.Outputs[0].Tokens = 30
	addAll(t, tr2, asst(1, "", c9), m)
	if got := tr2.Digest("c9", 100); got != nil {
		t.Errorf("an output under DigestMinTokens kept %v", got)
	}
	tr2.DigestMinTokens, tr2.DigestTokens = 0, 5
	c10 := &transcript.ToolCall{ID: "c10", Name: "bash", Args: json.RawMessage(`{}`), Step: 2}
	m = result(c10, "fresh_name_a fresh_name_b_long_one fresh_name_c")
	addAll(t, tr2, asst(2, "", c10), m)
	// a and c (2/9 each, by position) before b (2/25): 6 tokens, within
	// DigestKeep x 5 = 10; b (5 more) is past them.
	if d := cmp.Diff([]string{"fresh_name_a", "fresh_name_c"}, tr2.Digest("c10", 100)); d != "" {
		t.Errorf("kept beyond DigestKeep x DigestTokens 5 (-want +got):\n%s", d)
	}
}

// TestDigestString: the digest names of an output are kept in one string, each
// after its length as a uvarint and before its cost as a uvarint; a name of 200
// bytes takes a two-byte length (200 = 0xc8: 0xc8 0x01), as does a cost of 300
// (0xac 0x02), a NUL inside a name is a byte like any other, and the names and
// costs come back whole and in order.
func TestDigestString(t *testing.T) {
	long := strings.Repeat("x", 200)
	names := []string{"a", "src/\x00evil.go", long, "parseConfig"}
	costs := []int{1, 300, 25, 2}
	var buf []byte
	for i, n := range names {
		buf = binary.AppendUvarint(buf, uint64(len(n)))
		buf = append(buf, n...)
		buf = binary.AppendUvarint(buf, uint64(costs[i]))
	}
	at := 1 + len("a") + 1 + 1 + len("src/\x00evil.go") // the second name's cost
	if buf[at] != 0xac || buf[at+1] != 0x02 || buf[at+2] != 0xc8 || buf[at+3] != 0x01 {
		t.Fatalf("the cost 300 and the long name's length are not the two-byte uvarints ac 02 and c8 01: % x", buf[:at+4])
	}
	var got []string
	var gotCosts []int
	for rest := string(buf); rest != ""; {
		var n string
		var c int
		n, c, rest = nextDigestName(rest)
		got, gotCosts = append(got, n), append(gotCosts, c)
	}
	if d := cmp.Diff(names, got); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	if d := cmp.Diff(costs, gotCosts); d != "" {
		t.Errorf("costs (-want +got):\n%s", d)
	}
	// A string cut inside a length or a cost ends the walk without a panic.
	for cut := range buf {
		for rest := string(buf[:cut]); rest != ""; {
			_, _, rest = nextDigestName(rest)
		}
	}
}

// TestDigestText: a digest writes a name as it is, and a quoted phrase of several
// words between quotes that it does not hold, so that names joined by spaces stay
// apart; the cost is that of the text written, with the space before it.
func TestDigestText(t *testing.T) {
	for _, tt := range []struct {
		name, want string
		// o200k tokens of " "+want, by its pre-split: ` "`, handler, 0, :, ` nil`,
		// ` request`, `"` are one token each
		cost int
	}{
		{"parseConfig", "parseConfig", 2},
		{"handler0: nil request", `"handler0: nil request"`, 7},
		{`say "hi" now`, "`say \"hi\" now`", 7},
		{"it's `x` \"y\"", `'it's ` + "`x`" + ` "y"'`, 8},
		{"tab\there", `"tab` + "\t" + `here"`, 5},
	} {
		if got := digestText(tt.name); got != tt.want {
			t.Errorf("digestText(%q) = %q; want %q", tt.name, got, tt.want)
		}
		if got := DigestNameTokens(tt.name); got != tt.cost {
			t.Errorf("DigestNameTokens(%q) = %d; want %d", tt.name, got, tt.cost)
		}
	}
}

// TestDigestLiveNames works out by hand how a digest leaves out the names that
// stopped being live for its output (digest.go, "Live names only"), on TestDigest's
// output (MAX_SIZE 2, src/server.go 3, parseConfigFile 3, 42000 3 tokens, in
// digest order) at step 1, with Tracker.DigestFrom 3 and 10:
//
//	step 2: the agent writes MAX_SIZE: a use, its budget 2; MAX_SIZE is no longer
//	        live (the agent's words carry it).
//	step 6: src/server.go: its budget 5-2 = 3 (MAX_SIZE stopped at step 2, by step
//	        1+3 = 4); with DigestFrom 10 (by step 5) the same.
//	step 8: parseConfigFile: 8-2 = 6 with DigestFrom 3 (src/server.go stopped at
//	        step 6, after step 4: a stub made at step 4 still held it); 8-2-3 = 3
//	        with DigestFrom 10 (by step 7).
//
// A stub made after each step holds the live names only: the names after a dead
// one move up into the budget. At step 9 a later output carries 42000: the last
// live name of the first output is now the later one's.
func TestDigestLiveNames(t *testing.T) {
	bg := &Background{Sessions: 100, MinShare: DefaultMinShare, Counts: map[string]int{"then": 50, "readme": 9}}
	for _, tc := range []struct {
		from  int
		needs []int // Use.Digest at steps 2, 6, 8
		live  []int // DigestLive at the end: the stub made at step 1+from
	}{
		// The order MAX_SIZE 2, src/server.go 3, parseConfigFile 3, 42000 3 (o200k
		// tokens with the space before each), dying at steps 2, 6, 8 and 9. Made
		// at step 4 the stub has lost MAX_SIZE only: 3, 3+3, 3+3+3.
		{3, []int{2, 3, 6}, []int{3, 6, 9}},
		// Made at step 11 it has lost all four.
		{10, []int{2, 3, 3}, nil},
	} {
		tr := NewTracker()
		tr.Background, tr.DigestTokens, tr.DigestFrom = bg, 100, tc.from
		c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"cat notes"}`), Step: 1}
		m := result(c1, "see /repo/src/server.go and parseConfigFile then MAX_SIZE 42000 and readme\n")
		m.Outputs[0].Tokens = 30
		addAll(t, tr, asst(1, "", c1), m)
		if d := cmp.Diff([]string{"MAX_SIZE"}, tr.Digest("c1", 4)); d != "" {
			t.Errorf("from %d: Digest(c1, 4) at first (-want +got):\n%s", tc.from, d)
		}
		var needs []int
		for _, step := range []struct {
			n    int
			said string
			want []string // Digest(c1, 100) after the step
			four []string // Digest(c1, 4)
		}{
			{2, "Set `MAX_SIZE` first.", []string{"src/server.go", "parseConfigFile", "42000"}, []string{"src/server.go"}},
			{6, "Open `src/server.go` now.", []string{"parseConfigFile", "42000"}, []string{"parseConfigFile"}},
			{8, "Then call `parseConfigFile` again.", []string{"42000"}, []string{"42000"}},
		} {
			got := addAll(t, tr, asst(step.n, step.said))
			if len(got) != 1 {
				t.Fatalf("from %d, step %d: uses %+v; want one", tc.from, step.n, got)
			}
			needs = append(needs, got[0].Digest)
			if d := cmp.Diff(step.want, tr.Digest("c1", 100)); d != "" {
				t.Errorf("from %d: Digest(c1, 100) after step %d (-want +got):\n%s", tc.from, step.n, d)
			}
			if d := cmp.Diff(step.four, tr.Digest("c1", 4)); d != "" {
				t.Errorf("from %d: Digest(c1, 4) after step %d (-want +got):\n%s", tc.from, step.n, d)
			}
		}
		if d := cmp.Diff(tc.needs, needs); d != "" {
			t.Errorf("from %d: digest budgets of the uses (-want +got):\n%s", tc.from, d)
		}
		// Step 9: a later output carries 42000 again, so a use of it is that
		// output's: c1's stub holds nothing any more, c2's holds it.
		c2 := &transcript.ToolCall{ID: "c2", Name: "bash", Args: json.RawMessage(`{"command":"cat limits"}`), Step: 9}
		m2 := result(c2, "42000\n")
		m2.Outputs[0].Tokens = 30
		addAll(t, tr, asst(9, "", c2), m2)
		if got := tr.Digest("c1", 100); got != nil {
			t.Errorf("from %d: Digest(c1, 100) after c2 carried 42000: %v; want none", tc.from, got)
		}
		if d := cmp.Diff([]string{"42000"}, tr.Digest("c2", 100)); d != "" {
			t.Errorf("from %d: Digest(c2, 100) (-want +got):\n%s", tc.from, d)
		}
		if d := cmp.Diff(tc.live, tr.DigestLive("c1")); d != "" {
			t.Errorf("from %d: DigestLive(c1) (-want +got):\n%s", tc.from, d)
		}
		if got := tr.DigestLive("nosuch"); got != nil {
			t.Errorf("DigestLive(nosuch) = %v; want nil", got)
		}
	}
}
