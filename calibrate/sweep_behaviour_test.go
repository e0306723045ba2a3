package calibrate

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The cutoff grows with the output up to the size cap: at cutoff 0.1 and exponent
// 0.5 a 16,000-token output scored 0.3 is pruned without a cap (0.1 x (16000 /
// 1000)^0.5 = 0.4 > 0.3) and kept with a cap of 4,000 tokens (0.1 x 2 = 0.2); a
// 250-token one scored 0.04 is pruned under 0.05 either way (the cap is above it);
// calibrate's Scorer applies Options.SizeCapTokens the same way.
func TestScorerPrunesUnderTheSizeCap(t *testing.T) {
	outs := []Output{
		{Session: "s", Key: "big", Tokens: 16000, Step: 1, CandidateFrom: 2, EndStep: 10, Asks: []Ask{{Step: 3, Keep: 0.3, OK: true}}},
		{Session: "s", Key: "small", Tokens: 250, Step: 1, CandidateFrom: 2, EndStep: 10, Asks: []Ask{{Step: 4, Keep: 0.04, OK: true}}},
	}
	for _, tt := range []struct {
		capTokens int
		want      []PruneAt
	}{
		{0, []PruneAt{{Step: 3, Keep: 0.3}, {Step: 4, Keep: 0.04}}},
		{4000, []PruneAt{{}, {Step: 4, Keep: 0.04}}},
	} {
		if d := cmp.Diff(tt.want, ScorerPrunes(outs, 0.1, 0.5, tt.capTokens)); d != "" {
			t.Errorf("cap %d (-want +got):\n%s", tt.capTokens, d)
		}
		opts := DefaultOptions()
		opts.SizeExponent, opts.SizeCapTokens = 0.5, tt.capTokens
		e, err := NewEvaluator(outs, []Calls{{Name: "s", Context: make([]int, 10)}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		pruned := 0
		for _, p := range tt.want {
			if p.Step > 0 {
				pruned++
			}
		}
		if r := e.Scorer("x", 0.1); r.Pruned != pruned {
			t.Errorf("cap %d: Evaluator.Scorer pruned %d; want %d", tt.capTokens, r.Pruned, pruned)
		}
	}
}

// A scorer prunes an output at its first OK ask whose keep-probability is under
// the cutoff (strictly: a score equal to the cutoff keeps it), or at its rule-dead
// step when that comes first; at the same step the rule decides, as the live
// advisor marks an output that is both (advisor's pruneReason: the rule first),
// so that a forced rewrite takes it among the rule-dead ones. An output the rules
// never kill and no score prunes has no decision at all. Cutoff 0.25, exponent 0
// (the cutoff itself for every size).
func TestScorerPrunesAtTheFirstAskUnderTheCutoff(t *testing.T) {
	out := func(key string, ruleDead int, asks ...Ask) Output {
		return Output{Session: "s", Key: key, Tokens: 1000, Step: 1, CandidateFrom: 2, RuleDeadAt: ruleDead, EndStep: 10, Asks: asks}
	}
	tests := []struct {
		name string
		o    Output
		want PruneAt
	}{
		// 0.25 is not under 0.25; the ask at 4 (0.2) is.
		{"score equal to the cutoff keeps", out("eq", 0, Ask{Step: 2, Keep: 0.25, OK: true}, Ask{Step: 4, Keep: 0.2, OK: true}), PruneAt{Step: 4, Keep: 0.2}},
		{"rule-dead at the step of a low score", out("same", 3, Ask{Step: 3, Keep: 0.1, OK: true}), PruneAt{Step: 3, Rule: true}},
		{"a low score before the rule", out("ask", 6, Ask{Step: 3, Keep: 0.1, OK: true}), PruneAt{Step: 3, Keep: 0.1}},
		{"the rule before a low score", out("rule", 3, Ask{Step: 5, Keep: 0.1, OK: true}), PruneAt{Step: 3, Rule: true}},
		{"a failed ask prunes nothing", out("failed", 0, Ask{Step: 2, OK: false}), PruneAt{}},
		{"never dead, never low", out("never", 0, Ask{Step: 2, Keep: 0.9, OK: true}), PruneAt{}},
	}
	var outs []Output
	var want []PruneAt
	for _, tt := range tests {
		outs = append(outs, tt.o)
		want = append(want, tt.want)
	}
	got := ScorerPrunes(outs, 0.25, 0, 0)
	for i, tt := range tests {
		if d := cmp.Diff(tt.want, got[i]); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}
	// The rules-only baseline: a decision only where the rules kill an output.
	wantRules := []PruneAt{{}, {Step: 3, Rule: true}, {Step: 6, Rule: true}, {Step: 3, Rule: true}, {}, {}}
	if d := cmp.Diff(wantRules, RulePrunes(outs)); d != "" {
		t.Errorf("RulePrunes (-want +got):\n%s", d)
	}
}

// Recency masking orders a session's outputs by step, ties in the order given
// (two results of one call), and prunes an output when the n-th output after it
// becomes visible, at its step + 1 (or at its CandidateFrom when later), up to and
// including the session's last step. Worked by hand, end step 6:
//
//	A and B from call 2 (A listed first), C from 3, D from 5; candidates a step
//	after they are produced.
//	n = 1: A out when B is visible, at 3; B when C is, at 4; C when D is, at 6
//	       (the last step: still pruned); D is the newest.
//	n = 2: A out when C is visible, at 4; B when D is, at 6.
func TestRecencyKeepsInputOrderAndTheLastStep(t *testing.T) {
	outs := []Output{
		{Session: "s", Key: "A", Tokens: 10, Step: 2, CandidateFrom: 3, EndStep: 6},
		{Session: "s", Key: "B", Tokens: 10, Step: 2, CandidateFrom: 3, EndStep: 6},
		{Session: "s", Key: "C", Tokens: 10, Step: 3, CandidateFrom: 4, EndStep: 6},
		{Session: "s", Key: "D", Tokens: 10, Step: 5, CandidateFrom: 6, EndStep: 6},
	}
	for _, tt := range []struct {
		n    int
		want []int
	}{
		{1, []int{3, 4, 6, 0}},
		{2, []int{4, 6, 0, 0}},
	} {
		if d := cmp.Diff(tt.want, stepsOf(RecencyPrunes(outs, tt.n))); d != "" {
			t.Errorf("recency-%d (-want +got):\n%s", tt.n, d)
		}
	}
}

// The baselines have no cutoff: each carries -1, which the report prints as "-".
func TestBaselinesCarryNoCutoff(t *testing.T) {
	outs, sessions := handOutputs()
	e := mustEval(t, outs, sessions, DefaultOptions())
	type row struct {
		Name   string
		Cutoff float64
	}
	var got []row
	for _, r := range e.Baselines([]int{2}) {
		got = append(got, row{r.Name, r.Cutoff})
	}
	want := []row{{"keep-all", -1}, {"rules", -1}, {"recency-2", -1}, {"oracle", -1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("baselines (-want +got):\n%s", d)
	}
}

// RecommendBy recommends the cutoff with the highest objective among those within
// the miss-rate target, the lower cutoff on a tie, whatever order the sweep is in
// (the first entry qualifying is not preferred for being first); on a tie of
// both objective and cutoff the first entry stays, so later duplicates do not
// change the recommendation.
func TestRecommendByIgnoresSweepOrder(t *testing.T) {
	res := func(c, miss, net float64, ts int64) Result {
		return Result{Cutoff: c, MissRate: miss, TokenSteps: ts, Applied: Level{NetUSD: net}}
	}
	tests := []struct {
		name  string
		sweep []Result
		want  Result
	}{
		{"the first qualifying is the best", []Result{res(0.1, 0, 5, 500), res(0.2, 0, 3, 300)}, res(0.1, 0, 5, 500)},
		{"descending cutoffs, equal net: the lower", []Result{res(0.4, 0, 4.9, 490), res(0.3, 0, 4.9, 480)}, res(0.3, 0, 4.9, 480)},
		{"descending cutoffs, the higher net first", []Result{res(0.4, 0, 5, 500), res(0.3, 0, 2, 200)}, res(0.4, 0, 5, 500)},
		{"same cutoff and net: the first", []Result{res(0.3, 0, 4.9, 490), res(0.3, 0, 4.9, 480)}, res(0.3, 0, 4.9, 490)},
	}
	for _, tt := range tests {
		rec, err := RecommendBy(tt.sweep, 0, ObjectiveNet)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if d := cmp.Diff(tt.want, rec.Result); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}
}

// The recommendation's reason counts the cutoffs within the target, a miss rate
// equal to the target included: of miss rates 0, 0.25 and 0.5 under a 0.25 target,
// 2. None qualifying is cutoff -1; an empty sweep names no lowest miss rate.
func TestRecommendByReason(t *testing.T) {
	sweep := []Result{
		{Cutoff: 0.1, MissRate: 0, PruneRate: 0.2, TokenSteps: 1000, Applied: Level{NetUSD: 1}},
		{Cutoff: 0.2, MissRate: 0.25, PruneRate: 0.4, TokenSteps: 3000, Applied: Level{NetUSD: 2.5}},
		{Cutoff: 0.3, MissRate: 0.5, PruneRate: 0.6, TokenSteps: 5000, Applied: Level{NetUSD: 4}},
	}
	rec, err := RecommendBy(sweep, 0.25, ObjectiveNet)
	if err != nil {
		t.Fatal(err)
	}
	want := Recommendation{Cutoff: 0.2, TargetMiss: 0.25, Objective: ObjectiveNet, Result: sweep[1],
		Reason: "highest net among 2 cutoffs with miss rate <= 0.250: net $2.5000, 3000 token-steps, miss rate 0.250, prune rate 0.400"}
	if d := cmp.Diff(want, rec); d != "" {
		t.Errorf("recommendation (-want +got):\n%s", d)
	}
	for _, tt := range []struct {
		name  string
		sweep []Result
		want  Recommendation
	}{
		{"none within the target", sweep[1:], Recommendation{None: true, Cutoff: -1, TargetMiss: 0.1,
			Reason: "no cutoff of 2 has miss rate <= 0.100 (lowest 0.250)"}},
		{"empty sweep", nil, Recommendation{None: true, Cutoff: -1, TargetMiss: 0.1,
			Reason: "no cutoff of 0 has miss rate <= 0.100"}},
	} {
		rec, err := RecommendBy(tt.sweep, 0.1, ObjectiveNet)
		if !errors.Is(err, ErrNoCutoff) {
			t.Errorf("%s: error %v, want ErrNoCutoff", tt.name, err)
		}
		if d := cmp.Diff(tt.want, rec); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}
}

// frontSession: one session of 11 calls and outputs of 100 tokens from call 1
// (1,000 token-steps each from call 2 to 11). X is asked at 2 (0.3) and 7 (0.1);
// Y, used at 5, is asked at 2 (0.3); Z is asked at 2 (0.0005).
func frontSession(keys ...string) ([]Output, []Calls) {
	all := map[string]Output{
		"X": {Asks: []Ask{{Step: 2, Keep: 0.3, OK: true}, {Step: 7, Keep: 0.1, OK: true}}},
		"Y": {Uses: []int{5}, Asks: []Ask{{Step: 2, Keep: 0.3, OK: true}}},
		"Z": {Asks: []Ask{{Step: 2, Keep: 0.0005, OK: true}}},
	}
	var outs []Output
	for _, k := range keys {
		o := all[k]
		o.Session, o.Key, o.Tokens, o.Step, o.CandidateFrom, o.EndStep, o.Offset = "f", k, 100, 1, 2, 11, 1000
		outs = append(outs, o)
	}
	return outs, []Calls{{Name: "f", Context: ctx(11, 2000)}}
}

func cutoffsOf(rs []Result) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, r.Cutoff)
	}
	return out
}

// Front adds a cutoff between neighbours only when their miss rates, or their
// token-steps as a share of all token-steps, are MORE than the gap apart, while
// they are at least 0.001 apart, and adds at most max cutoffs. Worked by hand:
//
//   - X alone, cutoffs 0.2 and 0.5: at 0.2 X is pruned at 7 (100 x 5 = 500
//     token-steps), at 0.5 at 2 (100 x 10 = 1,000): 500 apart, exactly half of
//     the 1,000 in all; miss rates both 0. Gap 0.5: not refined. Gap 0.49: refined
//     down to where X's decision changes, at a score of 0.3 (pruned at 2 over 0.3,
//     at 7 at 0.3 and under), the last two cutoffs less than 0.001 apart.
//   - X and Y, cutoffs 0.2 and 0.5: at 0.2 X alone (500 token-steps, no miss); at
//     0.5 both at 2, Y missing at 5: miss rate 0.5, 1,000 + 300 token-steps; 800
//     apart of 2,000 (0.4 of them). Gap 0.5: not refined.
//   - Z, cutoffs 0 and 0.001: Z is pruned at 0.001 (0.0005 under it), not at 0;
//     0.001 apart: refined once, at 0.0005 (not under 0.0005: kept), after which
//     the neighbours are under 0.001 apart. Cutoffs 0 and 0.0009: not refined.
//   - the hand session (TestEvaluateHand), cutoffs 0 and 0.5 (miss rates 0 and
//     1/3): with max 1, one cutoff, 0.25; with max 0, none.
//   - X, Y and Z, cutoffs 0.05, 0.2 and 0.5, gap 0.01, max 1: at 0.05 Z alone
//     (1,000 token-steps of 3,000), at 0.2 also X at 7 (1,500), at 0.5 X and Y at 2,
//     Y missing at 5 (2,300, miss rate 1/3). The first step is 0.167 of the
//     token-steps (16.7 gaps), the second 1/3 of miss rate (33.3 gaps): the one
//     cutoff goes into the second, at 0.35, though the first is past the gap too.
func TestFrontRefinesOnlyPastTheGap(t *testing.T) {
	type tc struct {
		name    string
		keys    []string
		cutoffs []float64
		gap     float64
		max     int
		want    []float64
	}
	for _, tt := range []tc{
		{"token-steps exactly the gap apart", []string{"X"}, []float64{0.2, 0.5}, 0.5, 48, []float64{0.2, 0.5}},
		{"miss rates exactly the gap apart", []string{"X", "Y"}, []float64{0.2, 0.5}, 0.5, 48, []float64{0.2, 0.5}},
		{"exactly 0.001 apart", []string{"Z"}, []float64{0, 0.001}, 0.01, 48, []float64{0, 0.0005, 0.001}},
		{"under 0.001 apart", []string{"Z"}, []float64{0, 0.0009}, 0.01, 48, []float64{0, 0.0009}},
		{"widest gap first", []string{"X", "Y", "Z"}, []float64{0.05, 0.2, 0.5}, 0.01, 1, []float64{0.05, 0.2, 0.35, 0.5}},
	} {
		outs, sessions := frontSession(tt.keys...)
		e := mustEval(t, outs, sessions, DefaultOptions())
		got := cutoffsOf(e.Front("x", e.Sweep("x", tt.cutoffs), tt.gap, tt.max))
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%s: front cutoffs (-want +got):\n%s", tt.name, d)
		}
	}

	outs, sessions := frontSession("X")
	e := mustEval(t, outs, sessions, DefaultOptions())
	front := e.Front("x", e.Sweep("x", []float64{0.2, 0.5}), 0.49, 48)
	var lo, hi float64
	for k := 0; k+1 < len(front); k++ {
		if front[k].TokenSteps == 500 && front[k+1].TokenSteps == 1000 {
			lo, hi = front[k].Cutoff, front[k+1].Cutoff
		}
	}
	if !(lo <= 0.3 && 0.3 < hi && hi-lo < 0.001) {
		t.Errorf("gap 0.49: X's change found between %v and %v; want around 0.3, under 0.001 apart (front %v)", lo, hi, cutoffsOf(front))
	}

	outs, sessions = handOutputs()
	e = mustEval(t, outs, sessions, DefaultOptions())
	sweep := e.Sweep("x", []float64{0, 0.5})
	for _, tt := range []struct {
		max  int
		want []float64
	}{
		{1, []float64{0, 0.25, 0.5}},
		{0, []float64{0, 0.5}},
	} {
		if d := cmp.Diff(tt.want, cutoffsOf(e.Front("x", sweep, FrontGap, tt.max))); d != "" {
			t.Errorf("max %d: front cutoffs (-want +got):\n%s", tt.max, d)
		}
	}
}
