package cards

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The signals a fitted model learns from are the card's own facts, field for field,
// with "has a reaction" in place of the reaction's words: what `pruneadvisor fit`
// reads back from a recorded ask must be what the advisor knew.
func TestSignalsAreTheCardsFacts(t *testing.T) {
	c := Card{
		ID: "toolu_1", Tool: "Bash", Args: "go test ./...", Head: "ok", Tail: "PASS",
		Step: 20, Age: 7, Tokens: 1234, Chars: 5000, Action: "shell", IsError: true,
		Uses: 3, LastUseAgo: 2, EditedSince: true, NamedByTask: true, NamedByNow: true, Lexical: 0.25,
		Reaction: "The tests pass.", SharedReaction: true, Names: 9, PathIdle: 4, PathReads: 5,
		Runs: 6, RecentUses: 1, SessionUseRate: 0.5, OutputsSince: 8, TokensAfter: 9000,
	}
	want := Signals{
		Step: 20, Age: 7, Tokens: 1234, Chars: 5000, Action: "shell", IsError: true,
		Uses: 3, LastUseAgo: 2, EditedSince: true, NamedByTask: true, NamedByNow: true, Lexical: 0.25,
		HasReaction: true, SharedReaction: true, Names: 9, PathIdle: 4, PathReads: 5,
		Runs: 6, RecentUses: 1, SessionUseRate: 0.5, OutputsSince: 8, TokensAfter: 9000,
	}
	if d := cmp.Diff(want, c.Signals()); d != "" {
		t.Errorf("Signals (-want +got):\n%s", d)
	}
	// An output the session ends after has no reaction.
	if (Card{Age: 1}).Signals().HasReaction {
		t.Error("a card without a reaction signals one")
	}
}

// The use history as prompt template v2 shows it.
func TestUsedText(t *testing.T) {
	for _, tt := range []struct {
		uses, ago int
		want      string
	}{
		{0, 0, "never"},
		{-1, 0, "never"}, // no negative counts reach a prompt
		{1, 3, "once, 3 steps ago"},
		{2, 1, "2 times, last 1 steps ago"},
		{4, 2, "4 times, last 2 steps ago"},
	} {
		if got := (Card{Uses: tt.uses, LastUseAgo: tt.ago}).UsedText(); got != tt.want {
			t.Errorf("Uses %d, LastUseAgo %d: UsedText() = %q, want %q", tt.uses, tt.ago, got, tt.want)
		}
	}
}
