package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/report"
)

// TestLiveStateSteps: steps are kept in order; a step seen again (a retried
// request) or an earlier one (a rewritten history) restarts the course there; at
// most liveSteps are kept, the latest; of the items only the stubbed ones, without
// their stub texts.
func TestLiveStateSteps(t *testing.T) {
	plan := func(step, ctx int) advisor.Plan {
		return advisor.Plan{SessionID: "s", Step: step, ContextTokens: ctx, SavedTokens: 1, Rewrite: step == 3, Stubs: map[string]string{"k": "[pruned]"},
			Items: []advisor.Item{{Key: "k", Decision: advisor.DecisionPruned, Stub: "[pruned]"}, {Key: "j", Decision: advisor.DecisionKeep}, {Key: "r", Decision: advisor.DecisionRecalled}}}
	}
	steps := func(l *liveState) []int {
		ls, _ := l.get()
		var out []int
		for _, s := range ls.Steps {
			out = append(out, s.Step)
		}
		return out
	}
	var l liveState
	if _, ok := l.get(); ok {
		t.Error("a state without a plan reports one")
	}
	for _, s := range []int{1, 2, 3, 4} {
		l.note(plan(s, 10*s))
	}
	ls, ok := l.get()
	want := []report.LiveStep{{Step: 1, Context: 10, Saved: 1}, {Step: 2, Context: 20, Saved: 1},
		{Step: 3, Context: 30, Saved: 1, Rewrite: true}, {Step: 4, Context: 40, Saved: 1}}
	if diff := cmp.Diff(want, ls.Steps); !ok || diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if ls.Plan.Step != 4 || ls.Plan.Stubs != nil {
		t.Errorf("plan step %d, stubs %v: want 4 and none kept", ls.Plan.Step, ls.Plan.Stubs)
	}
	if diff := cmp.Diff([]advisor.Item{{Key: "k", Decision: advisor.DecisionPruned}, {Key: "r", Decision: advisor.DecisionRecalled}}, ls.Plan.Items); diff != "" {
		t.Errorf("items kept: the stubbed ones, without their stub text (-want +got):\n%s", diff)
	}
	l.note(plan(4, 41)) // retried
	l.note(plan(2, 20)) // history rewritten back to step 2
	if diff := cmp.Diff([]int{1, 2}, steps(&l)); diff != "" {
		t.Errorf("after a retry and a rewind (-want +got):\n%s", diff)
	}
	for s := 3; s <= liveSteps+10; s++ {
		l.note(plan(s, s))
	}
	got := steps(&l)
	if len(got) != liveSteps || got[0] != 11 || got[len(got)-1] != liveSteps+10 {
		t.Errorf("%d steps from %d to %d; want the latest %d, 11 to %d", len(got), got[0], got[len(got)-1], liveSteps, liveSteps+10)
	}
}
