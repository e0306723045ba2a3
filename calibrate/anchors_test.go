package calibrate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// anchorSession: 12 calls; output k (k = 1..10) comes from call k, 20,000 tokens,
// after a 1,000-token prompt, so call s sends 1,000 + 20,000 x min(s-1, 10). A pause of
// 61 minutes comes before call 9.
func anchorSession() ([]Output, []Calls) {
	var outs []Output
	for k := 1; k <= 10; k++ {
		outs = append(outs, Output{Session: "a", Key: string(rune('a' + k)), Tokens: 20_000, StubTokens: 40,
			Offset: 1000 + 20_000*(k-1), Step: k, EndStep: 12})
	}
	c := make([]int, 12)
	at := make([]time.Time, 12)
	t0 := time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)
	for s := 1; s <= 12; s++ {
		c[s-1] = 1000 + 20_000*min(s-1, 10)
		at[s-1] = t0.Add(time.Duration(s) * time.Minute)
		if s >= 9 {
			at[s-1] = at[s-1].Add(61 * time.Minute)
		}
	}
	return outs, []Calls{{Name: "a", Context: c, At: at}}
}

// The anchors' clearing steps, worked out by hand (placeholders of 10 tokens, so a
// clearing frees 19,990 per output):
//
//   - Anthropic (trigger 100,000, keep 3): call 6 would send 101,000: outputs 1-2
//     go first (61,020 sent); 8 would send 101,020: 3-4; 10, 101,040: 5-6. 6 cleared,
//     3 rewrites; the most ever sent is 81,060 (call 11), never over the budget.
//   - the same with clear_at_least 50,000: at 6 clearing 1-2 frees 39,980: no; at 7
//     (121,000) 1-3 free 59,970: yes; at 9 4-5 free 39,980: no; at 10 4-6: yes. 6
//     cleared, 2 rewrites.
//   - gemini-cli (protect 50,000, mask at 30,000): the newest three outputs fill the
//     window; at 6 outputs 1-2 (40,000) go, at 8 3-4, at 10 5-6: 6 cleared, 3 rewrites.
//   - opencode (protect 40,000, prune at 20,000): two outputs fill the window; from
//     call 4 to 11 one more output (20,000) goes each call: 8 cleared, 8 rewrites.
//   - Claude Code (after 60 idle minutes keep 5): the pause before call 9, with 8
//     outputs visible, clears 1-3: 3 cleared, 1 rewrite.
func TestAnchorsHand(t *testing.T) {
	outs, sessions := anchorSession()
	e := mustEval(t, outs, sessions, DefaultOptions())
	type row struct {
		Name             string
		Pruned, Rewrites int
		DecisionRewrites int
	}
	var got []row
	for _, r := range e.Anchors(50_000) {
		got = append(got, row{r.Name, r.Pruned, r.Applied.Rewrites, r.Decision.Rewrites})
	}
	want := []row{
		{"anthropic-clearing", 6, 3, 3},
		{"anthropic-clearing-at-least", 6, 2, 2},
		{"gemini-cli-masking", 6, 3, 3},
		{"opencode-prune", 8, 8, 8},
		{"claude-code-idle-clearing", 3, 1, 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("anchors (-want +got):\n%s", d)
	}
	r := e.Anchors(0)[0]
	if r.Applied.PeakContext != 81_060 || r.Applied.StepsOverBudget != 0 {
		t.Errorf("anthropic-clearing: peak %d, %d calls over budget; want 81,060 and 0", r.Applied.PeakContext, r.Applied.StepsOverBudget)
	}
}
