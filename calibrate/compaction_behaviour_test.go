package calibrate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// keepAllTrace returns the context keep-all sends at each call of the only session
// of outs under comp (Traces), the calls before which the agent compacted, and
// keep-all's compaction misses.
func keepAllTrace(t *testing.T, outs []Output, sessions []Calls, comp Compaction) (ctx, compactions []int, misses int) {
	t.Helper()
	opts := DefaultOptions()
	opts.CompactionOf = func(string, int) Compaction { return comp }
	tr, err := Traces(outs, sessions, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr[0].KeepAll, tr[0].KeepAllCompactions, mustEval(t, outs, sessions, opts).KeepAll().Decision.CompactionMisses
}

// keepAllCase is one row of a keep-all trace table (runKeepAllCases): the
// session, how its agent compacts, and keep-all's context at each call, the calls
// before which the agent compacted and its compaction misses, worked by hand.
type keepAllCase struct {
	name        string
	session     func() ([]Output, []Calls)
	comp        Compaction
	ctx         []int
	compactions []int
	misses      int
}

// runKeepAllCases runs each case as a subtest (checkKeepAllTrace).
func runKeepAllCases(t *testing.T, cases []keepAllCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			outs, sessions := tc.session()
			checkKeepAllTrace(t, outs, sessions, tc.comp, tc.ctx, tc.compactions, tc.misses)
		})
	}
}

// checkKeepAllTrace checks keep-all's trace of the only session of outs under comp
// (keepAllTrace): its context at each call, the calls before which the agent
// compacted, and its compaction misses.
func checkKeepAllTrace(t *testing.T, outs []Output, sessions []Calls, comp Compaction, wantCtx, wantCompactions []int, wantMisses int) {
	t.Helper()
	ctx, compactions, misses := keepAllTrace(t, outs, sessions, comp)
	if d := cmp.Diff(wantCtx, ctx); d != "" {
		t.Errorf("keep-all's context by call (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantCompactions, compactions); d != "" {
		t.Errorf("calls before which the agent compacted (-want +got):\n%s", d)
	}
	if misses != wantMisses {
		t.Errorf("%d compaction misses, want %d", misses, wantMisses)
	}
}

// earlySession: three 9,000-token outputs from calls 1-3 (offsets 1,000, 11,000,
// 21,000, as in growingSession), then calls 4-6 that add 10,000 tokens each but no
// tool output: call s sends 10,000 s.
func earlySession() ([]Output, []Calls) {
	outs, sessions := growingSession()
	outs = outs[:3]
	for i := range outs {
		outs[i].EndStep, outs[i].Uses = 6, nil
	}
	sessions[0].Context = sessions[0].Context[:6]
	return outs, sessions
}

// The agent compacts when the context it is about to send passes its point, not
// at it, and keeps the tail it is told to: a fraction of the context, a number of
// tokens (an output whose message starts exactly where the tail starts is kept),
// or the messages of the last calls (none when those calls made no tool output).
// Each worked by hand on growingSession (call s sends 10,000 s unpruned; output k,
// 9,000 tokens from call k at offset 10,000 k + 1,000; output 2 used at call 7),
// summary 1,000 tokens; "cut" is what the compactions removed net of summaries.
func TestCompactionTail(t *testing.T) {
	runKeepAllCases(t, []keepAllCase{
		// Point 40,000: call 4 sends exactly 40,000 (no compaction); call 5 would
		// send 50,000: all of it summarised (outputs 1-4 gone), 1,000 sent, cut
		// 49,000. Calls 6, 7: 11,000, 21,000; output 2's loss at 7 writes 9,100
		// again. Call 8: 80,000 + 9,100 - 49,000 = 40,100 > 40,000: 1,000 (cut
		// 88,100); calls 9, 10: 90,000 + 9,100 - 88,100 = 11,000, then 21,000.
		{"at exactly the point no compaction", growingSession, Compaction{Point: 40_000, SummaryTokens: 1000},
			[]int{10_000, 20_000, 30_000, 40_000, 1000, 11_000, 21_000, 1000, 11_000, 21_000}, []int{5, 8}, 1},
		// As above, output 2 used again at 9: call 8's compaction drops the copy
		// the loss at 7 wrote (it lies before the tail, as any output), so the use
		// at 9 is lost again and writes 9,100 once more: call 10 sends 100,000 +
		// 18,200 - 88,100 = 30,100.
		{"a copy a compaction drops is lost again", func() ([]Output, []Calls) {
			outs, sessions := growingSession()
			outs[1].Uses = []int{7, 9}
			return outs, sessions
		}, Compaction{Point: 40_000, SummaryTokens: 1000},
			[]int{10_000, 20_000, 30_000, 40_000, 1000, 11_000, 21_000, 1000, 11_000, 30_100}, []int{5, 8}, 2},
		// Keep half, point 45,000. Call 5 (50,000): tail from 25,000, output 2
		// (21,000) goes, 3 (31,000) stays: 26,000 sent, cut 24,000. Call 6: 36,000.
		// Call 7 (46,000): tail from 23,000; outputs 3, 4 at 7,000 and 17,000 go, 5 at
		// 27,000 stays: 24,000 sent, cut 46,000; output 2's loss writes 9,100. Call
		// 8: 80,000 + 9,100 - 46,000 = 43,100. Call 9 (53,100): tail from 26,550:
		// 27,550 sent, cut 71,550. Call 10: 100,000 + 9,100 - 71,550 = 37,550.
		{"keeps half the context", growingSession, Compaction{Point: 45_000, SummaryTokens: 1000, KeepFraction: 0.5},
			[]int{10_000, 20_000, 30_000, 40_000, 26_000, 36_000, 24_000, 43_100, 27_550, 37_550}, []int{5, 7, 9}, 1},
		// Keep 9,000 tokens, point 45,000. Call 5 (50,000): the tail starts at
		// 41,000, exactly output 4's offset: output 4 stays (its use at 6 is no
		// loss), 1-3 go; 10,000 sent, cut 40,000. Calls 6, 7: 20,000, 30,000, then
		// output 2's 9,100. Call 8 (80,000 + 9,100 - 40,000 = 49,100): the tail
		// starts at 40,100, exactly output 7's offset (71,000 - 40,000 + the 9,100
		// written after call 7): 10,000 sent, cut 79,100. Calls 9, 10: 20,000,
		// 30,000. One loss (output 2), not two.
		{"an output at the tail's start is kept", func() ([]Output, []Calls) {
			outs, sessions := growingSession()
			outs[3].Uses = []int{6}
			return outs, sessions
		}, Compaction{Point: 45_000, SummaryTokens: 1000, KeepTokens: 9000},
			[]int{10_000, 20_000, 30_000, 40_000, 10_000, 20_000, 30_000, 10_000, 20_000, 30_000}, []int{5, 8}, 1},
		// Keep the last call's messages (TestCompactionKeepsTheLastCalls): call 5
		// keeps output 4 (from call 4), 10,000 sent, cut 40,000; call 8 (49,100)
		// keeps output 7, whose message starts at 71,000 - 40,000 + 9,100 = 40,100
		// (output 2, fetched again after call 7, lies before it): 10,000 sent.
		{"keeps the last call", growingSession, Compaction{Point: 45_000, SummaryTokens: 1000, KeepSteps: 1},
			[]int{10_000, 20_000, 30_000, 40_000, 10_000, 20_000, 30_000, 10_000, 20_000, 30_000}, []int{5, 8}, 1},
		// Keep the last call's messages when the last calls made no tool output
		// (earlySession, point 55,000): call 6 would send 60,000; no output is
		// from call 5, so only the summary is left (outputs 1-3 gone): 1,000.
		{"the last call made no output", earlySession, Compaction{Point: 55_000, SummaryTokens: 1000, KeepSteps: 1},
			[]int{10_000, 20_000, 30_000, 40_000, 50_000, 1000}, []int{6}, 0},
	})
}

// What compactions remove is not counted as token-steps kept out: only the
// pruner's stubs are. On growingSession with no uses and a compaction past 45,000
// to a 1,000-token summary, keep-all keeps nothing out (it compacts before calls 5
// and 10: 50,000 and then 100,000 - 49,000 = 51,000 would be sent), and the pruner
// that stubs output 1 at call 2 (9,000 - 100 = 8,900 tokens) keeps 8,900 out of
// each of calls 2-10: 80,100 token-steps. Its context is 10,000 s - 8,900; it
// compacts once, before call 6 (51,100 would be sent), and never again (call 10:
// 100,000 - 8,900 - 50,100 = 41,000).
func TestTokenStepsLeaveOutCompactions(t *testing.T) {
	outs, sessions := growingSession()
	for i := range outs {
		outs[i].Uses = nil
	}
	opts := DefaultOptions()
	opts.CompactionOf = func(string, int) Compaction { return Compaction{Point: 45_000, SummaryTokens: 1000} }
	e := mustEval(t, outs, sessions, opts)
	type figures struct {
		TokenSteps  int64
		Compactions int
	}
	ka := e.KeepAll()
	if d := cmp.Diff(figures{0, 2}, figures{ka.Decision.TokenSteps, ka.Decision.Compactions}); d != "" {
		t.Errorf("keep-all (-want +got):\n%s", d)
	}
	apply := make([]int, len(outs))
	apply[0] = 2
	r, err := e.Applied("output 1 at call 2", apply)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(figures{80_100, 1}, figures{r.Decision.TokenSteps, r.Decision.Compactions}); d != "" {
		t.Errorf("stubbing output 1 at call 2 (-want +got):\n%s", d)
	}
}

// An anchor decides on the context as it is sent, after the agent's compactions:
// in a session that compacts past 85,000 tokens, Anthropic's clearing (trigger
// 100,000) never acts. Worked by hand: edgeSession with 12 outputs of 10,000
// (call s sends 10,000 (s-1) unpruned); call 10 would send 90,000: the agent
// keeps the newest 50,000 (outputs 5-9, from offset 40,000) and a 1,000-token
// summary: 51,000 sent, cut 39,000; calls 11-13 send 61,000, 71,000, 81,000. The
// most Anthropic's clearing ever sees is call 10's 90,000.
func TestAnchorsSeeTheCompactedContext(t *testing.T) {
	outs, sessions := edgeSession(12, 10_000, 13, 0)
	comp := Compaction{Point: 85_000, SummaryTokens: 1000, KeepTokens: 50_000}
	ctx, compactions, _ := keepAllTrace(t, outs, sessions, comp)
	want := []int{0, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000, 70_000, 80_000, 51_000, 61_000, 71_000, 81_000}
	if d := cmp.Diff(want, ctx); d != "" || !cmp.Equal([]int{10}, compactions) {
		t.Fatalf("keep-all compacts before %v (want [10]); context (-want +got):\n%s", compactions, d)
	}
	opts := DefaultOptions()
	opts.CompactionOf = func(string, int) Compaction { return comp }
	for _, r := range mustEval(t, outs, sessions, opts).Anchors(0) {
		if r.Name == "anthropic-clearing" && (r.Pruned != 0 || r.Decision.Rewrites != 0) {
			t.Errorf("Anthropic's clearing cleared %d outputs in %d rewrites; want none: the context sent never passes 100,000", r.Pruned, r.Decision.Rewrites)
		}
	}
}

// The planner's hard limit (and the budget under it) at a call: the compaction
// point less the larger of the margin and the largest one-step growth so far, when
// the agent compacts (point > 0) and a margin is set; Options.HardLimit (180,000)
// otherwise. The other fields of the planner's input follow from the budget:
// low-water 80% of it, least rewrite 5% rounded up; the premium is Anthropic's
// write less its read ($3.75 - $0.30 per million tokens). growingSession grows
// 10,000 per call, so the growth so far is 0 at call 1 and 10,000 from call 2.
func TestPlannerInput(t *testing.T) {
	outs, sessions := growingSession()
	type in struct {
		Budget, HardLimit, LowWater, LeastRewrite int
		Premium                                   float64
	}
	const premium = 3.45e-6 // (3.75 - 0.30) / 1e6
	for _, tc := range []struct {
		name   string
		comp   Compaction
		budget int
		call   int
		want   in
	}{
		{"no compaction", Compaction{}, 100_000, 3, in{100_000, 180_000, 50_000, 5000, premium}},
		{"margin without a point", Compaction{Margin: 5000}, 100_000, 3, in{100_000, 180_000, 50_000, 5000, premium}},
		{"point without a margin", Compaction{Point: 45_000}, 100_000, 3, in{100_000, 180_000, 50_000, 5000, premium}},
		// 45,000 - max(5,000, 10,000) = 35,000; budget min(100,000, 35,000);
		// 0.5 x 35,000 = 17,500; 0.05 x 35,000 = 1,750.
		{"point and margin, growth over the margin", Compaction{Point: 45_000, Margin: 5000}, 100_000, 3, in{35_000, 35_000, 17_500, 1750, premium}},
		// call 1: no growth yet: 45,000 - 5,000.
		{"point and margin, first call", Compaction{Point: 45_000, Margin: 5000}, 100_000, 1, in{40_000, 40_000, 20_000, 2000, premium}},
		// 45,000 - 20,000 = 25,000, under the budget of 30,000.
		{"margin over the growth", Compaction{Point: 45_000, Margin: 20_000}, 30_000, 3, in{25_000, 25_000, 12_500, 1250, premium}},
		// 0.05 x 100,010 = 5,000.5, rounded up.
		{"least rewrite rounds up", Compaction{}, 100_010, 3, in{100_010, 180_000, 50_005, 5001, premium}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.Budget = tc.budget
			opts.CompactionOf = func(string, int) Compaction { return tc.comp }
			e := mustEval(t, outs, sessions, opts)
			v := newView(e, e.sessions[0])
			v.s = tc.call
			got := (&regimeP{}).input(v)
			g := in{got.Budget, got.HardLimit, got.LowWater, got.LeastRewrite, got.Premium}
			if d := cmp.Diff(tc.want, g, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-15 && b-a < 1e-15 })); d != "" {
				t.Errorf("planner input at call %d (-want +got):\n%s", tc.call, d)
			}
		})
	}
}
