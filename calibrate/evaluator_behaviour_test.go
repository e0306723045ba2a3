package calibrate

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/planner"
)

// Two results in one message (the same offset) stay in the order given, so that
// when both are recalled at the same call the first given is recalled first and
// the second recall reads it from the cache. Worked by hand (Anthropic: read r =
// $0.30/M, write w = $3.75/M): call 1 sends a 2,000-token prompt; X (1,000
// tokens) and Y (3,000), listed in that order, come back in one message at offset
// 2,000, so calls 2-5 send 6,000. Both are stubbed at 2 (40-token stubs) and used
// at 4:
//
//	call 1: 2,000 written                                  0.0075
//	call 2: 2,000 read, the stubs' 80 written              0.0009
//	calls 3, 4: 2,080 read                                 0.000624 each
//	call 4's recalls: X's 1,000 + 100 after 2,080 read,
//	  then Y's 3,000 + 100 after 3,180 read: 5,260 r + 4,200 w = 0.017328
//	call 5: 6,280 read                                     0.001884
//
// $0.02886 in all (Y first would read 2,080 + 5,180: 2,000 tokens more).
func TestOutputsOfOneMessageKeepTheirOrder(t *testing.T) {
	outs := []Output{
		{Session: "m", Key: "X", Tokens: 1000, StubTokens: 40, Offset: 2000, Step: 1, CandidateFrom: 2, EndStep: 5, Uses: []int{4}},
		{Session: "m", Key: "Y", Tokens: 3000, StubTokens: 40, Offset: 2000, Step: 1, CandidateFrom: 2, EndStep: 5, Uses: []int{4}},
	}
	e := mustEval(t, outs, []Calls{{Name: "m", Context: []int{2000, 6000, 6000, 6000, 6000}}}, DefaultOptions())
	r, err := e.Evaluate("both", -1, []PruneAt{{Step: 2}, {Step: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if want := 0.0075 + 0.0009 + 2*0.000624 + 0.017328 + 0.001884; !approx(r.Decision.PaidUSD, want) || r.Decision.Misses != 2 {
		t.Errorf("decision level pays $%.6f with %d misses, want $%.6f with 2", r.Decision.PaidUSD, r.Decision.Misses, want)
	}
}

// Under the planner, the hard limit of an agent that compacts is its point less
// the larger of its margin and the largest growth of the context in one call so
// far. Worked by hand: the context grows 5,000 tokens a call (1,000 at call 1,
// 26,000 at call 6, 31,000 at 7); the agent compacts past 30,000 with a 1,000
// margin, so the hard limit is 30,000 - 5,000 = 25,000. A 5,000-token output at
// offset 1,000, pending from call 4, never pays for itself (at call 5 the 15,100
// tokens after it cost more to write again than its 4,900 save over 3 calls);
// call 6 (26,000) passes the hard limit and the planner stubs it then, so the
// agent does not compact at 7 (31,000 - 4,900 = 26,100).
func TestHardLimitLeavesTheLargestGrowthFree(t *testing.T) {
	c := make([]int, 7)
	for s := 1; s <= 7; s++ {
		c[s-1] = 5000*s - 4000
	}
	outs := []Output{{Session: "h", Key: "A", Tokens: 5000, StubTokens: 100, Offset: 1000, Step: 1, CandidateFrom: 4, EndStep: 7}}
	type rewrite struct {
		Step   int
		Reason planner.Reason
	}
	var got []rewrite
	opts := DefaultOptions()
	opts.CompactionOf = func(string, int) Compaction { return Compaction{Point: 30_000, Margin: 1000, SummaryTokens: 1000} }
	opts.OnRewrite = func(_ string, step int, d planner.Rewrite) { got = append(got, rewrite{step, d.Reason}) }
	e := mustEval(t, outs, []Calls{{Name: "h", Context: c, Provider: "anthropic"}}, opts)
	r, err := e.Evaluate("a", -1, []PruneAt{{Step: 4, Keep: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]rewrite{{6, planner.ReasonHardLimit}}, got); d != "" {
		t.Errorf("rewrites (-want +got):\n%s", d)
	}
	if r.Applied.Compactions != 0 || e.KeepAll().Applied.Compactions != 1 {
		t.Errorf("compactions: %d stubbing, %d keeping all; want 0 and 1 (at call 7)", r.Applied.Compactions, e.KeepAll().Applied.Compactions)
	}
}

// Calls recorded past the outputs' last step are no part of the session: a cold
// call after it is not counted. Outputs end at call 3; calls 3 and 5 come 10
// minutes after the one before (past the 5-minute TTL): one cold call.
func TestTimingStopsAtTheLastStep(t *testing.T) {
	t0 := time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	outs := []Output{{Session: "t", Key: "A", Tokens: 100, Step: 1, EndStep: 3}}
	e := mustEval(t, outs, []Calls{{Name: "t", Context: ctx(5, 1000), At: []time.Time{at(0), at(1), at(11), at(12), at(22)}}}, DefaultOptions())
	if untimed, cold := e.Timing(); untimed != 0 || cold != 1 {
		t.Errorf("Timing() = %d untimed, %d cold; want 0 and 1", untimed, cold)
	}
}

// Evaluate refuses a prune of an output that may never be pruned, at the session's
// last step too; a step past it means never, and is accepted.
func TestEvaluateRefusesAPruneOfAnOutputNeverEligible(t *testing.T) {
	outs := []Output{{Session: "s", Key: "A", Tokens: 100, Step: 1, EndStep: 5}}
	e := mustEval(t, outs, []Calls{{Name: "s", Context: ctx(5, 1000)}}, DefaultOptions())
	if _, err := e.Evaluate("last", -1, []PruneAt{{Step: 5}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("pruned at its last step: error %v, want ErrInvalid", err)
	}
	r, err := e.Evaluate("past", -1, []PruneAt{{Step: 6}})
	if err != nil || r.Pruned != 0 {
		t.Errorf("pruned past its last step: %d pruned, error %v; want none, nil", r.Pruned, err)
	}
}

// With no outputs at all, the rates are 0 (nothing pruned, nothing missed), not
// NaN, and the results encode as JSON.
func TestNoOutputsGiveZeroRates(t *testing.T) {
	e := mustEval(t, nil, nil, DefaultOptions())
	r := e.Rules()
	if r.PruneRate != 0 || r.MissRate != 0 {
		t.Errorf("prune rate %v, miss rate %v; want 0 and 0", r.PruneRate, r.MissRate)
	}
	if _, err := json.Marshal(e.Baselines(nil)); err != nil {
		t.Errorf("baselines over no outputs do not encode: %v", err)
	}
}
