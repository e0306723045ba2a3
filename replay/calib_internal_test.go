package replay

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A rule-dead output's uses from the rule's step on go to the live copy; earlier
// uses stay. Worked by hand: "a" is superseded by call "b" at step 5; its uses at
// 3 and 6 and 9 split into 3 (kept) and 6, 9 (moved), merged with b's own 7 and 9.
func TestCreditLiveCopies(t *testing.T) {
	outs := []OutputFacts{
		{Key: "a", Step: 1, RuleDeadAt: 5, RuleBy: "b"},
		{Key: "b", Step: 4},
		{Key: "c", Step: 2, RuleDeadAt: 6, RuleBy: "gone"}, // superseding output unknown: nothing moves
		{Key: "d", Step: 2},                                // no rule: nothing moves
	}
	uses := map[string][]int{"a": {3, 6, 9}, "b": {7, 9}, "c": {8}, "d": {5}}
	creditLiveCopies(outs, uses)
	want := map[string][]int{"a": {3}, "b": {6, 7, 9}, "c": {8}, "d": {5}}
	if d := cmp.Diff(want, uses); d != "" {
		t.Errorf("uses (-want +got):\n%s", d)
	}
}
