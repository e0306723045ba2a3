package evidence

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

func TestSpecific(t *testing.T) {
	tests := []struct {
		name string
		bg   *Background
		want bool
	}{
		{"daemon", daemonCommon, false}, // plain and common
		{"Daemon", daemonCommon, false}, // case folded
		{"DAEMON", daemonCommon, false}, // all caps is plain too
		{"zorblax", daemonCommon, true}, // plain and rare
		{"GitHub", &Background{Sessions: 10, MinShare: 0.01, Counts: map[string]int{"github": 3}}, false}, // inner capital, letters only: plain
		{"parseConfig", daemonCommon, true}, // rare letters-only identifier
		{"daemon", nil, false},              // no statistics: no plain word is evidence
		{"daemon_2", nil, true},             // shape: digit and '_'
		{"a.go", nil, true},                 // shape: '.'
		{"origin/main", nil, true},          // shape: '/'
		{"2026", nil, true},                 // shape: digits
		{"No model selected", nil, true},    // a quoted phrase of several words
		{"daemon", &Background{Sessions: 1000, MinShare: 0.01, Counts: map[string]int{"daemon": 9}}, true},   // 0.9% < 1%
		{"daemon", &Background{Sessions: 1000, MinShare: 0.01, Counts: map[string]int{"daemon": 10}}, false}, // 1% exactly is common
	}
	for _, tt := range tests {
		if got := Specific(tt.name, tt.bg); got != tt.want {
			t.Errorf("Specific(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBackgroundValidate(t *testing.T) {
	good := &Background{Sessions: 3, MinShare: 0.01, Counts: map[string]int{"daemon": 2}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		b    Background
		want string
	}{
		{Background{Sessions: 0, MinShare: 0.01, Counts: map[string]int{}}, "evidence: invalid word statistics: sessions: 0, want at least 1"},
		{Background{Sessions: 3, MinShare: 0, Counts: map[string]int{}}, "evidence: invalid word statistics: min_share: 0, want a share in (0, 1)"},
		{Background{Sessions: 3, MinShare: 1, Counts: map[string]int{}}, "evidence: invalid word statistics: min_share: 1, want a share in (0, 1)"},
		{Background{Sessions: 3, MinShare: 0.01}, "evidence: invalid word statistics: counts: missing"},
		{Background{Sessions: 3, MinShare: 0.01, Counts: map[string]int{"Daemon": 1}}, `evidence: invalid word statistics: counts["Daemon"]: not a lower-case word of letters only, 4 to 256 bytes`},
		{Background{Sessions: 3, MinShare: 0.01, Counts: map[string]int{"abc": 1}}, `evidence: invalid word statistics: counts["abc"]: not a lower-case word of letters only, 4 to 256 bytes`},
		{Background{Sessions: 3, MinShare: 0.01, Counts: map[string]int{"daemon": 4}}, `evidence: invalid word statistics: counts["daemon"]: 4 sessions, want 1 to 3`},
	}
	for _, tt := range tests {
		err := tt.b.Validate()
		if err == nil || err.Error() != tt.want || !errors.Is(err, ErrBackground) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.b, err, tt.want)
		}
	}
}

// TestBackgroundCounter counts the hand-made sessions of testdata/evidence: a
// word counts once per session whose agent wrote it (text, arguments, prose
// included), never for what only outputs or the user held.
func TestBackgroundCounter(t *testing.T) {
	c := NewBackgroundCounter()
	for _, f := range []string{"plain_words.json", "whole_names.json", "prose_words.json"} {
		c.Add(loadSession(t, filepath.Join("..", "testdata", "evidence", f)))
	}
	b := c.Background(0.5) // at least 2 of the 3 sessions
	if b.Sessions != 3 || b.MinShare != 0.5 {
		t.Fatalf("background %+v", b)
	}
	// Counted by hand from the three files' assistant messages: "command" is an
	// argument key (not a word the agent wrote), "which" is in whole_names only,
	// "retries" in prose_words only; "daemon" and "zorblax" in plain_words only.
	if d := cmp.Diff(map[string]int{}, b.Counts); d != "" {
		t.Errorf("counts at share 0.5 (-want +got):\n%s", d)
	}
	all := c.Background(0.01)
	for w, want := range map[string]int{"daemon": 1, "zorblax": 1, "which": 1, "claude": 0} {
		if got := all.Counts[w]; got != want {
			t.Errorf("count of %q = %d, want %d", w, got, want)
		}
	}
	if all.Digest() == b.Digest() || all.Digest() != c.Background(0.01).Digest() || (*Background)(nil).Digest() != "none" {
		t.Error("digests do not tell the statistics apart, or are not stable")
	}
	if NewBackgroundCounter().Background(0) != nil {
		t.Error("an empty counter gave statistics")
	}
}

// TestThinkingClause: the agent's thinking before O makes a name not new in O
// (the agent had it first), but thinking after O does not carry it: providers
// drop earlier turns' thinking from the context, so a name the agent only
// thought of after O still comes from O.
func TestThinkingClause(t *testing.T) {
	c1 := &transcript.ToolCall{ID: "c1", Name: "bash", Args: []byte(`{"command":"ls"}`), Step: 2}
	m1 := asst(1, "")
	m1.Thinking = "Maybe the culprit is flaky_worker_v2 again."
	m2 := asst(2, "", c1)
	m3 := result(c1, "flaky_worker_v2 steady_worker_v3")
	m4 := asst(3, "")
	m4.Thinking = "So steady_worker_v3 is the one."
	m5 := asst(4, "Restart steady_worker_v3 and flaky_worker_v2.")
	tr := NewTracker()
	tr.Background = noCommon
	got := addAll(t, tr, m1, m2, m3, m4, m5)
	want := []Use{{Key: "c1", Step: 4, Kind: UseName, Proof: `name "steady_worker_v3"`, Weight: 1}}
	if d := cmp.Diff(want, round(got)); d != "" {
		t.Errorf("uses (-want +got):\n%s", d)
	}
}
