package evidence

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
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
	// DigestFull is the whole order's cost, past what is kept: 2+3+3+3 = 11 for
	// c1; 3+3+5 = 11 for c10, of which 6 are kept; 0 for an unknown key.
	for _, tt := range []struct {
		tr   *Tracker
		key  string
		want int
	}{{tr, "c1", 11}, {tr2, "c10", 11}, {tr, "nosuch", 0}} {
		if got := tt.tr.DigestFull(tt.key); got != tt.want {
			t.Errorf("DigestFull(%s) = %d; want %d", tt.key, got, tt.want)
		}
	}
}

// TestDigestString: the digest names of an output are kept in one string, each
// after its length as a uvarint and before its cost as a uvarint; a name of 200
// bytes takes a two-byte length (200 = 0xc8: 0xc8 0x01), as does a cost of 300
// (0xac 0x02) and a name and cost of 128 (0x80 0x01), a NUL inside a name is a
// byte like any other, and the names and costs come back whole and in order.
func TestDigestString(t *testing.T) {
	long := strings.Repeat("x", 200)
	// 128 is the first value whose uvarint has a first byte of exactly 0x80 (0x80
	// 0x01): the continuation bit set, no value bits.
	names := []string{"a", "src/\x00evil.go", long, "parseConfig", strings.Repeat("y", 128)}
	costs := []int{1, 300, 25, 2, 128}
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

// TestDigestSpec: a candidate's specificity (digest.go, "Order") is 3 for a path,
// 2 for a name with '_', '.', '-' or an inner capital (a capital after a byte that
// is not one), 1 otherwise: a leading capital or a run of capitals is no inner
// capital.
func TestDigestSpec(t *testing.T) {
	for _, tt := range []struct {
		name string
		want int
	}{
		{"/repo/src/server.go", 3}, {"src/server.go", 3}, {"a/b", 3},
		{"MAX_SIZE", 2}, {"foo-bar", 2}, {"v1.2", 2}, {"parseConfig", 2}, {"x9Y", 2},
		{"Foo", 1}, {"ABC", 1}, {"plain", 1}, {"42000", 1}, {"connection refused by peer", 1},
	} {
		if got := digestSpec(tt.name); got != tt.want {
			t.Errorf("digestSpec(%q) = %d; want %d", tt.name, got, tt.want)
		}
	}
}

// TestDigestManyNames: on ties the digest keeps the names in the order of the
// output, however many there are (the sort is stable: 260 names, past the size
// below which an unstable sort is an insertion sort, in two classes it has to
// move apart), and a name that stops being live leaves the digest up to the
// 255th kept name, whose place nameInfo.kpos still records; the 256th has none,
// so its death goes unrecorded and the stub keeps it (nameInfo.kpos). The output
// alternates Name001, Name003, ... (1/4 each: ' Name', 'NNN' in o200k_base) and
// name_000, name_002, ... (2/9: ' name', '_', 'NNN'): the 130 NameNNN first, then
// the 130 name_NNN, so that kept places 255 and 256 are name_248 and name_250.
func TestDigestManyNames(t *testing.T) {
	tr := NewTracker()
	tr.DigestTokens = 1000 // keeps 2,000 tokens: all 260 names (650)
	var text, odd, even []string
	for i := range 260 {
		if i%2 == 1 {
			odd = append(odd, fmt.Sprintf("Name%03d", i))
			text = append(text, odd[len(odd)-1])
		} else {
			even = append(even, fmt.Sprintf("name_%03d", i))
			text = append(text, even[len(even)-1])
		}
	}
	c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"cat names"}`), Step: 1}
	m := result(c1, strings.Join(text, "\n")+"\n")
	m.Outputs[0].Tokens = 3000
	addAll(t, tr, asst(1, "", c1), m)
	all := append(slices.Clone(odd), even...)
	if d := cmp.Diff(all, tr.Digest("c1", 10_000)); d != "" {
		t.Errorf("digest of 260 names (-want +got):\n%s", d)
	}
	addAll(t, tr, asst(2, "Use `name_248` and `name_250`."))
	want := append(slices.Clone(all[:254]), all[255:]...) // name_248 out, name_250 kept
	if d := cmp.Diff(want, tr.Digest("c1", 10_000)); d != "" {
		t.Errorf("digest after the 255th and 256th names were written (-want +got):\n%s", d)
	}
}

// TestDigestLastKeptName works out by hand the budgets of a use of the last name a
// digest keeps, whose cumulative cost is its carrier's whole kept digest, with the
// name ahead of it dead, at four Tracker.DigestTokens: the output carries
// MAX_SIZE and MIN_SIZE (2/4 each, ' MAX' '_SIZE' and ' MIN' '_SIZE': digest costs
// 2 and 4); the agent writes MAX_SIZE at step 2 (its budget 2) and MIN_SIZE at
// step 6, whose budget is 4-2 = 2 wherever MIN_SIZE is kept (DigestKeep x
// DigestTokens >= 4: at 2 exactly so) and 4 where it is not (1: past the kept
// names). Live's second count, the live names a digest of DigestTokens does not
// hold, counts MIN_SIZE when DigestTokens is under 4 and MAX_SIZE under 2. A
// DigestShare grows the 30-token output's budget: 0.1 to max(1, 3) = 3, which
// keeps both (DigestKeep x 3 = 6) and holds MAX_SIZE; 0.04 to max(1, 1.2
// rounded down) = 1, as without one.
func TestDigestLastKeptName(t *testing.T) {
	for _, tc := range []struct {
		digestTokens int
		share        float64
		liveOut      int      // Live(c1)'s undigested count after the output
		after2       []string // Digest(c1, 100) after step 2
		needs        []int    // Use.Digest at steps 2 and 6
	}{
		{100, 0, 0, []string{"MIN_SIZE"}, []int{2, 2}},
		{4, 0, 0, []string{"MIN_SIZE"}, []int{2, 2}},
		{2, 0, 1, []string{"MIN_SIZE"}, []int{2, 2}},
		{1, 0, 2, nil, []int{2, 4}},
		{1, 0.1, 1, []string{"MIN_SIZE"}, []int{2, 2}},
		{1, 0.04, 2, nil, []int{2, 4}},
	} {
		tr := NewTracker()
		tr.DigestTokens, tr.DigestShare = tc.digestTokens, tc.share
		c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"cat limits"}`), Step: 1}
		m := result(c1, "MAX_SIZE MIN_SIZE\n")
		m.Outputs[0].Tokens = 30
		addAll(t, tr, asst(1, "", c1), m)
		if live, out := tr.Live("c1"); live != 2 || out != tc.liveOut {
			t.Errorf("DigestTokens %d, share %g: Live(c1) = %d, %d; want 2, %d", tc.digestTokens, tc.share, live, out, tc.liveOut)
		}
		uses := addAll(t, tr, asst(2, "Set `MAX_SIZE` first."))
		if d := cmp.Diff(tc.after2, tr.Digest("c1", 100)); d != "" {
			t.Errorf("DigestTokens %d, share %g: Digest(c1, 100) after step 2 (-want +got):\n%s", tc.digestTokens, tc.share, d)
		}
		uses = append(uses, addAll(t, tr, asst(6, "Then `MIN_SIZE`."))...)
		var needs []int
		for _, u := range uses {
			needs = append(needs, u.Digest)
		}
		if d := cmp.Diff(tc.needs, needs); d != "" {
			t.Errorf("DigestTokens %d, share %g: digest budgets of the uses (-want +got):\n%s", tc.digestTokens, tc.share, d)
		}
	}
}

// TestDigestDeathBoundary works out by hand which deaths a stub made at step
// O+DigestFrom has seen: one at that step, not one a step later. The output (step
// 1, DigestFrom 3) carries MAX_SIZE, MIN_SIZE and AVG_SIZE (2 tokens each, in that
// order); the agent writes them at steps 4, 5 and 6:
//
//	step 4: MAX_SIZE, budget 2.
//	step 5: MIN_SIZE, 4-2 = 2: MAX_SIZE stopped at step 4, by step 1+3 (and by
//	        the step before the use).
//	step 6: AVG_SIZE, 6-2 = 4: MIN_SIZE stopped at step 5, after step 4.
//
// DigestLive, the stub made at step 4: MIN_SIZE 2, AVG_SIZE 2+2.
func TestDigestDeathBoundary(t *testing.T) {
	tr := NewTracker()
	tr.DigestTokens = 100
	c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"cat sizes"}`), Step: 1}
	m := result(c1, "MAX_SIZE MIN_SIZE AVG_SIZE\n")
	m.Outputs[0].Tokens = 30
	addAll(t, tr, asst(1, "", c1), m)
	uses := addAll(t, tr, asst(4, "Set `MAX_SIZE`."), asst(5, "Set `MIN_SIZE`."), asst(6, "Set `AVG_SIZE`."))
	var needs []int
	for _, u := range uses {
		needs = append(needs, u.Digest)
	}
	if d := cmp.Diff([]int{2, 2, 4}, needs); d != "" {
		t.Errorf("digest budgets of the uses (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{2, 4}, tr.DigestLive("c1")); d != "" {
		t.Errorf("DigestLive(c1) (-want +got):\n%s", d)
	}
}

// TestDigestLateDeath: a name that stops being live 253 steps or more after its
// output (deathLate) is out of any stub made after that (Digest), while a use's
// budget and DigestLive, measured on the stub made at step O+DigestFrom, still
// count it when that step came first. With DigestFrom 300 the output (step 1)
// carries MAX_SIZE and MIN_SIZE (2 tokens each); the agent writes MAX_SIZE at step
// 400, after the stub of step 301 was made: a use at step 401 of MIN_SIZE needs 4
// (MAX_SIZE was in that stub), and that stub's digest is 2, 4.
func TestDigestLateDeath(t *testing.T) {
	tr := NewTracker()
	tr.DigestTokens, tr.DigestFrom = 100, 300
	c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"cat limits"}`), Step: 1}
	m := result(c1, "MAX_SIZE MIN_SIZE\n")
	m.Outputs[0].Tokens = 30
	addAll(t, tr, asst(1, "", c1), m)
	uses := addAll(t, tr, asst(400, "Set `MAX_SIZE`."))
	if d := cmp.Diff([]string{"MIN_SIZE"}, tr.Digest("c1", 100)); d != "" {
		t.Errorf("Digest(c1, 100) after step 400 (-want +got):\n%s", d)
	}
	uses = append(uses, addAll(t, tr, asst(401, "Set `MIN_SIZE`."))...)
	var needs []int
	for _, u := range uses {
		needs = append(needs, u.Digest)
	}
	if d := cmp.Diff([]int{2, 4}, needs); d != "" {
		t.Errorf("digest budgets of the uses (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{2, 4}, tr.DigestLive("c1")); d != "" {
		t.Errorf("DigestLive(c1) (-want +got):\n%s", d)
	}
}

// TestDigestQuotedPhrase: a quoted phrase of several words is kept in the digest
// as the stub writes it, between double quotes (digestText), and costs its quoted
// text: the output's candidates are MAX_SIZE (2/4) and the phrase (1/36: ` "`,
// connection, ` refused`, ` by`, ` peer`, `"`); "error", "connection", "refused"
// and "peer" are plain words, no candidates without word statistics.
func TestDigestQuotedPhrase(t *testing.T) {
	tr := NewTracker()
	tr.DigestTokens = 100
	c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"curl x"}`), Step: 1}
	m := result(c1, `error: "connection refused by peer" at MAX_SIZE`+"\n")
	m.Outputs[0].Tokens = 30
	addAll(t, tr, asst(1, "", c1), m)
	if d := cmp.Diff([]string{"MAX_SIZE", `"connection refused by peer"`}, tr.Digest("c1", 100)); d != "" {
		t.Errorf("Digest(c1, 100) (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{2, 8}, tr.DigestLive("c1")); d != "" {
		t.Errorf("DigestLive(c1) (-want +got):\n%s", d)
	}
}

// A path in backquotes is one compound, as unquoted: one digest candidate, the
// path by its last two segments, not the quoted whole beside its own suffix (the
// quoted string and the run inside it were two compounds: `src/server.go` gave
// "server.go" and "src/server.go", `/repo/src/server.go` "src/server.go" and
// "/repo/src/server.go").
func TestDigestQuotedCompound(t *testing.T) {
	for _, tt := range []struct {
		text string
		want []string
	}{
		{"- src/server.go - x\n", []string{"src/server.go"}},
		{"- `src/server.go` - x\n", []string{"src/server.go"}},
		{"- `/repo/src/server.go` - x\n", []string{"src/server.go"}},
		{"- '/repo/src/server.go' and \"./lib/io_util.py\" - x\n", []string{"src/server.go", "lib/io_util.py"}},
	} {
		tr := NewTracker()
		tr.DigestTokens = 100
		c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"cat notes"}`), Step: 1}
		m := result(c1, tt.text)
		m.Outputs[0].Tokens = 30
		addAll(t, tr, asst(1, "", c1), m)
		if d := cmp.Diff(tt.want, tr.Digest("c1", 100)); d != "" {
			t.Errorf("Digest of %q (-want +got):\n%s", tt.text, d)
		}
	}
}

// TestDigestBudgetFor: the fixed budget, or the share of a longer output rounded
// down; nothing when digests are off.
func TestDigestBudgetFor(t *testing.T) {
	for _, tt := range []struct {
		tokens, fixed int
		share         float64
		want          int
	}{
		{10_000, 128, 0, 128},
		{10_000, 128, 0.06, 600},
		{2_133, 128, 0.06, 128}, // 127.98
		{2_134, 128, 0.06, 128}, // 128.04
		{2_200, 128, 0.06, 132},
		{200, 128, 0.06, 128},
		{10_000, 0, 0.06, 0},
	} {
		if got := DigestBudgetFor(tt.tokens, tt.fixed, tt.share); got != tt.want {
			t.Errorf("DigestBudgetFor(%d, %d, %g) = %d; want %d", tt.tokens, tt.fixed, tt.share, got, tt.want)
		}
	}
}
