package calibrate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// edgeSession: n outputs of size tokens, output k from call k with no prompt before
// it, so call s sends size x min(s-1, n); calls calls in all, one minute apart,
// but pause before the last call (when pause > 0).
func edgeSession(n, size, calls int, pause time.Duration) ([]Output, []Calls) {
	var outs []Output
	for k := 1; k <= n; k++ {
		outs = append(outs, Output{Session: "e", Key: string(rune('a' + k)), Tokens: size, StubTokens: 40,
			Offset: size * (k - 1), Step: k, EndStep: calls})
	}
	c := make([]int, calls)
	at := make([]time.Time, calls)
	t0 := time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)
	for s := 1; s <= calls; s++ {
		c[s-1] = size * min(s-1, n)
		at[s-1] = t0.Add(time.Duration(s) * time.Minute)
	}
	if pause > 0 {
		at[calls-1] = at[calls-2].Add(pause)
	}
	return outs, []Calls{{Name: "e", Context: c, At: at}}
}

// prunedByAnchor evaluates the anchors on one session and returns how many outputs
// each cleared, by name.
func prunedByAnchor(t *testing.T, outs []Output, sessions []Calls, clearAtLeast int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, r := range mustEval(t, outs, sessions, DefaultOptions()).Anchors(clearAtLeast) {
		got[r.Name] = r.Pruned
	}
	return got
}

// The anchors act past their thresholds, not at them, as their tools document
// them: Anthropic's clearing when the input passes the trigger (a context of
// exactly 100,000 tokens clears nothing), Claude Code's idle clearing after more
// than 60 idle minutes (exactly 60 clears nothing), and clear_at_least when the
// cleared outputs hold at least that many tokens (exactly that many clears).
// Worked by hand:
//
//   - 5 outputs of 20,000: calls 6 to 8 send exactly 100,000; Anthropic clears
//     nothing; Gemini CLI (protect 50,000, mask at 30,000) masks outputs 1-2 at call
//     6 (outputs 3-5 fill its window); opencode (protect 40,000, prune at 20,000)
//     prunes 1-3.
//   - 8 outputs of 10,000, 10 calls, exactly 60 minutes before the last: Claude Code
//     clears nothing (at most 80,000 sent: no other anchor acts on the first two
//     rows either).
//   - 6 outputs of 20,000, 8 calls: call 7 would send 120,000, and clearing all but
//     the newest 3 frees outputs 1-3, 60,000 tokens: with clear_at_least 60,000 it
//     clears them.
func TestAnchorsAtTheirThresholds(t *testing.T) {
	outs, sessions := edgeSession(5, 20_000, 8, 0)
	want := map[string]int{"anthropic-clearing": 0, "gemini-cli-masking": 2, "opencode-prune": 3, "claude-code-idle-clearing": 0}
	if d := cmp.Diff(want, prunedByAnchor(t, outs, sessions, 0)); d != "" {
		t.Errorf("a context of exactly the trigger (-want +got):\n%s", d)
	}
	outs, sessions = edgeSession(8, 10_000, 10, 60*time.Minute)
	got := prunedByAnchor(t, outs, sessions, 0)
	if got["claude-code-idle-clearing"] != 0 || got["anthropic-clearing"] != 0 {
		t.Errorf("exactly 60 idle minutes: Claude Code cleared %d, Anthropic %d; want 0 and 0", got["claude-code-idle-clearing"], got["anthropic-clearing"])
	}
	outs, sessions = edgeSession(8, 10_000, 10, 60*time.Minute+time.Second)
	if got := prunedByAnchor(t, outs, sessions, 0); got["claude-code-idle-clearing"] != 3 {
		t.Errorf("60 idle minutes and a second: Claude Code cleared %d; want 3 (all but the newest 5 of 8)", got["claude-code-idle-clearing"])
	}
	outs, sessions = edgeSession(6, 20_000, 8, 0)
	got = prunedByAnchor(t, outs, sessions, 60_000)
	if got["anthropic-clearing-at-least"] != 3 {
		t.Errorf("clear_at_least 60,000 with 60,000 clearable: cleared %d; want 3", got["anthropic-clearing-at-least"])
	}
	if got := prunedByAnchor(t, outs, sessions, 60_001); got["anthropic-clearing-at-least"] != 0 {
		t.Errorf("clear_at_least 60,001 with 60,000 clearable: cleared %d; want 0", got["anthropic-clearing-at-least"])
	}
}

// clear_at_least 0 is off: Anchors gives no "at least" row, and AnchorNames (the
// order reports print them in) says so too.
func TestAnchorNamesMatchAnchors(t *testing.T) {
	outs, sessions := anchorSession()
	e := mustEval(t, outs, sessions, DefaultOptions())
	for _, atLeast := range []int{0, 1, 50_000} {
		var got []string
		for _, r := range e.Anchors(atLeast) {
			got = append(got, r.Name)
		}
		want := []string{"anthropic-clearing", "gemini-cli-masking", "opencode-prune", "claude-code-idle-clearing"}
		if atLeast > 0 {
			want = []string{"anthropic-clearing", "anthropic-clearing-at-least", "gemini-cli-masking", "opencode-prune", "claude-code-idle-clearing"}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("Anchors(%d) (-want +got):\n%s", atLeast, d)
		}
		if d := cmp.Diff(want, AnchorNames(atLeast)); d != "" {
			t.Errorf("AnchorNames(%d) (-want +got):\n%s", atLeast, d)
		}
	}
}
