package calibrate

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/planner"
)

// The tests of this file pin how every pruner treats a recalled copy (appendAt)
// since the anchors see copies as tool results (view.sequence) and a copy is
// decided as its original was (decisions): where a copy lies among the tool
// results, what the anchors count of it, and when the decision level, the
// planner and the advisor's replayed rewrites take it.

// sequence lists the tool results in the order of the context: each copy just
// before the first output made at or after its call (a copy made after the last
// visible output's call comes after them all), outputs and copies a compaction
// dropped left out. copySession (positions: 0 the tiny output, k output k):
//
//   - at call 9, every output visible; a compaction dropped the tiny output,
//     outputs 1 and 2 and copy 0 (output 1 recalled after call 2, so before
//     output 2); copy 1 (output 2 recalled after call 4) lies before output 4;
//     copies 2 and 3 (after call 8: no output is made at or after it) come last:
//     3, -2, 4, 5, 6, 7, -3, -4;
//   - at call 13, a compaction before call 12 dropped every output and copy 0
//     (after call 8); outputs 1 and 5 were fetched again after call 12 (copies
//     1 and 2): -2, -3.
func TestSequenceOfCopiesAndOutputs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		call    int
		gone    []int
		appends []appendAt
		want    []int
	}{
		{"copies among the outputs and after them", 9, []int{0, 1, 2}, []appendAt{
			{step: 2, tokens: 20_100, orig: 1, n: 1, gone: true},
			{step: 4, tokens: 20_100, orig: 2, n: 1},
			{step: 8, tokens: 20_100, orig: 1, n: 2},
			{step: 8, tokens: 20_100, orig: 3, n: 1},
		}, []int{3, -2, 4, 5, 6, 7, -3, -4}},
		{"copies alone after a compaction", 13, []int{0, 1, 2, 3, 4, 5, 6, 7}, []appendAt{
			{step: 8, tokens: 20_100, orig: 1, n: 1, gone: true},
			{step: 12, tokens: 20_100, orig: 1, n: 2},
			{step: 12, tokens: 20_100, orig: 5, n: 1},
		}, []int{-2, -3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, sessions := copySession()
			e := mustEval(t, outs, sessions, DefaultOptions())
			v := newView(e, e.sessions[0])
			v.s, v.visible = tc.call, len(outs)
			for _, j := range tc.gone {
				v.gone[j] = true
			}
			v.appends = tc.appends
			if d := cmp.Diff(tc.want, v.sequence()); d != "" {
				t.Errorf("sequence at call %d (-want +got):\n%s", tc.call, d)
			}
		})
	}
}

// An anchor counts a copy as its original: its original's tokens (the round
// trip's overhead left out), stubbed when the copy is, and saving what the
// original's placeholder would (savesOf). copySession at call 10 under Gemini
// CLI's preview (151 tokens): output 2 masked; copy 0 (output 1, 20,000 tokens,
// recalled after call 8) masked since (saved 19,849); copy 1 (the tiny output,
// 30 tokens, fetched after call 9 once a compaction dropped it):
//
//	tokensAt: copy 0 20,000 (not 20,100), copy 1 30, output 3 20,000;
//	stubbedAt: copy 0 yes, copy 1 no, output 2 yes, output 3 no;
//	savesAt: copy 0 20,000 - 151 = 19,849, copy 1 max(30 - 151, 0) = 0,
//	  output 3 19,849 (the preview's, not its own stub's 19,960), the tiny
//	  output 0.
func TestSequencePositionAccessors(t *testing.T) {
	outs, sessions := copySession()
	e := mustEval(t, outs, sessions, DefaultOptions())
	v := newView(e, e.sessions[0])
	v.s, v.visible = 10, len(outs)
	v.stubSize, v.hold = GeminiPreviewTokens, holdPreview
	v.gone[0] = true
	v.stubbed[2] = true
	v.fen.add(2, 19_849)
	v.appends = []appendAt{
		{step: 8, tokens: 20_100, orig: 1, n: 1, stubbed: true, saved: 19_849},
		{step: 9, tokens: 130, orig: 0, n: 1},
	}
	type at struct {
		Tokens  int
		Stubbed bool
		Saves   int
	}
	got := map[string]at{}
	for name, p := range map[string]int{"copy 0": -1, "copy 1": -2, "output 2": 2, "output 3": 3, "tiny": 0} {
		got[name] = at{v.tokensAt(p), v.stubbedAt(p), v.savesAt(p)}
	}
	want := map[string]at{
		"copy 0":   {20_000, true, 19_849},
		"copy 1":   {30, false, 0},
		"output 2": {20_000, true, 19_849},
		"output 3": {20_000, false, 19_849},
		"tiny":     {30, false, 0},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tokensAt, stubbedAt, savesAt (-want +got):\n%s", d)
	}
}

// clear_at_least counts a copy at its original's tokens, as the API counts a
// tool result's: anchorSession with output 1 used at calls 7 and 11 (call s
// sends 1,000 + 20,000 min(s-1, 10) unpruned; placeholders free 19,990 of
// 20,000; a copy is 20,100 tokens). Worked by hand:
//
// clear_at_least 40,000 (TestAnchorClearsRecalledCopy's course, each clearing
// freeing at least that much):
//   - call 6 (101,000): outputs 1-2 (40,000): 61,020; call 7 81,020, output 1's
//     use misses: its copy comes back before output 7;
//   - call 8 (121,120): outputs 3-5 (60,000): 61,150; call 9 81,150;
//   - call 10 (101,150): the newest three are outputs 7-9; output 6 and the copy
//     hold 20,000 + 20,000 = 40,000: cleared, 61,170;
//   - call 11 81,170 (the peak); the use misses the copy's placeholder: a second
//     copy, last;
//   - call 12 (101,270): outputs 7, 8 (40,000): 61,290.
//
// Two misses, four rewrites, never over the budget, outputs 1-8 cleared;
// token-steps (unpruned less sent) 39,980 x 2 + 79,850 x 2 + 119,830 x 2 +
// 139,710 = 619,030.
//
// clear_at_least 40,001:
//   - call 6 (101,000): outputs 1-2 hold 40,000: nothing;
//   - call 7 (121,000): outputs 1-3 (60,000): 61,030; output 1's use at 7
//     misses (the stub's own call): its copy comes back before output 7;
//   - call 8 (101,130): outputs 4-5 hold 40,000: nothing;
//   - call 9 (121,130): outputs 4-6 (60,000): 61,160; call 10 81,160;
//   - calls 11 and 12 (101,160, the peak): the newest three are outputs 8-10;
//     the copy and output 7 hold 40,000: nothing; the use at 11 finds the copy.
//
// One miss, two rewrites, over the budget at calls 6, 8, 11 and 12, outputs 1-6
// cleared; token-steps 59,970 + 39,870 + 99,840 x 4 = 499,200.
func TestClearAtLeastCountsACopyAsItsOriginal(t *testing.T) {
	type figures struct {
		Misses, Rewrites, Peak, OverBudget, Pruned int
		TokenSteps                                 int64
	}
	for _, tc := range []struct {
		atLeast int
		want    figures
	}{
		{40_000, figures{2, 4, 81_170, 0, 8, 619_030}},
		{40_001, figures{1, 2, 101_160, 4, 6, 499_200}},
	} {
		outs, sessions := anchorSession()
		outs[0].Uses = []int{7, 11}
		r := mustEval(t, outs, sessions, DefaultOptions()).Anchors(tc.atLeast)[1]
		if r.Name != "anthropic-clearing-at-least" {
			t.Fatalf("second anchor %q, want anthropic-clearing-at-least", r.Name)
		}
		a := r.Applied
		got := figures{a.Misses, a.Rewrites, a.PeakContext, a.StepsOverBudget, r.Pruned, a.TokenSteps}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("clear_at_least %d, applied level (-want +got):\n%s", tc.atLeast, d)
		}
	}
}

// Gemini CLI's masking after a recorded compaction: what the compaction dropped
// is neither protected nor masked, and the copy a compaction miss fetched is a
// tool result like any other, in the window and then masked, without counting
// as an output cleared. anchorSession (call s sends 1,000 + 20,000 min(s-1, 10)
// unpruned; the preview frees 19,849 of 20,000; the window holds the newest
// three results, 60,000 >= 50,000; masking needs 30,000: two results), output
// 1 used at 7, a compaction recorded before call 6 dropping the first 21,000
// tokens (output 1) for a 1,000-token summary. Worked by hand:
//   - calls 1-5: output 1 alone is older than the window (20,000): nothing;
//   - call 6: 101,000 before the compaction (the peak), 80,000 after (cut
//     21,000); output 2 alone is older than outputs 3-5: nothing;
//   - call 7 (100,000): outputs 2-3 masked: 60,302; output 1's use is a
//     compaction miss: its copy (20,100) comes back before output 7;
//   - call 8 (100,402): the window is output 7, the copy and output 6; outputs
//     4-5 masked: 60,704;
//   - call 9 (80,704): the window is outputs 7-8 and the copy; output 6 alone:
//     nothing;
//   - call 10 (100,704): the window is outputs 7-9; the copy and output 6
//     masked: 61,006 (output 1 has no use left);
//   - calls 11-12 (81,006): output 7 alone: nothing.
//
// Three rewrites, no stub miss, one compaction miss, outputs 2-6 masked (the
// copy is no output); token-steps (unpruned less sent less the cut) 39,698 +
// 59,296 x 2 + 98,994 x 3 = 455,272.
func TestMaskingAfterARecordedCompaction(t *testing.T) {
	outs, sessions := anchorSession()
	outs[0].Uses = []int{7}
	sessions[0].Recorded = []RecordedCompaction{{Call: 6, Dropped: 21_000, SummaryTokens: 1000}}
	type figures struct {
		Rewrites, Misses, CompactionMisses, Peak, Pruned int
		TokenSteps                                       int64
	}
	found := false
	for _, r := range mustEval(t, outs, sessions, DefaultOptions()).Anchors(0) {
		if r.Name != "gemini-cli-masking" {
			continue
		}
		found = true
		a := r.Applied
		got := figures{a.Rewrites, a.Misses, a.CompactionMisses, a.PeakContext, r.Pruned, a.TokenSteps}
		if d := cmp.Diff(figures{3, 0, 1, 101_000, 5, 455_272}, got); d != "" {
			t.Errorf("Gemini CLI's masking, applied level (-want +got):\n%s", d)
		}
	}
	if !found {
		t.Error("no gemini-cli-masking row")
	}
}

// A copy is decided at the age its original was decided at, never before its
// original's decision, once it is past its protection: the decision level stubs
// it then (with the outputs decided there), the advisor's replayed rewrites with
// the next of them, never without one. growingSession at call 9 (outputs 1-8
// visible; output k from call k at position k-1), K 3 and a first recall window of
// 3: a compaction dropped outputs 1-4; outputs 2, 3 and 4 were fetched after call
// 5 (copies 0-2, due from call 9: 9 - 5 > 3, 9 > 5 + 3) and output 1 after call 7
// (copy 3, protected until call 11).
//
//   - Output 2 decided at 4 (age 2), 3 and 6 at 9: copy 0 is decided from call
//     max(4, 5 + 2) = 7; copy 1 (output 3 decided at age 6) only from 11, copy 2
//     never (output 4 undecided): outputs 3 (gone) and 6 and copy 0, at both
//     levels.
//   - Output 2 decided at 4, 6 at 10: copy 0 alone; the advisor makes no rewrite
//     at 9: nothing.
//   - Output 2 decided at 7 (age 5: copy 0 from 10), 6 at 9: output 6 alone.
//   - Output 2 decided at 10 (the oracle's kind: after its last use): not yet.
func TestDecidedCopiesAtTheirEdges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		decided   map[int]int // position -> call
		immediate []int       // sorted
		applied   []int       // sorted
	}{
		{"decided young, at this call, later, never", map[int]int{1: 4, 2: 9, 5: 9}, []int{-1, 2, 5}, []int{-1, 2, 5}},
		{"no replayed rewrite at this call", map[int]int{1: 4, 5: 10}, []int{-1}, nil},
		{"decided older: the copy waits for the same age", map[int]int{1: 7, 5: 9}, []int{5}, []int{5}},
		{"decided after this call", map[int]int{1: 10}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, sessions := growingSession()
			e := mustEval(t, outs, sessions, DefaultOptions())
			sd := e.sessions[0]
			ds := make([]PruneAt, len(outs))
			for j, s := range tc.decided {
				ds[j].Step = s
			}
			v := newView(e, sd)
			v.s, v.visible = 9, 8
			for j := range 4 {
				v.gone[j] = true
			}
			v.appends = []appendAt{
				{step: 5, tokens: 9100, orig: 1, n: 1},
				{step: 5, tokens: 9100, orig: 2, n: 1},
				{step: 5, tokens: 9100, orig: 3, n: 1},
				{step: 7, tokens: 9100, orig: 0, n: 1},
			}
			sorted := func(js []int) []int {
				js = slices.Clone(js)
				slices.Sort(js)
				return js
			}
			got := sorted((&immediateP{decide(e, sd, ds)}).stub(v))
			if d := cmp.Diff(tc.immediate, got); d != "" {
				t.Errorf("decision level at call 9 (-want +got):\n%s", d)
			}
			got = sorted((&appliedP{decide(e, sd, ds)}).stub(v))
			if d := cmp.Diff(tc.applied, got); d != "" {
				t.Errorf("replayed rewrites at call 9 (-want +got):\n%s", d)
			}
		})
	}
}

// A decided copy is a pending prune with its original's keep-probability and
// rule, its original's saving (savesOf), gone once a compaction drops it, and
// never an extra candidate as well. growingSession (output k: 9,000 tokens at
// 10,000 k + 1,000, a 100-token stub: 8,900 saved; position k-1), K 3 and a first
// recall window of 3 unless said, HardLimitLowWaterFraction 0 and
// LowWaterFraction 1 (the mark is the budget). Each rewrite is forced by the
// hard limit: pending prunes rule-dead first, then lowest keep, then the
// earliest, to the mark, then the extra candidates, then every pending prune
// after the first change (free riders). Worked by hand:
//
// At call 9, output 2 stubbed at 3 and recalled after call 5 (copy 0, before
// output 5, due from call 9), output 3 decided at 8 and pending, budget 85,000,
// hard limit 90,000: the context is 90,000 + 9,100 - 8,900 = 90,200; the copy
// lies at 51,000 - 8,900 = 42,100, output 3 at 31,000 - 8,900 = 22,100; one
// prune (81,300) reaches the mark.
//   - Output 2 decided at keep 0.1, output 3 at 0.3: the copy goes first and
//     alone (output 3 lies before it): 8,900 freed, suffix 90,200 - 42,100 -
//     8,900 = 39,200; output 3 stays pending.
//   - Output 2 at 0.5, output 3 at 0.3: output 3 goes first and the copy rides
//     along: 17,800 freed, suffix 90,200 - 22,100 - 17,800 = 50,300.
//   - Output 2 by a rule, output 3 at keep 0: the rule's copy first, alone, as
//     in the first case.
//
// At call 8, K 0 and a first window of 1: output 2 (keep 0.1) stubbed at 3,
// recalled after call 4 (copy 0, before output 4), pending from call 6, and
// output 6 (keep 0.3) decided at 7; a compaction before call 8 dropped outputs
// 1-4 and the copy, keeping the history from output 5 (at 51,000 - 8,900 +
// 9,100 = 51,200) under a 1,000-token summary: cut 50,200, context 80,000 +
// 9,100 - 8,900 - 50,200 = 30,000 over a hard limit of 25,000 (budget 20,000).
// The copy is no longer pending: output 6 (at 61,000 - 8,900 + 9,100 - 50,200 =
// 11,000) alone, 8,900 freed (21,100, still over the mark: nothing else to
// take), suffix 30,000 - 11,000 - 8,900 = 10,100.
//
// At call 9, a scorer's regime (extra candidates): outputs 1-4 stubbed (35,600),
// output 2 (keep 0.1) recalled after call 5 (copy 0, due, pending), hard limit
// 60,000, budget 50,000: the context is 90,000 + 9,100 - 35,600 = 63,500. The
// copy (at 51,000 - 35,600 = 15,400) goes first (54,600), then the extra
// candidates, never scored (keep 1), the earliest first: output 5 (at 51,000 -
// 35,600 + 9,100 = 24,500): 45,700, under the mark. 17,800 freed, suffix 63,500
// - 15,400 - 17,800 = 30,300.
func TestDecidedCopyPending(t *testing.T) {
	type rewrite struct {
		Apply, Extra  []int
		Reason        planner.Reason
		Frees, Suffix int
	}
	type state struct {
		call, visible   int
		stubbed, gone   []int
		cut             int
		copyAt          int // the copy's call
		copyGone, extra bool
		pending         []int
	}
	at9 := state{call: 9, visible: 8, stubbed: []int{1}, copyAt: 5, pending: []int{2}}
	for _, tc := range []struct {
		name        string
		st          state
		ds          map[int]PruneAt
		set         func(*Options)
		stubs       []int
		rewrite     rewrite
		pendingLeft []int
	}{
		{"the copy's keep is its original's", at9,
			map[int]PruneAt{1: {Step: 3, Keep: 0.1}, 2: {Step: 8, Keep: 0.3}}, nil,
			[]int{-1}, rewrite{[]int{0}, nil, planner.ReasonHardLimit, 8900, 39_200}, []int{2}},
		{"an earlier prune of a lower keep first", at9,
			map[int]PruneAt{1: {Step: 3, Keep: 0.5}, 2: {Step: 8, Keep: 0.3}}, nil,
			[]int{-1, 2}, rewrite{[]int{0, 1}, nil, planner.ReasonHardLimit, 17_800, 50_300}, []int{}},
		{"the copy of a rule's prune first", at9,
			map[int]PruneAt{1: {Step: 3, Rule: true}, 2: {Step: 8}}, nil,
			[]int{-1}, rewrite{[]int{0}, nil, planner.ReasonHardLimit, 8900, 39_200}, []int{2}},
		{"a copy a compaction dropped", state{call: 8, visible: 7, stubbed: []int{1}, gone: []int{0, 1, 2, 3}, cut: 50_200, copyAt: 4, copyGone: true, pending: []int{-1, 5}},
			map[int]PruneAt{1: {Step: 3, Keep: 0.1}, 5: {Step: 7, Keep: 0.3}},
			func(o *Options) {
				o.Budget, o.HardLimit, o.ProtectedSteps = 20_000, 25_000, 0
				o.RecallWindows = mustSchedule(t, "1")
			},
			[]int{5}, rewrite{[]int{0}, nil, planner.ReasonHardLimit, 8900, 10_100}, []int{}},
		{"pending, not an extra candidate", state{call: 9, visible: 8, stubbed: []int{0, 1, 2, 3}, copyAt: 5, extra: true},
			map[int]PruneAt{0: {Step: 2, Keep: 0.2}, 1: {Step: 3, Keep: 0.1}, 2: {Step: 4, Keep: 0.2}, 3: {Step: 5, Keep: 0.2}},
			func(o *Options) { o.Budget, o.HardLimit = 50_000, 60_000 },
			[]int{-1, 4}, rewrite{[]int{0}, []int{0}, planner.ReasonHardLimit, 17_800, 30_300}, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs, sessions := growingSession()
			opts := DefaultOptions()
			opts.Budget, opts.HardLimit, opts.HardLimitLowWaterFraction, opts.LowWaterFraction = 85_000, 90_000, 0, 1
			if tc.set != nil {
				tc.set(&opts)
			}
			var told []rewrite
			opts.OnRewrite = func(_ string, _ int, d planner.Rewrite) {
				told = append(told, rewrite{d.Apply, d.Extra, d.Reason, d.Frees, d.Suffix})
			}
			e := mustEval(t, outs, sessions, opts)
			sd := e.sessions[0]
			ds := make([]PruneAt, len(outs))
			for j, d := range tc.ds {
				ds[j] = d
			}
			st := tc.st
			v := newView(e, sd)
			v.s, v.visible, v.cut = st.call, st.visible, st.cut
			for _, j := range st.stubbed {
				v.stubbed[j] = true
				v.fen.add(j, 8900)
				v.saved += 8900
			}
			for _, j := range st.gone {
				v.gone[j] = true
			}
			v.appends = []appendAt{{step: st.copyAt, tokens: 9100, orig: 1, n: 1, gone: st.copyGone}}
			v.added = 9100
			v.ctx = sd.context[st.call-1] + v.added - v.saved - v.cut
			p := e.regime(sd, ds).(*regimeP)
			p.extra, p.pending = st.extra, slices.Clone(st.pending)
			if d := cmp.Diff(tc.stubs, p.stub(v)); d != "" {
				t.Errorf("stubs at call %d (-want +got):\n%s", st.call, d)
			}
			if d := cmp.Diff([]rewrite{tc.rewrite}, told); d != "" {
				t.Errorf("rewrite told to OnRewrite (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.pendingLeft, p.pending); d != "" {
				t.Errorf("pending after the rewrite (-want +got):\n%s", d)
			}
		})
	}
}
