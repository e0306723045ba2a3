package cards

import (
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// A visible history that starts with tool results (what is left after a
// compaction replaced everything before them): the two results of message 0 are
// answered by one assistant message, so each card's reaction is that message's,
// marked shared.
func TestReactionSharedByResultsOfTheFirstMessage(t *testing.T) {
	a := &transcript.ToolOutput{Key: "a", Text: "alpha", Message: 0, Step: 1}
	b := &transcript.ToolOutput{Key: "b", Text: "beta", Message: 0, Step: 1}
	msgs := []*transcript.Message{
		{Index: 0, Role: transcript.RoleUser, Outputs: []*transcript.ToolOutput{a, b}},
		{Index: 1, Role: transcript.RoleAssistant, Step: 2, Text: "Both files agree."},
	}
	for _, o := range []*transcript.ToolOutput{a, b} {
		if c := Build(msgs, o, 2); c.Reaction != "Both files agree." || !c.SharedReaction {
			t.Errorf("card %s: reaction %q, shared %v; want \"Both files agree.\", shared", o.Key, c.Reaction, c.SharedReaction)
		}
	}
	// Alone in message 0, the result's reaction is its own.
	msgs[0].Outputs = []*transcript.ToolOutput{a}
	if c := Build(msgs, a, 2); c.Reaction != "Both files agree." || c.SharedReaction {
		t.Errorf("single result: reaction %q, shared %v; want its own", c.Reaction, c.SharedReaction)
	}
}

// A card built from a history that ends before the output's own message (the
// output not visible yet) is the output's card without a reaction, never a panic.
func TestCardFromHistoryBeforeItsMessage(t *testing.T) {
	o := &transcript.ToolOutput{Key: "late", Text: "result", Message: 2, Step: 2}
	msgs := []*transcript.Message{
		{Index: 0, Role: transcript.RoleUser, Text: "go"},
		{Index: 1, Role: transcript.RoleAssistant, Step: 1, Text: "on it"},
	}
	c := Build(msgs, o, 2)
	if c.ID != "late" || c.Head != "result" || c.Reaction != "" || c.SharedReaction {
		t.Errorf("card = %+v; want the output's card without a reaction", c)
	}
}

// The reaction of an assistant text whose length is exactly a stretch foldWords
// takes (4 x (200 + 1) = 804 bytes, then 1,608) is its first 200 characters with
// the same as from a text a byte longer or shorter: its first 199 characters and
// "…" (Cut's 200). The texts are "word " repeated, cut to the length; the expected
// reaction is written out: 39 times "word " and "word" are 199 characters.
func TestReactionOfTextOfAStretchLength(t *testing.T) {
	want := strings.Repeat("word ", 39) + "word…"
	if len([]rune(want)) != ReactionChars {
		t.Fatalf("want has %d characters", len([]rune(want)))
	}
	for _, n := range []int{803, 804, 805, 1607, 1608, 1609} {
		text := strings.Repeat("word ", 400)[:n]
		got := ReactionOf(&transcript.Message{Role: transcript.RoleAssistant, Text: text})
		if got != want {
			t.Errorf("ReactionOf(%d bytes) = %q; want %q", n, got, want)
		}
	}
}
