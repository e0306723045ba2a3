package calibrate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTraces checks each traced series against the figures the same pruner gets
// from the pricing (Applied and Oracle): the token-steps kept out, the calls over
// budget, the peak, the rewrites and the misses; and a session without outputs
// keeps its whole context.
func TestTraces(t *testing.T) {
	outs, sessions := anchorSession()
	sessions = append(sessions, Calls{Name: "empty", Context: []int{5, 7, 9}})
	opts := DefaultOptions()
	opts.Budget = 60_000
	applied := make([]int, len(outs))
	for i := range outs {
		if i < 4 {
			applied[i] = 8 // the advisor stubbed outputs 1-4 at call 8
		}
	}
	traces, err := Traces(outs, sessions, opts, applied)
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 2 {
		t.Fatalf("%d traces, want 2", len(traces))
	}
	e := mustEval(t, outs, sessions[:1], func() Options { o := opts; o.HardLimit = max(o.HardLimit, o.Budget); return o }())
	adv, err := e.Applied("advisor", applied)
	if err != nil {
		t.Fatal(err)
	}
	type figures struct {
		TokenSteps                         int64
		OverBudget, Peak, Rewrites, Misses int
	}
	of := func(keepAll []int, s Series) figures {
		var f figures
		for i, c := range s.Context {
			f.TokenSteps += int64(keepAll[i] - c)
			if c > opts.Budget {
				f.OverBudget++
			}
			f.Peak = max(f.Peak, c)
		}
		f.Rewrites, f.Misses = len(s.Rewrites), len(s.Recalls)
		return f
	}
	fromLevel := func(l Level) figures {
		return figures{l.TokenSteps, l.StepsOverBudget, l.PeakContext, l.Rewrites, l.Misses}
	}
	tr := traces[0]
	if tr.Advisor == nil {
		t.Fatal("no advisor series")
	}
	if diff := cmp.Diff(fromLevel(adv.Applied), of(tr.KeepAll, *tr.Advisor)); diff != "" {
		t.Errorf("advisor series against Applied (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{8}, tr.Advisor.Rewrites); diff != "" {
		t.Errorf("advisor rewrites (-want +got):\n%s", diff)
	}
	if got, want := tr.Advisor.Context[7], sessions[0].Context[7]-4*(20_000-40); got != want {
		t.Errorf("advisor context at call 8 = %d, want %d", got, want)
	}
	if diff := cmp.Diff(fromLevel(e.Oracle().Applied), of(tr.KeepAll, tr.Oracle)); diff != "" {
		t.Errorf("oracle series against Oracle().Applied (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sessions[0].Context, tr.KeepAll); diff != "" {
		t.Errorf("keep-all (-want +got):\n%s", diff)
	}
	if tr.Budget != 60_000 || tr.HardLimit != opts.HardLimit {
		t.Errorf("budget %d, hard limit %d; want 60000, %d", tr.Budget, tr.HardLimit, opts.HardLimit)
	}
	want := SessionTrace{Session: "empty", Budget: 60_000, HardLimit: opts.HardLimit, KeepAll: []int{5, 7, 9},
		Advisor: &Series{Context: []int{5, 7, 9}}, Oracle: Series{Context: []int{5, 7, 9}}}
	if diff := cmp.Diff(want, traces[1]); diff != "" {
		t.Errorf("session without outputs (-want +got):\n%s", diff)
	}
	if _, err := Traces(outs, sessions, opts, applied[:2]); err == nil {
		t.Error("Traces with 2 applied steps for 10 outputs: no error")
	}
}
