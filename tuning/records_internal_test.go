package tuning

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// A rule-dead output's uses from the rule's step on go to the live copy; earlier
// uses stay. Worked by hand: "a" is superseded by call "b" at step 5; its uses at
// 3 and 6 and 9 split into 3 (kept) and 6, 9 (moved), merged with b's own 7 and 9.
func TestCreditLiveCopies(t *testing.T) {
	outs := []replay.OutputFacts{
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

// TestAddUsesHeld: a use is held by the stub's digest when its digest need is
// within the budget, the budget itself included, and never when it has no need
// (0: no digest holds it, as for a use moved from a dead copy); uses outside
// (Step, EndStep] are left out. Worked by hand with a budget of 10: the uses at
// 3 (need 10), 5 (11), 6 (none) and 8 (1) are held, not, not and held; the use
// at 12 is past EndStep 10.
func TestAddUsesHeld(t *testing.T) {
	u := recordUses{
		uses: map[string][]int{"a": {3, 5, 6, 8, 12}},
		need: map[string]map[int]int{"a": {3: 10, 5: 11, 8: 1, 12: 1}},
	}
	o := calibrate.Output{Key: "a", Step: 1, EndStep: 10}
	u.addUses(&o, 10)
	if d := cmp.Diff([]int{3, 5, 6, 8}, o.Uses); d != "" {
		t.Errorf("uses (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bool{true, false, false, true}, o.Held); d != "" {
		t.Errorf("held (-want +got):\n%s", d)
	}
}

// TestRecordOutputs: the calibrate records of the hand-made port session of
// testdata/replay (replay's TestReplayFacts works out its facts by hand): asks
// within the candidate window, counting uses only, the session's calls, and the
// advisor's one pending prune (call_3, a duplicate, rule-dead at step 7).
func TestRecordOutputs(t *testing.T) {
	src, err := replay.Load("../testdata/replay/port.json", false)
	if err != nil {
		t.Fatal(err)
	}
	rp := &replay.Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New(), Sizer: fixedSizer{}}
	rec, err := rp.Replay(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}

	// Calibrate records: asks within the candidate window, counting uses only.
	cal := Outputs(rec)
	for i := range cal {
		if err := cal[i].Validate(); err != nil {
			t.Error(err)
		}
	}
	if got := cal[0].Uses; !cmp.Equal(got, []int{6}) {
		t.Errorf("call_1 uses = %v, want [6]", got)
	}
	if got := cal[2].Uses; len(got) != 0 {
		t.Errorf("call_3 uses = %v, want none (its re-read at step 5 is not a use)", got)
	}
	if got := len(cal[0].Asks); got != 1 || cal[0].Asks[0].Step != 5 {
		t.Errorf("call_1 asks = %+v, want one at step 5", cal[0].Asks)
	}
	sess := Calls(rec)
	if sess.Name != rec.ContentHash || len(sess.Context) != 10 || sess.Context[9] != rec.StepFacts[9].ContextTokens {
		t.Errorf("calibrate session %s with %d steps, want the content hash and 10 steps", sess.Name, len(sess.Context))
	}
	wantD := make([]calibrate.PruneAt, 9)
	wantD[2] = calibrate.PruneAt{Step: 7, Rule: true}
	if got := PendingPrunes(rec); !cmp.Equal(got, wantD) {
		t.Errorf("pending decisions = %v, want %v", got, wantD)
	}
}

// fixedSizer counts 100 tokens per request and 10 per card.
type fixedSizer struct{}

func (fixedSizer) FrameTokens(cards.Batch) int    { return 100 }
func (fixedSizer) CardTokens(cards.Card, int) int { return 10 }

// TestCallsRecorded: Calls carries the compactions the replay's steps record,
// and none when no step records one.
func TestCallsRecorded(t *testing.T) {
	rec := &replay.Record{ContentHash: "h", StepFacts: []replay.StepFacts{
		{Step: 1, ContextTokens: 100}, {Step: 2, ContextTokens: 900},
		{Step: 3, ContextTokens: 1000, CompactionDropped: 850, CompactionSummary: 40}, {Step: 4, ContextTokens: 1100},
	}}
	want := []calibrate.RecordedCompaction{{Call: 3, Dropped: 850, SummaryTokens: 40}}
	if d := cmp.Diff(want, Calls(rec).Recorded); d != "" {
		t.Errorf("Recorded (-want +got):\n%s", d)
	}
	rec.StepFacts[2].CompactionDropped, rec.StepFacts[2].CompactionSummary = 0, 0
	if got := Calls(rec).Recorded; got != nil {
		t.Errorf("Recorded = %v, want nil", got)
	}
}
