package calibrate

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// growingSession is the session worked by hand in TestCompactionHand: 10 calls,
// the context grows 10,000 tokens per call (10,000 x s at call s), and each call
// k = 1..9 produces a 9,000-token output (stub 100 tokens) whose message ends where
// call k+1's context does (offset 10,000 k + 1,000). Output 2 is used at call 7.
func growingSession() ([]Output, []Calls) {
	var outs []Output
	for k := 1; k <= 9; k++ {
		o := Output{Session: "g", Key: string(rune('0' + k)), Tokens: 9000, StubTokens: 100, Offset: 10_000*k + 1000,
			Step: k, CandidateFrom: k + 1, EndStep: 10}
		if k == 2 {
			o.Uses = []int{7}
		}
		outs = append(outs, o)
	}
	c := make([]int, 10)
	for s := range c {
		c[s] = 10_000 * (s + 1)
	}
	return outs, []Calls{{Name: "g", Context: c, Provider: "anthropic", Agent: "test"}}
}

// TestCompactionHand checks the compaction model against a hand computation: the
// agent compacts past 45,000 tokens to a 1,000-token summary (keeping nothing
// else, or the newest 15,000 tokens).
//
// Keep-all, summary only. Calls 1-4 send 10k..40k. Call 5 would send 50,000: the
// agent compacts (outputs 1-4 gone, cut 49,000) and sends 1,000. Calls 6-7 send
// 11,000 and 21,000; output 2, gone, is used at 7: a compaction miss, its 9,100
// tokens (output and overhead) written again and kept. Call 8 sends 80,000 +
// 9,100 - 49,000 = 40,100; call 9 would send 50,100: a second compaction (outputs
// 5-8 gone) down to 1,000; call 10 sends 11,000. Peak 50,100 (the summarising
// call's input).
//
// Keep-all, keeping 15,000 tokens: call 5's tail starts at 35,000, so output 4
// (offset 41,000) stays, output 3 (31,000) goes; the context becomes 16,000 (cut
// 34,000). Call 6 sends 26,000, call 7 36,000, then output 2's compaction miss
// writes 9,100 more; call 8 would send 89,100 - 34,000 = 55,100: a compaction
// with its tail from 40,100, where outputs 4-6 (offsets 7,000, 17,000, 27,000 in
// the compacted context) go and output 7 (71,000 + 9,100 - 34,000 = 46,100)
// stays. Two compactions, one compaction miss, peak 55,100.
//
// Every output stubbed as soon as it may be (decision level): call s sends 1,100 s
// + 8,900, plus from call 8 the 9,100 of output 2's stub miss at 7 (recalled):
// 29,000 at call 10, never past the point: no compaction.
func TestCompactionHand(t *testing.T) {
	outs, sessions := growingSession()
	for _, tc := range []struct {
		name              string
		comp              Compaction
		keepAll, decision Level
	}{
		{"summary only", Compaction{Point: 45_000, Margin: 5_000, SummaryTokens: 1000},
			Level{Compactions: 2, CompactionMisses: 1, PeakContext: 50_100},
			Level{Misses: 1, PeakContext: 29_000, Rewrites: 9}},
		{"keeps 15k", Compaction{Point: 45_000, Margin: 5_000, SummaryTokens: 1000, KeepTokens: 15_000},
			Level{Compactions: 2, CompactionMisses: 1, PeakContext: 55_100},
			Level{Misses: 1, PeakContext: 29_000, Rewrites: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.Budget, opts.HardLimit = 100_000, 180_000
			opts.CompactionOf = func(agent string, window int) Compaction {
				if agent != "test" || window != opts.Window {
					t.Errorf("CompactionOf(%q, %d)", agent, window)
				}
				return tc.comp
			}
			e := mustEval(t, outs, sessions, opts)
			ka := e.KeepAll()
			got := Level{Compactions: ka.Decision.Compactions, CompactionMisses: ka.Decision.CompactionMisses, PeakContext: ka.Decision.PeakContext}
			if d := cmp.Diff(tc.keepAll, got); d != "" {
				t.Errorf("keep-all (-want +got):\n%s", d)
			}
			r := evaluateAsSoonAsMay(t, e, outs)
			got = Level{Compactions: r.Decision.Compactions, CompactionMisses: r.Decision.CompactionMisses, Misses: r.Decision.Misses,
				PeakContext: r.Decision.PeakContext, Rewrites: r.Decision.Rewrites}
			if d := cmp.Diff(tc.decision, got); d != "" {
				t.Errorf("decision level (-want +got):\n%s", d)
			}
		})
	}
}

// TestCompactionPrice checks keep-all's price with a compaction against the calls
// summed by hand (summary only, as in TestCompactionHand).
func TestCompactionPrice(t *testing.T) {
	outs, sessions := growingSession()
	opts := DefaultOptions()
	opts.CompactionOf = func(string, int) Compaction { return Compaction{Point: 45_000, SummaryTokens: 1000} }
	e := mustEval(t, outs, sessions, opts)
	p, err := opts.Prices.For("anthropic")
	if err != nil {
		t.Fatal(err)
	}
	want := p.Call(0, 10_000) + p.Call(10_000, 20_000) + p.Call(20_000, 30_000) + p.Call(30_000, 40_000) +
		p.Call(40_000, 50_000) + 1000*p.Output() + p.Call(0, 1000) + // call 5: summarise, then write the new prefix
		p.Call(1000, 11_000) + p.Call(11_000, 21_000) + p.Call(21_000, 30_100) + // call 7 and the re-fetch of output 2
		p.Call(30_100, 40_100) +
		p.Call(40_100, 50_100) + 1000*p.Output() + p.Call(0, 1000) + // call 9
		p.Call(1000, 11_000)
	if got := e.KeepAllUSD(); math.Abs(got-want) > 1e-12 {
		t.Errorf("keep-all pays %.9f, want %.9f", got, want)
	}
}

// TestCompactionHardLimit: under the planner (applied level) the hard limit is the
// point less the larger of the margin and the growth so far (10,000 here), so the
// regime stubs before the point and the agent never compacts.
func TestCompactionHardLimit(t *testing.T) {
	outs, sessions := growingSession()
	opts := DefaultOptions()
	opts.CompactionOf = func(string, int) Compaction { return Compaction{Point: 45_000, Margin: 5_000, SummaryTokens: 1000} }
	e := mustEval(t, outs, sessions, opts)
	ds := make([]PruneAt, len(outs))
	for i, o := range outs {
		ds[i] = PruneAt{Step: o.CandidateFrom, Keep: 0.1}
	}
	r, err := e.Evaluate("all", -1, ds)
	if err != nil {
		t.Fatal(err)
	}
	if r.Applied.Compactions != 0 || r.Applied.PeakContext > 35_000 || r.Applied.Rewrites == 0 {
		t.Errorf("applied: %d compactions, peak %d, %d rewrites; want none, <= 35,000 (45,000 - 10,000), some",
			r.Applied.Compactions, r.Applied.PeakContext, r.Applied.Rewrites)
	}
	ka := e.KeepAll()
	if ka.Applied.Compactions != 2 {
		t.Errorf("keep-all compacts %d times, want 2", ka.Applied.Compactions)
	}
}

// TestLastResort: growingSession with every output protected for four calls
// (CandidateFrom k+4, at most 10) and no score. The hard limit is 35,000 (45,000
// less the 10,000 growth) and the last resort's limit 40,000 (less the 5,000
// margin alone). Without the last resort nothing can be stubbed before output 1
// becomes a candidate at call 5, and the agent compacts once. With it, call 4
// (40,000, not past 40,000) waits; at call 5 (50,000) the forced rewrite takes
// output 1, now a candidate (41,100), then the protected outputs 2 (32,200) and 3
// (23,300, under the low-water mark of 0.8 x 35,000 = 28,000): no compaction to
// the end, peak 40,000 (call 4), and output 2's use at call 7 is a stub miss
// (recallable), not a compaction miss. An agent that keeps its newest 45,000
// tokens would drop none of them: nothing is a last resort then.
func TestLastResort(t *testing.T) {
	outs, sessions := growingSession()
	for i := range outs {
		outs[i].CandidateFrom = min(outs[i].Step+4, 10)
	}
	run := func(lastResort bool, keep int) Level {
		opts := DefaultOptions()
		opts.LastResort = lastResort
		opts.CompactionOf = func(string, int) Compaction {
			return Compaction{Point: 45_000, Margin: 5_000, SummaryTokens: 1000, KeepTokens: keep}
		}
		return mustEval(t, outs, sessions, opts).Scorer("s", 0.5).Applied
	}
	without, with := run(false, 0), run(true, 0)
	if without.Compactions != 1 {
		t.Errorf("without the last resort: %d compactions, want 1", without.Compactions)
	}
	got := [4]int{with.Compactions, with.CompactionMisses, with.Misses, with.PeakContext}
	if d := cmp.Diff([4]int{0, 0, 1, 40_000}, got); d != "" {
		t.Errorf("with the last resort (compactions, compaction misses, stub misses, peak) (-want +got):\n%s", d)
	}
	if d := cmp.Diff(run(false, 45_000), run(true, 45_000)); d != "" {
		t.Errorf("an agent that keeps its newest 45,000 tokens drops no protected output: the last resort must change nothing (-without +with):\n%s", d)
	}
}

// TestGrowths: the hard limit's margin looks back over the last n calls (0: all).
// Context 0, 10, 50, 55, 60, 61, 62: growths 10, 40, 5, 5, 1, 1.
func TestGrowths(t *testing.T) {
	ctx := []int{0, 10, 50, 55, 60, 61, 62}
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{0, []int{0, 10, 40, 40, 40, 40, 40}},
		{1, []int{0, 10, 40, 5, 5, 1, 1}},
		{3, []int{0, 10, 40, 40, 40, 5, 5}},
	} {
		if d := cmp.Diff(tc.want, growths(ctx, tc.n)); d != "" {
			t.Errorf("growths(n=%d) (-want +got):\n%s", tc.n, d)
		}
	}
}

// TestOverBudgetCutoff works the budget's extra candidates by hand on
// growingSession with no compaction and no use: budget 35,000 (low-water 28,000,
// least rewrite 1,750), no output pending at cutoff 0.1, the odd outputs scored
// 0.2 and the even ones 0.5 at the step they become candidates, each stub saving
// 8,900. Call 4 sends 40,000: outputs 1 and 3 go (22,200). Call 6: 42,200, output
// 5 (33,300). Call 7: 43,300, output 7 not yet a candidate. Call 8: 53,300, output
// 7 (44,400). Call 10: 64,400, output 9 (55,500, the peak). Four rewrites, calls
// 7-10 over the budget, saved 17,800 x 2 + 26,700 x 2 + 35,600 x 2 + 44,500 =
// 204,700 token-steps. Off (0), nothing is pruned.
func TestOverBudgetCutoff(t *testing.T) {
	outs, sessions := growingSession()
	for i := range outs {
		outs[i].Uses = nil
		keep := 0.5
		if outs[i].Step%2 == 1 {
			keep = 0.2
		}
		outs[i].Asks = []Ask{{Step: outs[i].CandidateFrom, Keep: keep, OK: true}}
	}
	run := func(cutoff float64) Level {
		opts := DefaultOptions()
		opts.Budget, opts.PriceForced, opts.OverBudgetCutoff = 35_000, false, cutoff
		return mustEval(t, outs, sessions, opts).Scorer("s", 0.1).Applied
	}
	on := run(0.3)
	got := [4]int64{int64(on.Rewrites), int64(on.StepsOverBudget), int64(on.PeakContext), on.TokenSteps}
	if d := cmp.Diff([4]int64{4, 4, 55_500, 204_700}, got); d != "" {
		t.Errorf("over_budget_cutoff 0.3 (rewrites, calls over budget, peak, token-steps) (-want +got):\n%s", d)
	}
	if off := run(0); off.Rewrites != 0 || off.TokenSteps != 0 {
		t.Errorf("over_budget_cutoff 0: %d rewrites, %d token-steps; want none", off.Rewrites, off.TokenSteps)
	}
}

// estimatorAt: OverBudgetFactor replaces the factor over the budget only, and
// 0 keeps Estimator's. After 100 calls: max(3, 0.15 x 100) = 15; over the budget
// max(3, 0.2 x 100) = 20.
func TestEstimatorAt(t *testing.T) {
	o := DefaultOptions()
	got := []float64{o.estimatorAt(false).Remaining(100), o.estimatorAt(true).Remaining(100)}
	o.OverBudgetFactor = 0
	got = append(got, o.estimatorAt(true).Remaining(100))
	if d := cmp.Diff([]float64{15, 20, 15}, got); d != "" {
		t.Errorf("remaining after 100 calls (under, over, over with factor 0) (-want +got):\n%s", d)
	}
}

// TestCompactionDecides works the three counts an agent may compare with its
// point (Compaction.Decides) on growingSession (point 45,000, a 1,000-token
// summary, nothing kept, margin 5,000), by hand.
//
// Keep-all. Sent and estimate alike (no rewrite, so the two counts agree):
// TestCompactionHand's two compactions, before calls 5 and 9. Usage: before call s
// the agent counts what call s-1 sent plus the growth since (10,000) less the
// output that came since (9,000): 11,000, 21,000, 31,000, 41,000 before calls
// 2-5, so call 5 sends 50,000; before call 6, 51,000: it compacts then (outputs
// 1-5 gone, 1,000 sent). Call 7 sends 11,000 and output 2's compaction miss writes
// 9,100 more; calls 8-10 count 21,100, 31,100 and 41,100: no second compaction.
//
// TestLastResort's regime (candidates 4 calls after their output, the last
// resort on): at call 5 (50,000, past the point) the forced rewrite brings the
// context to 23,300. Sent: no compaction. Usage: before call 5 the count is
// 41,000, under the point, and the rewrite keeps the later ones under it: none.
// Estimate: the agent counts 50,000 before the rewrite and compacts: one.
func TestCompactionDecides(t *testing.T) {
	for _, tc := range []struct {
		decides                 string
		keepAll, regime, misses int
	}{
		{DecidesSent, 2, 0, 1},
		{DecidesUsage, 1, 0, 1},
		{DecidesEstimate, 2, 1, 1},
	} {
		outs, sessions := growingSession()
		for i := range outs {
			outs[i].CandidateFrom = min(outs[i].Step+4, 10)
		}
		opts := DefaultOptions()
		opts.CompactionOf = func(string, int) Compaction {
			return Compaction{Point: 45_000, Margin: 5_000, SummaryTokens: 1000, Decides: tc.decides}
		}
		e := mustEval(t, outs, sessions, opts)
		ka, r := e.KeepAll().Decision, e.Scorer("s", 0.5).Applied
		got := [3]int{ka.Compactions, r.Compactions, ka.CompactionMisses}
		if d := cmp.Diff([3]int{tc.keepAll, tc.regime, tc.misses}, got); d != "" {
			t.Errorf("decides %q: (keep-all's compactions, the regime's, keep-all's compaction misses) (-want +got):\n%s", tc.decides, d)
		}
	}
	if err := (Compaction{Point: 1, Decides: "guess"}).Validate(); err == nil {
		t.Error(`Decides "guess": no error`)
	}
}

// TestCompactionTurn: an agent that counts its usage only between turns
// (DecidesTurn) on growingSession's keep-all (point 45,000, a 1,000-token
// summary, nothing kept), by hand. One turn from call 1 and no window: it never
// counts again and never compacts (call 10 sends 100,000). A turn starting at
// call 6: the count there is 51,000 (TestCompactionDecides' usage), so it
// compacts before call 6, as the usage count does. One turn and a 75,000-token
// window: calls 1-7 send up to 70,000; call 8 (80,000) passes the window, so the
// request fails and the agent compacts then (outputs 1-7 gone; output 2 was used
// at 7, before: no compaction miss).
func TestCompactionTurn(t *testing.T) {
	for _, tc := range []struct {
		name        string
		turns       []int
		window      int
		compactions int
		peak        int
	}{
		{"one turn", []int{1}, 0, 0, 100_000},
		{"a turn at call 6", []int{1, 6}, 0, 1, 60_000},
		{"one turn, a window of 75,000", []int{1}, 75_000, 1, 80_000},
	} {
		outs, sessions := growingSession()
		sessions[0].TurnStart = make([]bool, len(sessions[0].Context))
		for _, s := range tc.turns {
			sessions[0].TurnStart[s-1] = true
		}
		opts := DefaultOptions()
		opts.CompactionOf = func(string, int) Compaction {
			return Compaction{Point: 45_000, Margin: 5_000, SummaryTokens: 1000, Decides: DecidesTurn, Window: tc.window}
		}
		ka := mustEval(t, outs, sessions, opts).KeepAll().Decision
		if ka.Compactions != tc.compactions || ka.PeakContext != tc.peak {
			t.Errorf("%s: %d compactions, peak %d; want %d, %d", tc.name, ka.Compactions, ka.PeakContext, tc.compactions, tc.peak)
		}
	}
}

// evaluateAsSoonAsMay evaluates, as "all", every output of outs stubbed at the
// first step it is a candidate (the decision level of TestCompactionHand and
// TestRecordedCompaction).
func evaluateAsSoonAsMay(t *testing.T, e *Evaluator, outs []Output) Result {
	t.Helper()
	ds := make([]PruneAt, len(outs))
	for i, o := range outs {
		ds[i] = PruneAt{Step: o.CandidateFrom}
	}
	r, err := e.Evaluate("all", -1, ds)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
