package calibrate

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/planner"
)

// copySession is hardLimitSession run on to call 13: outputs 5 and 6 are never
// candidates, output 1 is used at calls 8 and 13, and calls 9-13 add 5,000 tokens
// each and no output: call s sends 1,000 + 20,000 min(s-1, 7) + 5,000 max(s-8, 0)
// unpruned.
func copySession() ([]Output, []Calls) {
	outs, sessions := hardLimitSession()
	for i := range outs {
		outs[i].EndStep = 13
		switch outs[i].Key {
		case "1":
			outs[i].Uses = []int{8, 13}
		case "5", "6":
			outs[i].CandidateFrom, outs[i].Asks = 0, nil
		}
	}
	c := sessions[0].Context
	for s := 9; s <= 13; s++ {
		c = append(c, c[7]+5000*(s-8))
	}
	sessions[0].Context = c
	return outs, sessions
}

// decisionOf is the decision level of the pruner that prunes output j (a
// position in e's outputs) at call step and nothing else.
func decisionOf(t *testing.T, e *Evaluator, j, step int) Level {
	t.Helper()
	ds := make([]PruneAt, len(e.outs))
	ds[j] = PruneAt{Step: step}
	r, err := e.Evaluate("one", -1, ds)
	if err != nil {
		t.Fatal(err)
	}
	return r.Decision
}

// A copy a recall brought back is an output like any other once its protection
// has passed: a rewrite forced by the hard limit may stub it again, last (never
// scored), and a later use its stub does not hold is a second miss. Worked by hand
// on copySession at cutoff 0.5, hard limit 120,000, low-water mark 80,000 (0.8 of
// the budget, HardLimitLowWaterFraction 0): call 7 (121,000) stubs outputs 1, 3
// and 4 (0.6, 0.9, 0.9; 59,880 freed, 61,120 sent). Output 1's use at 8 misses:
// its 20,000 tokens and the 100 of the round trip come back after call 8 (81,120
// sent). Calls 9-11 send 106,220, 111,220, 116,220. Call 12 would send 121,220:
// the only candidate is the copy (past K = 3 steps and the first recall's window
// of 3), whose stub frees 19,960 (101,260 sent); output 1's use at 13 misses
// again; call 13 sends 106,260. Peak 116,220 (call 11); over the budget of
// 100,000: calls 6, 9-13. With a first recall window of 6 steps the copy is still
// protected at 12 and 13: they send 121,220 and 126,220 (the peak), and the use
// at 13 finds the copy in the context.
func TestHardLimitStubsRecalledCopy(t *testing.T) {
	call7 := copyRewrite{7, planner.ReasonHardLimit, 59_880, 60_120} // suffix 121,000 - 1,000 - 59,880
	for _, tc := range []struct {
		name     string
		window   string
		figures  copyFigures
		rewrites []copyRewrite
	}{
		// Call 12's stub of the copy, at 81,120: suffix 121,220 - 81,120 - 19,960.
		{"default windows", "", copyFigures{2, 2, 116_220, 6},
			[]copyRewrite{call7, {12, planner.ReasonHardLimit, 19_960, 20_140}}},
		{"a first window of 6 steps", "6", copyFigures{1, 1, 126_220, 6}, []copyRewrite{call7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, sessions := copySession()
			checkCopyScorer(t, outs, sessions, func(o *Options) {
				if tc.window != "" {
					o.RecallWindows = mustSchedule(t, tc.window)
				}
			}, tc.figures, tc.rewrites)
		})
	}
}

// A compaction that drops an output but keeps, in its tail, the copy a recall
// brought back loses nothing: the copy still holds it. growingSession with output 2
// stubbed at call 3 (8,900 freed) and used at 7 and 9, compacting past 75,000
// tokens and keeping the newest 18,100: calls 3-7 send 21,100 to 61,100; the use
// at 7 misses and the copy (9,100 tokens) comes back after call 7, before output 7
// (at 71,000 - 8,900 = 62,100). Call 8 would send 80,000 + 9,100 - 8,900 =
// 80,200: the agent compacts, the tail starts at 62,100 (the copy): outputs 1-6 go
// (output 2's stub with them), the copy stays, and the use at 9 is neither a stub
// miss nor a compaction miss. Keeping 1,000 tokens fewer drops the copy too: the
// use at 9 is lost.
func TestCompactionKeepsRecalledCopy(t *testing.T) {
	for _, tc := range []struct {
		keep int
		want [3]int // compactions, stub misses, compaction misses
	}{{18_100, [3]int{1, 1, 0}}, {17_100, [3]int{1, 1, 1}}} {
		outs, sessions := growingSession()
		outs[1].Uses = []int{7, 9}
		opts := DefaultOptions()
		opts.CompactionOf = func(string, int) Compaction {
			return Compaction{Point: 75_000, SummaryTokens: 1000, KeepTokens: tc.keep}
		}
		d := decisionOf(t, mustEval(t, outs, sessions, opts), 1, 3)
		got := [3]int{d.Compactions, d.Misses, d.CompactionMisses}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("keeping %d tokens: (compactions, stub misses, compaction misses) (-want +got):\n%s", tc.keep, d)
		}
	}
}

// A recorded compaction drops a copy by where it lies in the history, as any
// output: one recalled after the dropped history stays in the kept tail.
// copySession with output 1 stubbed at call 7 (decision level) and used at calls
// 10 and 13: the use at 10 misses and the copy comes back after call 10, which
// sent 151,000 tokens unpruned (1,000 + 140,000 + 10,000), so it lies at 151,000
// in the unpruned history. A compaction recorded before call 12 that drops the
// first 141,000 tokens (every output: the last, output 7, starts at 121,000)
// keeps the copy, and the use at 13 is no loss; one that drops the first 155,000
// drops the copy too, and the use at 13 is lost.
func TestRecordedCompactionKeepsLaterCopy(t *testing.T) {
	for _, tc := range []struct {
		dropped int
		want    [3]int // recorded compactions, stub misses, compaction misses
	}{{141_000, [3]int{1, 1, 0}}, {155_000, [3]int{1, 1, 1}}} {
		outs, sessions := copySession()
		outs[1].Uses = []int{10, 13}
		sessions[0].Recorded = []RecordedCompaction{{Call: 12, Dropped: tc.dropped, SummaryTokens: 1000}}
		d := decisionOf(t, mustEval(t, outs, sessions, DefaultOptions()), 1, 7)
		got := [3]int{d.RecordedCompactions, d.Misses, d.CompactionMisses}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("dropping %d tokens: (recorded compactions, stub misses, compaction misses) (-want +got):\n%s", tc.dropped, d)
		}
	}
}

// An anchor clears a recall's copy as any tool result: Anthropic's clearing
// (trigger 100,000, keep the newest 3; placeholders free 19,990 of an output's
// 20,000) on anchorSession with output 1 used at calls 7 and 11, worked by hand
// (call s sends 1,000 + 20,000 min(s-1, 10) unpruned):
//   - call 6 (101,000): outputs 1, 2 cleared: 61,020; call 7 sends 81,020 and the
//     use of output 1 misses: its copy (20,100) comes back, before output 7;
//   - call 8 (141,000 + 20,100 - 39,980 = 121,120): the newest three results are
//     output 6, the copy and output 7: outputs 3-5 cleared: 61,150; call 9 81,150;
//   - call 10 (101,150): the newest three are outputs 7-9: output 6 and the copy
//     cleared: 61,170;
//   - call 11 sends 201,000 + 20,100 - 139,930 = 81,170, the peak; the use of
//     output 1 misses again (the copy's placeholder holds nothing): a second
//     copy, last;
//   - call 12 (201,000 + 40,200 - 139,930 = 101,270): the newest three are
//     outputs 9, 10 and the second copy: outputs 7, 8 cleared: 61,290.
//
// Two misses, four rewrites.
func TestAnchorClearsRecalledCopy(t *testing.T) {
	outs, sessions := anchorSession()
	outs[0].Uses = []int{7, 11}
	r := mustEval(t, outs, sessions, DefaultOptions()).Anchors(0)[0]
	if r.Name != "anthropic-clearing" {
		t.Fatalf("first anchor %q, want anthropic-clearing", r.Name)
	}
	type figures struct{ Misses, Rewrites, Peak int }
	got := figures{r.Applied.Misses, r.Applied.Rewrites, r.Applied.PeakContext}
	if d := cmp.Diff(figures{2, 4, 81_170}, got); d != "" {
		t.Errorf("anthropic-clearing, applied level (-want +got):\n%s", d)
	}
}

// The advisor's replayed rewrites (Applied) take a copy its recall brought back
// along with the next of them once the copy is past its protection and as old as
// its original was when it was pruned (the live advisor scores a recall's result
// as it scored the original at that age). handOutputs (TestEvaluateHand) with A
// (from call 1), B and C stubbed at calls 4, 5 and 10: A's use at 6 misses and
// its copy (3,100 tokens) comes back; at 10 it is past K (3), its first recall
// window (3) and A's age at its prune (3), so the rewrite of C also stubs it:
// from C's offset 3,080, 46,180 - 960 - 2,960 = 42,260 sent, 39,180 written
// (0.147849). Calls 1-3 0.2175, 4 0.17295, 5 0.154512, 6 0.012924 and A's round
// trip 0.024549, 7-9 3 x 0.013854: total 0.771846. With C stubbed at 7 instead
// there is no rewrite at 10 and the copy stays (calls 8-10 read 45,220).
func TestAppliedTakesRecalledCopy(t *testing.T) {
	outs, sessions := handOutputs()
	e := mustEval(t, outs, sessions, DefaultOptions())
	for _, tc := range []struct {
		c    int
		paid float64
	}{
		{10, 0.771846},
		// TestEvaluateHand's decision level to call 9, then a read of 45,220.
		{7, 0.2175 + 0.17295 + 0.154512 + 0.037473 + 0.158949 + 3*0.013566},
	} {
		r, err := e.Applied("advisor", []int{4, 5, tc.c})
		if err != nil {
			t.Fatal(err)
		}
		if r.Applied.Rewrites != 3 || r.Applied.Misses != 1 || !approx(r.Applied.PaidUSD, tc.paid) {
			t.Errorf("C at %d: %d rewrites, %d misses, paid %v; want 3, 1, %v", tc.c, r.Applied.Rewrites, r.Applied.Misses, r.Applied.PaidUSD, tc.paid)
		}
	}
}
