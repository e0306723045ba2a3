package calibrate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Gemini CLI's masked output keeps the output's head and tail: a later use they
// name (Previewed) is no miss, one they do not is, and the stub token-steps are
// the preview's (GeminiPreviewTokens, 151). On edgeSession (5 outputs of 20,000,
// 8 calls) Gemini CLI masks outputs 1-2 at call 6; both are used at call 7, only
// output 1's use previewed. Output 1 saves 20,000 x (8 + 1 - 6) = 60,000
// token-steps with 151 x 3 = 453 of preview; output 2 misses at 7: 20,000 x 1 and
// 151 x 1. The simulation, which holds the same, meets one miss.
func TestGeminiPreviewHoldsPreviewedUses(t *testing.T) {
	outs, sessions := edgeSession(5, 20_000, 8, 0)
	outs[0].Uses, outs[0].Previewed = []int{7}, []bool{true}
	outs[1].Uses, outs[1].Previewed = []int{7}, []bool{false}
	type figures struct {
		Pruned, Misses             int
		TokenSteps, StubTokenSteps int64
		DecisionMisses             int
	}
	for _, r := range mustEval(t, outs, sessions, DefaultOptions()).Anchors(0) {
		if r.Name != "gemini-cli-masking" {
			continue
		}
		got := figures{r.Pruned, r.Misses, r.TokenSteps, r.StubTokenSteps, r.Decision.Misses}
		if d := cmp.Diff(figures{2, 1, 80_000, 604, 1}, got); d != "" {
			t.Errorf("Gemini CLI's masking (-want +got):\n%s", d)
		}
	}
}

// With no outputs (no session to replay) every anchor gives an empty row.
func TestAnchorsOfNoOutputs(t *testing.T) {
	e := mustEval(t, nil, nil, DefaultOptions())
	for _, r := range e.Anchors(5000) {
		if d := cmp.Diff(Result{Name: r.Name, Cutoff: -1}, r); d != "" {
			t.Errorf("%s (-want +got):\n%s", r.Name, d)
		}
	}
}

// The anchors clear only what they can: Anthropic's clearing keeps the newest 3
// tool uses, so with two outputs in a 120,000-token context it clears nothing;
// and no anchor counts as cleared an output its placeholder would not shorten
// (5 tokens, under the 10 of a placeholder and the 151 of Gemini CLI's preview),
// nor lets it count towards clear_at_least. Worked by hand:
//
//   - two outputs of 60,000: calls 3 and 4 send 120,000; only 2 outputs, fewer
//     than Anthropic keeps: nothing cleared. (Gemini CLI: the newest one fills its
//     window, the older one, 60,000, is masked at call 3; opencode likewise.)
//   - a 5-token output at offset 0, then outputs 1-6 of 20,000 from calls 1-6
//     (edgeSession's, 5 tokens later): call 6 would send 100,005; Anthropic clears
//     1-2 (3-5 are the newest three), not the small one: 2. With clear_at_least
//     60,005 nothing: 1-2 hold 40,000 at call 6, and at call 7 (120,005) 1-3 hold
//     60,000, 5 short (the small one's 5 would make up the difference). Gemini CLI
//     masks 1-2 at call 6 (3-5 fill its window), 2 outputs; opencode prunes 1-2 at
//     call 5, 3 at 6, 4 at 7: 4.
func TestAnchorsClearOnlyWhatTheyCan(t *testing.T) {
	outs, sessions := edgeSession(2, 60_000, 4, 0)
	want := map[string]int{"anthropic-clearing": 0, "gemini-cli-masking": 1, "opencode-prune": 1, "claude-code-idle-clearing": 0}
	if d := cmp.Diff(want, prunedByAnchor(t, outs, sessions, 0)); d != "" {
		t.Errorf("two outputs of 60,000 (-want +got):\n%s", d)
	}
	outs, sessions = edgeSession(6, 20_000, 8, 0)
	for i := range outs {
		outs[i].Offset += 5
	}
	outs = append(outs, Output{Session: "e", Key: "small", Tokens: 5, StubTokens: 40, Offset: 0, Step: 1, EndStep: 8})
	for s := 2; s <= 8; s++ {
		sessions[0].Context[s-1] += 5
	}
	want = map[string]int{"anthropic-clearing": 2, "anthropic-clearing-at-least": 0, "gemini-cli-masking": 2, "opencode-prune": 4, "claude-code-idle-clearing": 0}
	if d := cmp.Diff(want, prunedByAnchor(t, outs, sessions, 60_005)); d != "" {
		t.Errorf("with a 5-token output (-want +got):\n%s", d)
	}
}

// opencode protects the newest outputs up to 40,000 tokens, the one that crosses
// the line included: while all the outputs fit, nothing is pruned, not even the
// oldest. Outputs of 25,000 and 10,000 (35,000 in all, the older one over the
// 20,000 minimum): nothing pruned.
func TestOpencodeWindowHoldsEveryOutput(t *testing.T) {
	outs := []Output{
		{Session: "w", Key: "old", Tokens: 25_000, StubTokens: 40, Offset: 0, Step: 1, EndStep: 4},
		{Session: "w", Key: "new", Tokens: 10_000, StubTokens: 40, Offset: 25_000, Step: 2, EndStep: 4},
	}
	sessions := []Calls{{Name: "w", Context: []int{0, 25_000, 35_000, 35_000}}}
	if got := prunedByAnchor(t, outs, sessions, 0); got["opencode-prune"] != 0 {
		t.Errorf("opencode pruned %d outputs; want 0 (35,000 of outputs, all in its 40,000 window)", got["opencode-prune"])
	}
}
