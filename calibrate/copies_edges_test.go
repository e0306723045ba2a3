package calibrate

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/backoff"
	"github.com/pruneadvisor/pruneadvisor/planner"
)

// The tests of this file pin the rules of a recalled copy (appendAt) one edge at
// a time: the boundaries of its protection, where it lies in the context, what
// its stub registers, and how compactions, modelled or recorded, drop it once.

// copyRewrite is what a rewrite tells OnRewrite, as these tests check it: Suffix
// is the context after its first changed message, which says where the planner
// was told its first stub lies.
type copyRewrite struct {
	Step   int
	Reason planner.Reason
	Frees  int
	Suffix int
}

// copyFigures are the applied level's figures these tests check.
type copyFigures struct{ Rewrites, Misses, Peak, OverBudget int }

// mustSchedule parses a back-off schedule.
func mustSchedule(t *testing.T, text string) backoff.Schedule {
	t.Helper()
	w, err := backoff.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// runCopyScorer runs scorer "s" at cutoff 0.5 under opts (hard limit 120,000,
// low-water mark 80,000 and HardLimitLowWaterFraction 0 unless set changes them)
// and returns the applied level's figures and the rewrites told to OnRewrite.
func runCopyScorer(t *testing.T, outs []Output, sessions []Calls, set func(*Options)) (copyFigures, []copyRewrite, Level) {
	t.Helper()
	opts := DefaultOptions()
	opts.HardLimit, opts.HardLimitLowWaterFraction, opts.LowWaterFraction = 120_000, 0, 0.8
	if set != nil {
		set(&opts)
	}
	var told []copyRewrite
	opts.OnRewrite = func(_ string, step int, d planner.Rewrite) {
		told = append(told, copyRewrite{step, d.Reason, d.Frees, d.Suffix})
	}
	r := mustEval(t, outs, sessions, opts).Scorer("s", 0.5)
	a := r.Applied
	return copyFigures{a.Rewrites, a.Misses, a.PeakContext, a.StepsOverBudget}, told, a
}

// checkCopyScorer runs runCopyScorer and compares the applied level's figures and
// the rewrites told to OnRewrite with want and wantRewrites.
func checkCopyScorer(t *testing.T, outs []Output, sessions []Calls, set func(*Options), want copyFigures, wantRewrites []copyRewrite) {
	t.Helper()
	figures, told, _ := runCopyScorer(t, outs, sessions, set)
	if d := cmp.Diff(want, figures); d != "" {
		t.Errorf("applied level (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantRewrites, told); d != "" {
		t.Errorf("rewrites told to OnRewrite (-want +got):\n%s", d)
	}
}

// copySessionTo is copySession run on to call end (>= 13), each call from 9 on
// adding 5,000 tokens and no output: call s sends 1,000 + 140,000 + 5,000 (s-8)
// unpruned.
func copySessionTo(end int) ([]Output, []Calls) {
	outs, sessions := copySession()
	for i := range outs {
		outs[i].EndStep = end
	}
	c := sessions[0].Context
	for s := 14; s <= end; s++ {
		c = append(c, c[7]+5000*(s-8))
	}
	sessions[0].Context = c
	return outs, sessions
}

// A copy is protected through K steps after its recall and through its recall
// window, each bound inclusive, and its stub misses a use at the very call that
// stubs it. Worked by hand on copySession (TestHardLimitStubsRecalledCopy: call 7
// stubs outputs 1, 3 and 4, 59,880 freed after offset 1,000: suffix 121,000 -
// 1,000 - 59,880 = 60,120; output 1's use at 8 misses and its copy, 20,100
// tokens, comes back after call 8 at 141,000 - 59,880 = 81,120; calls 9-13 would
// send 106,220 to 126,220 unless the copy is stubbed, which frees 19,960).
//
//   - Defaults (K 3, first window 3; TestHardLimitStubsRecalledCopy): the copy
//     is a candidate from call 12 (12 - 8 = 4 > 3, 12 > 8 + 3): call 12's
//     rewrite has suffix 121,220 - 81,120 - 19,960 = 20,140; the use at 13
//     misses again. Peak 116,220 (call 11), over the budget at calls 6 and 9-13.
//   - K 4: at call 12, 12 - 8 = 4 is not past K: nothing to stub, 121,220 sent
//     (the peak). Call 13 (13 - 8 = 5) stubs it: suffix 126,220 - 81,120 -
//     19,960 = 25,140, and the use at 13, the call of the stub, misses: 106,260
//     sent, then the copy again.
//   - K 1, a first window of 4 steps: at call 12, 12 = 8 + 4 is still in the
//     window; as with K 4, call 13 stubs it.
//   - The use at 13 held by the stub's digest (Held): call 12 stubs the copy as
//     by default, and the use at 13 is no miss: one miss (at 8).
//   - Hard limit 115,000, a first window of 1 step, the default K: call 7 still
//     stubs outputs 1, 3 and 4 (121,000 > 115,000, the mark 80,000); call 11
//     would send 116,220 > 115,000 but 11 - 8 = 3 is not past the default K of
//     3: nothing to stub, 116,220 sent (the peak). Call 12 stubs the copy as by
//     default.
func TestCopyProtectionEdges(t *testing.T) {
	call7 := copyRewrite{7, planner.ReasonHardLimit, 59_880, 60_120}
	for _, tc := range []struct {
		name     string
		held     []bool
		set      func(*testing.T, *Options)
		figures  copyFigures
		rewrites []copyRewrite
	}{
		{"K 4", nil, func(_ *testing.T, o *Options) { o.ProtectedSteps = 4 }, copyFigures{2, 2, 121_220, 6},
			[]copyRewrite{call7, {13, planner.ReasonHardLimit, 19_960, 25_140}}},
		{"K 1, a first window of 4 steps", nil, func(t *testing.T, o *Options) {
			w := mustSchedule(t, "4")
			o.ProtectedSteps, o.RecallWindows = 1, w
		}, copyFigures{2, 2, 121_220, 6},
			[]copyRewrite{call7, {13, planner.ReasonHardLimit, 19_960, 25_140}}},
		{"the digest holds the use at 13", []bool{false, true}, nil, copyFigures{2, 1, 116_220, 6},
			[]copyRewrite{call7, {12, planner.ReasonHardLimit, 19_960, 20_140}}},
		{"the default K at a hard limit of 115,000", nil, func(t *testing.T, o *Options) {
			w := mustSchedule(t, "1")
			o.HardLimit, o.RecallWindows = 115_000, w
		}, copyFigures{2, 2, 116_220, 6},
			[]copyRewrite{call7, {12, planner.ReasonHardLimit, 19_960, 20_140}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, sessions := copySession()
			outs[1].Held = tc.held
			checkCopyScorer(t, outs, sessions, func(o *Options) {
				if tc.set != nil {
					tc.set(t, o)
				}
			}, tc.figures, tc.rewrites)
		})
	}
}

// The second recall of an original is protected for the schedule's second gap,
// a stubbed copy is no candidate again, and the copy a copy's miss brings back
// lies after the first copy's stub. copySession run on to call 20, worked by hand
// on from TestCopyProtectionEdges' defaults: the use at 13 misses the first
// copy's stub, and a second copy (20,100 tokens, recall 2) comes back after call
// 13. Calls 14-19 send 171,000 + 40,200 - 79,840 = 131,360 and 5,000 more each,
// up to 156,360 (the peak), all over the hard limit with no candidate: the first
// copy is stubbed already, the second is within its window (13 + 6 = 19; the
// default's second gap). Call 20 (161,360) stubs it: it lies at 166,000 - 59,880
// + 140 (the first copy's stub and the round trip's 100) = 106,260, suffix
// 161,360 - 106,260 - 19,960 = 35,140. Over the budget: calls 6 and 9-20.
func TestCopyRecalledAgainWaitsItsSecondWindow(t *testing.T) {
	outs, sessions := copySessionTo(20)
	checkCopyScorer(t, outs, sessions, nil, copyFigures{3, 2, 156_360, 13}, []copyRewrite{
		{7, planner.ReasonHardLimit, 59_880, 60_120},
		{12, planner.ReasonHardLimit, 19_960, 20_140},
		{20, planner.ReasonHardLimit, 19_960, 35_140},
	})
}

// A copy is never scored (keep 1): a rewrite forced by the hard limit takes a
// scored candidate before it. copySession with output 5 a candidate from call 10
// (scored 0.9 then), the budget and the hard limit both 120,000 and the mark at
// the budget (LowWaterFraction 1), K 0 and a first window of 1 step, worked by
// hand (each stub frees 19,960):
//   - call 7 (121,000): output 1 (0.6) is enough: 101,040, suffix 121,000 -
//     1,000 - 19,960 = 100,040;
//   - call 8 (141,000 - 19,960 = 121,040): output 3 (0.9, the earlier of 3 and
//     4, at 41,000 - 19,960 = 21,040): 101,080, suffix 80,040; output 1's use at
//     8 misses and its copy comes back (20,100);
//   - call 9 (146,000 + 20,100 - 39,920 = 126,180): the copy is in its window
//     (9 = 8 + 1): output 4 (at 61,000 - 39,920 = 21,080): 106,220, suffix
//     85,140;
//   - calls 10, 11: 111,220, 116,220 (the peak);
//   - call 12 (121,220): output 5 (0.9, at 81,000 - 59,880 = 21,120) before the
//     copy (1): 101,260, suffix 80,140; the copy stays, so output 1's use at 13
//     is no miss. Call 13: 106,260.
func TestCopyNeverScoredGoesLast(t *testing.T) {
	outs, sessions := copySession()
	outs[5].CandidateFrom, outs[5].Asks = 10, []Ask{{Step: 10, Keep: 0.9, OK: true}}
	checkCopyScorer(t, outs, sessions, func(o *Options) {
		o.Budget, o.HardLimit, o.LowWaterFraction = 120_000, 120_000, 1
		o.ProtectedSteps, o.RecallWindows = 0, mustSchedule(t, "1")
	}, copyFigures{4, 1, 116_220, 0}, []copyRewrite{
		{7, planner.ReasonHardLimit, 19_960, 100_040},
		{8, planner.ReasonHardLimit, 19_960, 80_040},
		{9, planner.ReasonHardLimit, 19_960, 85_140},
		{12, planner.ReasonHardLimit, 19_960, 80_140},
	})
}

// A recorded compaction drops a stubbed copy before its tail, counting what the
// copy's stub left in the dropped history, and the copy's pending stub miss
// becomes a compaction miss. copySession (TestCopyProtectionEdges' defaults) with
// a compaction recorded before call 13 that drops the first 150,000 tokens of the
// unpruned context (every output and the copy, recalled after call 8) for a
// 1,000-token summary. Worked by hand (p: the session's price):
//   - calls 1-6 send 1,000 + 20,000 (s-1), each reading what the last sent;
//   - call 7 rewrites from offset 1,000: p.Call(1,000, 61,120);
//   - call 8: p.Call(61,120, 81,120), then output 1's recall p.Call(81,120,
//     101,220);
//   - calls 9-11: 106,220, 111,220, 116,220, each reading the last;
//   - call 12 rewrites from the copy (81,120): p.Call(81,120, 101,260);
//   - before call 13 the summarising call reads 106,260 (101,260 cached) and
//     writes the summary; the history as sent is 150,000 - 59,880 (the stubs) +
//     140 (the copy's stub and round trip) = 90,260, so call 13 writes 16,000;
//     output 1's use at 13 is a compaction miss: p.Call(16,000, 36,100).
//
// One stub miss (at 8), one compaction miss, two rewrites, peak 116,220.
func TestRecordedCompactionDropsStubbedCopy(t *testing.T) {
	outs, sessions := copySession()
	sessions[0].Recorded = []RecordedCompaction{{Call: 13, Dropped: 150_000, SummaryTokens: 1000}}
	_, told, a := runCopyScorer(t, outs, sessions, nil)
	type figures struct{ Rewrites, Misses, CompactionMisses, RecordedCompactions, Peak int }
	got := figures{a.Rewrites, a.Misses, a.CompactionMisses, a.RecordedCompactions, a.PeakContext}
	if d := cmp.Diff(figures{2, 1, 1, 1, 116_220}, got); d != "" {
		t.Errorf("applied level (-want +got):\n%s", d)
	}
	if len(told) != 2 {
		t.Errorf("%d rewrites told to OnRewrite, want 2: %+v", len(told), told)
	}
	e := mustEval(t, outs, sessions, DefaultOptions())
	p := e.sessions[0].price
	want := p.Call(0, 1000) + p.Call(1000, 21_000) + p.Call(21_000, 41_000) + p.Call(41_000, 61_000) + p.Call(61_000, 81_000) +
		p.Call(81_000, 101_000) + p.Call(1000, 61_120) + p.Call(61_120, 81_120) + p.Call(81_120, 101_220) +
		p.Call(101_220, 106_220) + p.Call(106_220, 111_220) + p.Call(111_220, 116_220) + p.Call(81_120, 101_260) +
		p.Call(101_260, 106_260) + 1000*p.Output() + p.Call(0, 16_000) + p.Call(16_000, 36_100)
	if math.Abs(a.PaidUSD-want) > 1e-12 {
		t.Errorf("the applied level pays %.9f, want %.9f", a.PaidUSD, want)
	}
}

// Compactions lose an output once per time it is gone: at the very call whose
// compaction drops it when it is used there, again when a later compaction drops
// the copy that brought it back, never again for a copy already gone. Each worked
// by hand on growingSession (call s sends 10,000 s unpruned; output k, 9,000
// tokens from call k at offset 10,000 k + 1,000), keep-all, summaries of 1,000
// tokens, nothing kept but the summary.
func TestCompactionLosesCopiesOnce(t *testing.T) {
	withUses := func(k int, uses []int, recorded ...RecordedCompaction) func() ([]Output, []Calls) {
		return func() ([]Output, []Calls) {
			outs, sessions := growingSession()
			outs[k-1].Uses = uses
			sessions[0].Recorded = recorded
			return outs, sessions
		}
	}
	runKeepAllCases(t, []keepAllCase{
		// Output 4 used at 5. Point 45,000: call 5 (50,000) drops outputs 1-4,
		// and output 4's use at 5 is lost there: 9,100 written after call 5. Call
		// 6: 60,000 + 9,100 - 49,000 = 20,100; call 7: 30,100, then output 2's
		// loss writes 9,100. Call 8 (49,200) drops outputs 5-7 and both copies;
		// no use follows. Calls 9, 10: 90,000 + 18,200 - 97,200 = 11,000, 21,000.
		{"a use at the compaction's own call", withUses(4, []int{5}), Compaction{Point: 45_000, SummaryTokens: 1000},
			[]int{10_000, 20_000, 30_000, 40_000, 1000, 20_100, 30_100, 1000, 11_000, 21_000}, []int{5, 8}, 2},
		// Output 2 used at 7 and 10. Point 20,000: call 3 (30,000) drops outputs
		// 1-2 (cut 29,000), call 5 (21,000) outputs 3-4 (cut 49,000), call 7
		// (21,000) outputs 5-6 (cut 69,000); output 2's loss at 7 writes 9,100.
		// Call 8: 80,000 + 9,100 - 69,000 = 20,100 > 20,000: output 7 and the copy
		// (at 2,000) go, output 2 is lost again at 10 (cut 88,100). Call 9:
		// 11,000; call 10 (21,000) drops outputs 8-9; the copy, gone already, is
		// not lost a third time: one loss at 10.
		{"a copy gone already, at a later compaction", withUses(2, []int{7, 10}), Compaction{Point: 20_000, SummaryTokens: 1000},
			[]int{10_000, 20_000, 1000, 11_000, 1000, 11_000, 1000, 1000, 11_000, 1000}, []int{3, 5, 7, 8, 10}, 2},
		// Output 2 used at 7 and 10, point 40,000 (TestCompactionTail's second
		// case up to call 8: the copy goes at 8, output 2 lost again at 10, cut
		// 88,100), and a compaction recorded before call 9 that keeps the
		// unpruned context from output 8 (81,000): the history as sent is 81,000
		// - 88,100 + 9,100 (the copy, recalled after call 7, before output 8) =
		// 2,000, so call 9 sends 11,000 - 2,000 = 9,000 and call 10 100,000 +
		// 9,100 - 90,100 = 19,000. The copy, gone already, is not lost twice.
		{"a copy gone already, at a recorded compaction", withUses(2, []int{7, 10}, RecordedCompaction{Call: 9, Dropped: 81_000, SummaryTokens: 1000}),
			Compaction{Point: 40_000, SummaryTokens: 1000},
			[]int{10_000, 20_000, 30_000, 40_000, 1000, 11_000, 21_000, 1000, 9000, 19_000}, []int{5, 8, 9}, 2},
		// Output 2 used at 7 and 10, no modelled compaction; compactions recorded
		// before call 6 (dropping 41,000: outputs 1-3; call 6 sends 19,000) and
		// before call 9 (dropping 81,000: outputs 4-7 and the copy output 2's loss
		// at 7 wrote; the history as sent is 81,000 - 41,000 + 9,100 = 49,100 of
		// 58,100: call 9 sends 9,000). The copy goes: output 2 is lost again at 10
		// (100,000 + 9,100 - 90,100 = 19,000 sent).
		{"a live copy before a recorded tail", withUses(2, []int{7, 10},
			RecordedCompaction{Call: 6, Dropped: 41_000, SummaryTokens: 1000}, RecordedCompaction{Call: 9, Dropped: 81_000, SummaryTokens: 1000}),
			Compaction{},
			[]int{10_000, 20_000, 30_000, 40_000, 50_000, 19_000, 29_000, 48_100, 9000, 19_000}, []int{6, 9}, 2},
	})
}

// copyCandidates offers a copy once it is neither stubbed nor gone, past K and
// past the window of its recall number, both bounds inclusive, and only when its
// original's stub is shorter. copySession at call 12, K 3 (the default), windows
// 1 then 5 steps:
//
//	0: recall 1 of output 3 at 5: 12 - 5 = 7 > 3, 12 > 5 + 1: offered (-1);
//	1: recall 2 of output 3 at 7: 12 = 7 + 5, still in its window;
//	2: recall 1 of output 1 at 8: 12 - 8 = 4 > 3, 12 > 9: offered (-3);
//	3: recall 1 of output 4 at 8, stubbed already;
//	4: recall 1 of output 6 at 8, gone;
//	5: recall 1 of the tiny output at 8: its stub (40) is no shorter (30);
//	6: recall 1 of output 5 at 9: 12 - 9 = 3, not past K.
func TestCopyCandidatesAtTheirEdges(t *testing.T) {
	outs, sessions := copySession()
	w, err := backoff.List(1, 5)
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.RecallWindows = w
	e := mustEval(t, outs, sessions, opts)
	v := newView(e, e.sessions[0])
	v.s, v.visible = 12, len(outs)
	v.appends = []appendAt{
		{step: 5, tokens: 20_100, orig: 3, n: 1},
		{step: 7, tokens: 20_100, orig: 3, n: 2},
		{step: 8, tokens: 20_100, orig: 1, n: 1},
		{step: 8, tokens: 20_100, orig: 4, n: 1, stubbed: true, saved: 19_960},
		{step: 8, tokens: 20_100, orig: 6, n: 1, gone: true},
		{step: 8, tokens: 130, orig: 0, n: 1},
		{step: 9, tokens: 20_100, orig: 5, n: 1},
	}
	if d := cmp.Diff([]int{-1, -3}, v.copyCandidates()); d != "" {
		t.Errorf("copies offered at call 12 (-want +got):\n%s", d)
	}
}

// Where outputs and copies lie: a copy right before the first output of its call
// or a later one, after every copy before it less what their stubs removed; an
// output after the copies recalled up to its own call. growingSession at call 9,
// output 2 stubbed (8,900 saved), recalled after call 4 (copy A, 9,100 tokens,
// stubbed since: 200 left) and after call 6 (copy B, 9,100):
//
//	A: 41,000 (output 4) - 8,900 = 32,100;
//	output 4: 41,000 - 8,900 + 200 (A) = 32,300, just after A;
//	output 5: 51,000 - 8,900 + 200 = 42,300;
//	B: 61,000 (output 6) - 8,900 + 200 = 52,300;
//	output 7: 71,000 - 8,900 + 200 + 9,100 = 71,400.
func TestCopyAndOutputOffsets(t *testing.T) {
	outs, sessions := growingSession()
	e := mustEval(t, outs, sessions, DefaultOptions())
	v := newView(e, e.sessions[0])
	v.s, v.visible = 9, 8
	v.stubbed[1] = true
	v.fen.add(1, 8900)
	v.saved, v.added = 17_800, 18_200
	v.appends = []appendAt{
		{step: 4, tokens: 9100, orig: 1, n: 1, stubbed: true, saved: 8900},
		{step: 6, tokens: 9100, orig: 1, n: 2},
	}
	got := map[string]int{"A": v.copyOffset(0), "B": v.copyOffset(1), "output 4": v.offset(3), "output 5": v.offset(4), "output 7": v.offset(6)}
	want := map[string]int{"A": 32_100, "B": 52_300, "output 4": 32_300, "output 5": 42_300, "output 7": 71_400}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("offsets at call 9 (-want +got):\n%s", d)
	}
}

// stubCopy stubs a copy with its original's stub: the copy's saving is the
// original's (20,000 - 40 = 19,960), the rewrite's first change is the earlier of
// the one so far and the copy, and the first later use the stub's digest does not
// hold, from the stub's own call on, is registered as the copy's miss (-1).
// copySession in the state of TestCopyProtectionEdges' defaults at call 12:
// outputs 1, 3 and 4 stubbed (59,880), output 1's copy (after call 8) at 141,000
// - 59,880 = 81,120.
func TestStubCopy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		call      int
		held      []bool
		first     int
		wantFirst int
		missAt    map[int][]int
	}{
		{"no change so far", 12, nil, -1, 81_120, map[int][]int{13: {-1}}},
		{"a later change so far", 12, nil, 90_000, 81_120, map[int][]int{13: {-1}}},
		{"an earlier change so far", 12, nil, 1000, 1000, map[int][]int{13: {-1}}},
		{"a use at the stub's own call", 13, nil, -1, 81_120, map[int][]int{13: {-1}}},
		{"the digest holds the use", 12, []bool{false, true}, -1, 81_120, map[int][]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, sessions := copySession()
			outs[1].Held = tc.held
			e := mustEval(t, outs, sessions, DefaultOptions())
			v := newView(e, e.sessions[0])
			v.s, v.visible = tc.call, len(outs)
			for _, j := range []int{1, 3, 4} {
				v.stubbed[j] = true
				v.fen.add(j, 19_960)
			}
			v.saved, v.added = 59_880, 20_100
			v.appends = []appendAt{{step: 8, tokens: 20_100, orig: 1, n: 1}}
			missAt := map[int][]int{}
			first := v.stubCopy(0, tc.first, missAt)
			type state struct {
				First, Saved, CopySaved int
				Stubbed                 bool
				MissAt                  map[int][]int
			}
			want := state{tc.wantFirst, 79_840, 19_960, true, tc.missAt}
			got := state{first, v.saved, v.appends[0].saved, v.appends[0].stubbed, missAt}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("after stubCopy (-want +got):\n%s", d)
			}
		})
	}
}

// drop registers an original lost once, at its first use from the compaction's
// call on, when no copy of it is left, however many of its copies go at once.
// growingSession at call 9, outputs 1 and 2 gone (an earlier compaction), output
// 2 used at 5, 7 and 10: fetched after call 5 (copy A, stubbed since) and, A's
// stub missing, recalled after call 7 (copy B).
func TestDropCopies(t *testing.T) {
	for _, tc := range []struct {
		name       string
		outs       []int // positions dropped
		copies     []int // copies dropped
		lost       map[int][]int
		gone       []bool // outputs 1-5
		copiesGone []bool
	}{
		// Output 2 lost once, at 10.
		{"both copies", nil, []int{0, 1}, map[int][]int{10: {1}},
			[]bool{true, true, false, false, false}, []bool{true, true}},
		// B still holds output 2: nothing lost.
		{"one copy left", nil, []int{0}, map[int][]int{},
			[]bool{true, true, false, false, false}, []bool{true, false}},
		// Outputs 3 and 4 are never used; output 2 lost once, at 10.
		{"outputs 3 and 4 and both copies", []int{2, 3}, []int{0, 1}, map[int][]int{10: {1}},
			[]bool{true, true, true, true, false}, []bool{true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, sessions := growingSession()
			outs[1].Uses = []int{5, 7, 10}
			e := mustEval(t, outs, sessions, DefaultOptions())
			v := newView(e, e.sessions[0])
			v.s, v.visible = 9, 8
			v.gone[0], v.gone[1] = true, true
			v.appends = []appendAt{
				{step: 5, tokens: 9100, orig: 1, n: 1, stubbed: true, saved: 8900},
				{step: 7, tokens: 9100, orig: 1, n: 2},
			}
			lost := map[int][]int{}
			v.drop(tc.outs, tc.copies, lost)
			if d := cmp.Diff(tc.lost, lost); d != "" {
				t.Errorf("lost (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.gone, v.gone[:5]); d != "" {
				t.Errorf("outputs 1-5 gone (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.copiesGone, []bool{v.appends[0].gone, v.appends[1].gone}); d != "" {
				t.Errorf("copies gone (-want +got):\n%s", d)
			}
		})
	}
}

// Options.ProtectedSteps may be 0 (a copy protected by its recall window alone,
// as advisor.Config allows), never negative.
func TestOptionsValidateProtectedSteps(t *testing.T) {
	for _, tc := range []struct {
		k    int
		want string // "" for valid
	}{{0, ""}, {1000, ""}, {-1, "option ProtectedSteps = -1"}} {
		o := DefaultOptions()
		o.ProtectedSteps = tc.k
		err := o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ProtectedSteps %d: Validate() = %v, want nil", tc.k, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ProtectedSteps %d: Validate() = %v, want an ErrInvalid containing %q", tc.k, err, tc.want)
		}
	}
}
