package calibrate

import (
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func ctx(n, tokens int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = tokens
	}
	return c
}

func mustEval(t *testing.T, outs []Output, sessions []Calls, opts Options) *Evaluator {
	t.Helper()
	e, err := NewEvaluator(outs, sessions, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// handOutputs is the session worked by hand in TestEvaluateHand: 10 steps, context
// 50,000 tokens at every call, priced as Anthropic's (read $0.30, write $3.75 per
// Mtok), no timestamps (the cache is warm throughout).
func handOutputs() ([]Output, []Calls) {
	outs := []Output{
		{Session: "s", Key: "A", Tokens: 3000, StubTokens: 40, Offset: 1000, Step: 1, CandidateFrom: 4, EndStep: 10, Uses: []int{6},
			Asks: []Ask{{Step: 4, Keep: 0.1, OK: true}, {Step: 7, Keep: 0.05, OK: true}}},
		{Session: "s", Key: "B", Tokens: 4000, StubTokens: 40, Offset: 5000, Step: 2, CandidateFrom: 5, EndStep: 10,
			Asks: []Ask{{Step: 5, Keep: 0.2, OK: true}}},
		{Session: "s", Key: "C", Tokens: 1000, StubTokens: 40, Offset: 10000, Step: 3, CandidateFrom: 6, RuleDeadAt: 7, EndStep: 10, Uses: []int{5},
			Asks: []Ask{{Step: 6, Keep: 0.6, OK: true}}},
	}
	return outs, []Calls{{Name: "s", Context: ctx(10, 50_000), Provider: "anthropic"}}
}

// TestEvaluateHand checks every figure of one scorer run against a hand computation
// (read r = $0.30/M, write w = $3.75/M).
//
// Cutoff 0.25. Decisions: A at its first low ask, step 4 (0.1); B at 5 (0.2); C
// scores 0.6 but is rule-dead at 7. Flat figures: A used at 6 >= 4, a miss: 3000 x
// (6-4) = 6,000 token-steps; B never used: 4000 x (11-5) = 24,000; C's use at 5 is
// before 7: 1000 x (11-7) = 4,000. Total 34,000; 1 miss of 3. All token-steps:
// 3000x9 + 4000x8 + 1000x7 = 66,000.
//
// Keep-all: call 1 writes 50,000 (0.1875), calls 2-10 read 50,000 (0.015 each):
// $0.3225.
//
// Decision level (each decision applied at its step; stubs save 2,960, 3,960, 960):
//
//	calls 1-3: 0.1875 + 2 x 0.015                               = 0.2175
//	call 4, A stubbed from offset 1,000: 47,040 sent, 1,000 read = 0.17295
//	call 5, B from offset 5,000-2,960 = 2,040: 43,080 sent       = 0.154512
//	call 6 reads 43,080 (0.012924); A is used: a round trip reads
//	  43,080 and writes 3,000 + 100 (0.024549); they stay       = 0.037473
//	call 7, C from 10,000-6,920 = 3,080: 53,100-7,880 = 45,220   = 0.158949
//	calls 8-9 read 45,220 (0.013566 each)                       = 0.027132
//	call 10: A's copy, past K (3) and its first recall window (3),
//	  is stubbed as A was, at the age A was decided at (3: from
//	  call 9 on); it lies after every output, at 50,000
//	  (call 6's raw context) - 7,880 = 42,120: 42,260 sent, 42,120
//	  read and 140 written                                       = 0.013161
//
// total $0.781677, net -0.459177; 4 rewrites, 1 miss (the copy's stub misses
// nothing: A has no use after 10), peak 50,000; token-steps 2,960 + 6,920 +
// 6,920 + 4,780 x 3 + 7,740 = 38,880.
//
// Applied level: under the budget (100,000) with a warm cache nothing pays: the
// best start at step 5 frees 6,920 against a suffix of 42,080 (cost 0.145, saving
// 6,920 x r x 3 = 0.0062); nothing is applied: keep-all's figures, net 0.
func TestEvaluateHand(t *testing.T) {
	outs, sessions := handOutputs()
	e := mustEval(t, outs, sessions, DefaultOptions())
	got := e.Scorer("x", 0.25)
	want := Result{
		Name: "scorer:x", Cutoff: 0.25, Outputs: 3, Pruned: 3, Misses: 1, PruneRate: 1, MissRate: 1.0 / 3,
		// The 40-token stubs: A's for 2 calls until its miss, B's 6, C's 4.
		TokenSteps: 34_000, TotalTokenSteps: 66_000, StubTokenSteps: 40*2 + 40*6 + 40*4,
		Decision: Level{NetUSD: 0.3225 - 0.781677, PaidUSD: 0.781677, PeakContext: 50_000, Rewrites: 4, SessionsCostlier: 1, Misses: 1, TokenSteps: 38_880},
		Applied:  Level{NetUSD: 0, PaidUSD: 0.3225, PeakContext: 50_000},
	}
	if d := cmp.Diff(want, got, cmp.Comparer(approx)); d != "" {
		t.Errorf("result (-want +got):\n%s", d)
	}
	if got, want := ScorerPrunes(outs, 0.25, 0, 0), []PruneAt{{Step: 4, Keep: 0.1}, {Step: 5, Keep: 0.2}, {Step: 7, Rule: true}}; !cmp.Equal(got, want) {
		t.Errorf("decisions %v, want %v", got, want)
	}
	if k := e.KeepAllUSD(); !approx(k, 0.3225) {
		t.Errorf("keep-all pays %v, want 0.3225", k)
	}
}

// TestOverBudgetHand is the same session at a 45,000-token budget (low water
// 36,000, least rewrite 2,250), rewrites forced by the budget whatever they cost
// (price_forced off): every call of keep-all is over it. The applied
// level: at 4 the planner takes A (2,960 >= 2,250) and at 5 B, as the decision
// level does (same prices: 0.17295, 0.154512); A's miss at 6 is the same (0.037473);
// at 7 C would free 960 < 2,250 and 46,180 - 960 > 36,000: it waits, and calls 7-9
// read 46,180 (0.013854 each). At 10 A's copy (past K and its first recall window)
// is pending as A was: C and the copy free 3,920 >= 2,250, rule-dead first: from
// C's offset 3,080, 42,260 sent, 39,180 written (0.147849). Total 0.2175 +
// 0.17295 + 0.154512 + 0.037473 + 0.041562 + 0.147849 = 0.771846, net -0.449346;
// over budget at calls 1-4 and 7-9: 7 (keep-all 10); token-steps 2,960 + 6,920 x
// 2 + 3,820 x 3 + 7,740 = 36,000. The decision level stubs the copy at 10 as well:
// 7 calls over budget, 4 rewrites.
func TestOverBudgetHand(t *testing.T) {
	outs, sessions := handOutputs()
	opts := DefaultOptions()
	opts.Budget = 45_000
	opts.PriceForced = false // docs/DESIGN.md step 6b: the budget forces these rewrites
	e := mustEval(t, outs, sessions, opts)
	got := e.Scorer("x", 0.25)
	want := Level{NetUSD: 0.3225 - 0.771846, PaidUSD: 0.771846, StepsOverBudget: 7, PeakContext: 50_000, Rewrites: 3, SessionsCostlier: 1, Misses: 1, TokenSteps: 36_000}
	if d := cmp.Diff(want, got.Applied, cmp.Comparer(approx)); d != "" {
		t.Errorf("applied (-want +got):\n%s", d)
	}
	if got.Decision.StepsOverBudget != 7 || got.Decision.Rewrites != 4 {
		t.Errorf("decision level: %d steps over budget, %d rewrites; want 7, 4", got.Decision.StepsOverBudget, got.Decision.Rewrites)
	}
	if k := e.KeepAll(); k.Applied.StepsOverBudget != 10 || k.Applied.NetUSD != 0 || k.Applied.Rewrites != 0 {
		t.Errorf("keep-all: %+v; want 10 steps over budget, net 0, no rewrite", k.Applied)
	}
	// With price_forced (the default), the rewrite at 4 would cost 46,040 x (w - r)
	// = $0.159 and save 2,960 x r x 3 = $0.0027: it waits, as every later one does;
	// the applied level is keep-all's.
	opts.PriceForced = true
	got = mustEval(t, outs, sessions, opts).Scorer("x", 0.25)
	if got.Applied.Rewrites != 0 || got.Applied.NetUSD != 0 || got.Applied.StepsOverBudget != 10 {
		t.Errorf("price-forced applied level: %+v; want keep-all's", got.Applied)
	}
}

// A six-minute pause before call 6 makes the cache cold there: keep-all writes the
// whole 50,000 again (0.1875 instead of 0.015), and the planner applies the pending
// prunes A and B for free at that call: cold, every token is written anyway.
func TestColdCacheHand(t *testing.T) {
	outs, sessions := handOutputs()
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := make([]time.Time, 10)
	for i := range at {
		at[i] = t0.Add(time.Duration(i) * 30 * time.Second)
		if i >= 5 {
			at[i] = at[i].Add(6 * time.Minute)
		}
	}
	sessions[0].At = at
	e := mustEval(t, outs, sessions, DefaultOptions())
	if k := e.KeepAllUSD(); !approx(k, 0.1875*2+8*0.015) {
		t.Fatalf("keep-all with one cold call pays %v, want %v", k, 0.1875*2+8*0.015)
	}
	got := e.Scorer("x", 0.25).Applied
	// Call 6 cold: A and B stubbed (43,080 written: 0.16155); A is used at 6 (0.024549,
	// then its copy's 3,100 stay); C waits (rule, under budget, warm): calls 7-9 read
	// 46,180. At 10 A's copy is pending as A was (past K and its first recall window);
	// it lies last, at 50,000 - 6,920 = 43,080, and its stub alone pays (140 written
	// against 2,960 saved at each of the 3 steps the planner expects at least): 43,080
	// read, 140 written. Calls 1-5 as keep-all: 0.1875 + 4 x 0.015.
	paid := 0.1875 + 4*0.015 + 43_080*3.75e-6 + 0.024549 + 3*46_180*0.3e-6 + 43_080*0.3e-6 + 140*3.75e-6
	if got.Rewrites != 2 || !approx(got.PaidUSD, paid) || got.Misses != 1 {
		t.Errorf("cold rewrite: %+v; want 2 rewrites, paid %v, 1 miss", got, paid)
	}
	if untimed, cold := e.Timing(); untimed != 0 || cold != 1 {
		t.Errorf("Timing() = %d untimed, %d cold; want 0 and 1 (call 6 after 6.5 minutes)", untimed, cold)
	}
	sessions[0].At = nil
	if untimed, cold := mustEval(t, outs, sessions, DefaultOptions()).Timing(); untimed != 1 || cold != 0 {
		t.Errorf("without times: Timing() = %d untimed, %d cold; want 1 and 0", untimed, cold)
	}
}

func approx(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// TestHardLimit: a pending prune too small for a forced rewrite is applied at once
// when the context exceeds the hard limit.
func TestHardLimit(t *testing.T) {
	// The hard limit forces its rewrite whatever it costs, price_forced or not.
	outs := []Output{{Session: "s", Key: "A", Tokens: 100, StubTokens: 10, Offset: 10, Step: 1, CandidateFrom: 2, EndStep: 5,
		Asks: []Ask{{Step: 2, Keep: 0, OK: true}}}}
	c := []int{1000, 1000, 190_000, 190_000, 190_000}
	e := mustEval(t, outs, []Calls{{Name: "s", Context: c}}, DefaultOptions())
	r := e.Scorer("x", 0.5)
	// Decided at 2 (1,000 tokens, nothing pays: wait); at 3 the context is 190,000 >
	// 180,000: applied. Token-steps 90 x 3 = 270.
	if r.Applied.Rewrites != 1 || r.Applied.TokenSteps != 270 || r.TokenSteps != 400 {
		t.Errorf("got %+v, decision-level token-steps %d; want 1 rewrite, 270 applied token-steps, 400", r.Applied, r.TokenSteps)
	}
}

func TestKeepAll(t *testing.T) {
	outs, sessions := handOutputs()
	r := mustEval(t, outs, sessions, DefaultOptions()).KeepAll()
	lvl := Level{PaidUSD: 0.3225, PeakContext: 50_000}
	want := Result{Name: "keep-all", Cutoff: -1, Outputs: 3, TotalTokenSteps: 66_000, Decision: lvl, Applied: lvl}
	if d := cmp.Diff(want, r, cmp.Comparer(approx)); d != "" {
		t.Errorf("keep-all (-want +got):\n%s", d)
	}
}

// TestBaselinesHand checks rules, recency and oracle decisions on a hand-made
// session of four outputs at steps 1-4, each a candidate from the next step
// (except D, candidate from 9), end step 10.
func TestBaselinesHand(t *testing.T) {
	outs := []Output{
		{Session: "s", Key: "A", Tokens: 10, Step: 1, CandidateFrom: 2, EndStep: 10, Uses: []int{3, 7}},
		{Session: "s", Key: "B", Tokens: 10, Step: 2, CandidateFrom: 6, RuleDeadAt: 4, EndStep: 10},
		{Session: "s", Key: "C", Tokens: 10, Step: 3, CandidateFrom: 4, EndStep: 10, Uses: []int{10}},
		{Session: "s", Key: "D", Tokens: 10, Step: 4, EndStep: 10},
	}
	tests := []struct {
		name string
		got  []PruneAt
		want []int
	}{
		// Rules: only B is rule-dead, at 4.
		{"rules", RulePrunes(outs), []int{0, 4, 0, 0}},
		// Recency 2: A falls out when C (step 3) becomes visible at 4; B when D is
		// visible at 5, but B is a candidate only from 6; C and D stay.
		{"recency-2", RecencyPrunes(outs, 2), []int{4, 6, 0, 0}},
		// Recency 1: A at 3, B at 4 -> candidate from 6, C at 5, D never a candidate.
		{"recency-1", RecencyPrunes(outs, 1), []int{3, 6, 5, 0}},
		// Oracle: A after its last use 7 -> 8; B never used, eligible from 4
		// (rule-dead before it is a candidate); C used at 10 = EndStep: never; D never
		// eligible.
		{"oracle", OraclePrunes(outs), []int{8, 4, 0, 0}},
	}
	for _, tt := range tests {
		if got := stepsOf(tt.got); !cmp.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func stepsOf(ds []PruneAt) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = d.Step
	}
	return out
}

// TestRecommendHand: among the cutoffs whose miss rate is within the target, the
// highest objective wins, the lower cutoff on a tie; none qualifying is an explicit
// none naming the lowest miss rate.
func TestRecommendHand(t *testing.T) {
	res := func(c, miss, net float64, ts int64) Result {
		return Result{Cutoff: c, MissRate: miss, TokenSteps: ts, Applied: Level{NetUSD: net}}
	}
	sweep := []Result{res(0.1, 0, 1.7, 1700), res(0.3, 0, 4.9, 4900), res(0.4, 0, 4.9, 4900), res(0.5, 1.0/3, 4.8, 6100), res(0.7, 0.5, 3.8, 6500)}
	tests := []struct {
		target float64
		ob     Objective
		sweep  []Result
		want   float64 // cutoff; -1 = none
	}{
		{0.34, ObjectiveNet, sweep, 0.3},
		{0.34, ObjectiveTokenSteps, sweep, 0.5},
		{0, ObjectiveNet, sweep, 0.3},
		{1, ObjectiveNet, sweep, 0.3},
		{1, ObjectiveTokenSteps, sweep, 0.7},
		{0.2, ObjectiveNet, sweep[3:], -1},
	}
	for _, tt := range tests {
		rec, err := RecommendBy(tt.sweep, tt.target, tt.ob)
		if tt.want < 0 {
			if !errors.Is(err, ErrNoCutoff) || !rec.None || !strings.Contains(rec.Reason, "lowest 0.333") {
				t.Errorf("target %v: got %+v, %v; want none with ErrNoCutoff and the lowest miss rate", tt.target, rec, err)
			}
			continue
		}
		if err != nil || rec.None || rec.Cutoff != tt.want {
			t.Errorf("target %v %s: got cutoff %v (none %v, err %v), want %v", tt.target, tt.ob, rec.Cutoff, rec.None, err, tt.want)
		}
	}
	if _, err := RecommendBy(sweep, 1.5, ObjectiveNet); !errors.Is(err, ErrInvalid) {
		t.Errorf("target 1.5: err %v, want ErrInvalid", err)
	}
}

// TestReliabilityHand: asks labelled "used at or after the ask step".
//
//	X (used at 5): ask 3 keep 0.15 -> used (5 >= 3); ask 6 keep 0.05 -> not used.
//	Y (never used): ask 4 keep 0.95 -> not used; ask 5 failed -> left out.
//	Z (used at 9): ask 9 keep 1.0 -> used (a use at the ask step counts).
//
// Bins of 0.1: 0.05 -> bin 0, 0.15 -> bin 1, 0.95 and 1.0 -> bin 9.
// Brier ((0.85)² + 0.05² + 0.95² + 0²)/4 = 0.406875 (python3).
// AUC positives {0.15, 1.0} vs negatives {0.05, 0.95}: 3 of 4 pairs -> 0.75.
func TestReliabilityHand(t *testing.T) {
	outs := []Output{
		{Session: "s", Key: "X", Step: 1, CandidateFrom: 2, EndStep: 10, Uses: []int{5},
			Asks: []Ask{{Step: 3, Keep: 0.15, OK: true}, {Step: 6, Keep: 0.05, OK: true}}},
		{Session: "s", Key: "Y", Step: 1, CandidateFrom: 2, EndStep: 10,
			Asks: []Ask{{Step: 4, Keep: 0.95, OK: true}, {Step: 5}}},
		{Session: "s", Key: "Z", Step: 1, CandidateFrom: 2, EndStep: 10, Uses: []int{9},
			Asks: []Ask{{Step: 9, Keep: 1, OK: true}}},
	}
	r := ReliabilityOf(outs, 10)
	if r.N != 4 || r.Used != 2 || r.Failed != 1 || !approx(r.Brier, 0.406875) || !approx(r.AUC, 0.75) {
		t.Errorf("got n %d used %d failed %d brier %v auc %v; want 4 2 1 0.406875 0.75", r.N, r.Used, r.Failed, r.Brier, r.AUC)
	}
	type row struct{ N, Used int }
	var got []row
	for _, b := range r.Bins {
		got = append(got, row{b.N, b.Used})
	}
	want := []row{{1, 0}, {1, 1}, {}, {}, {}, {}, {}, {}, {}, {2, 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("bins (-want +got):\n%s", d)
	}
	if b := r.Bins[9]; !approx(b.Rate, 0.5) || !approx(b.MeanScore, 0.975) {
		t.Errorf("bin 9 rate %v mean %v, want 0.5 0.975", b.Rate, b.MeanScore)
	}
}

func TestValidate(t *testing.T) {
	good := Output{Session: "s", Key: "k", Tokens: 5, Step: 2, CandidateFrom: 4, EndStep: 9, RuleDeadAt: 5,
		Asks: []Ask{{Step: 4, Keep: 0.5, OK: true}}, Uses: []int{3, 8}}
	if err := good.Validate(); err != nil {
		t.Fatalf("good record: %v", err)
	}
	tests := []struct {
		name  string
		edit  func(o *Output)
		field string
	}{
		{"no session", func(o *Output) { o.Session = "" }, "Session"},
		{"negative tokens", func(o *Output) { o.Tokens = -1 }, "Tokens"},
		{"end before step", func(o *Output) { o.EndStep = 1 }, "EndStep"},
		{"candidate at own step", func(o *Output) { o.CandidateFrom = 2 }, "CandidateFrom"},
		{"rule past end", func(o *Output) { o.RuleDeadAt = 10 }, "RuleDeadAt"},
		{"ask before candidate", func(o *Output) { o.Asks[0].Step = 3 }, "Asks[0].Step"},
		{"ask never candidate", func(o *Output) { o.CandidateFrom = 0 }, "Asks[0]"},
		{"keep out of range", func(o *Output) { o.Asks[0].Keep = 1.5 }, "Asks[0].Keep"},
		{"keep NaN", func(o *Output) { o.Asks[0].Keep = math.NaN() }, "Asks[0].Keep"},
		{"use at own step", func(o *Output) { o.Uses[0] = 2 }, "Uses[0]"},
		{"uses unsorted", func(o *Output) { o.Uses = []int{8, 3} }, "Uses[1]"},
	}
	for _, tt := range tests {
		o := good
		o.Asks = append([]Ask(nil), good.Asks...)
		o.Uses = append([]int(nil), good.Uses...)
		tt.edit(&o)
		err := o.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field+":") {
			t.Errorf("%s: err %v, want ErrInvalid naming %s", tt.name, err, tt.field)
		}
	}
	outs, sessions := handOutputs()
	if _, err := NewEvaluator(outs, nil, DefaultOptions()); !errors.Is(err, ErrNoSession) {
		t.Errorf("no sessions: err %v, want ErrNoSession", err)
	}
	if _, err := NewEvaluator(outs, []Calls{{Name: "s", Context: ctx(9, 1)}}, DefaultOptions()); !errors.Is(err, ErrInvalid) {
		t.Errorf("short context: err %v, want ErrInvalid", err)
	}
	dup := append(append([]Output(nil), outs...), outs[0])
	if _, err := NewEvaluator(dup, sessions, DefaultOptions()); !errors.Is(err, ErrInvalid) {
		t.Errorf("duplicate key: err %v, want ErrInvalid", err)
	}
	bad := DefaultOptions()
	bad.Budget = 0
	if _, err := NewEvaluator(outs, sessions, bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("budget 0: err %v, want ErrInvalid", err)
	}
	e := mustEval(t, outs, sessions, DefaultOptions())
	// B is eligible from 5: a prune at 4 breaks protection.
	if _, err := e.Evaluate("x", -1, steps([]int{0, 4, 0})); !errors.Is(err, ErrInvalid) {
		t.Errorf("protected prune: err %v, want ErrInvalid", err)
	}
	if _, err := e.Evaluate("x", -1, steps([]int{0})); !errors.Is(err, ErrInvalid) {
		t.Errorf("short decisions: err %v, want ErrInvalid", err)
	}
}

// randomRecords makes a random but valid data set: 1-3 sessions of 5-30 steps,
// contexts up to 200,000 tokens (so the hard limit sometimes fires), outputs with
// random protection, rules, uses and asks.
func randomRecords(rng *rand.Rand) ([]Output, []Calls) {
	var outs []Output
	var sessions []Calls
	for s := range 1 + rng.IntN(3) {
		name := string(rune('a' + s))
		end := 5 + rng.IntN(26)
		c := make([]int, end)
		for i := range c {
			c[i] = rng.IntN(200_000)
		}
		sessions = append(sessions, Calls{Name: name, Context: c})
		for k := range 1 + rng.IntN(12) {
			step := rng.IntN(end)
			o := Output{Session: name, Key: string(rune('A' + k)), Tokens: rng.IntN(20_000), StubTokens: 40, Step: step, EndStep: end}
			span := end - step // steps after the output: step+1 .. end
			if rng.Float64() < 0.7 {
				o.CandidateFrom = step + 1 + rng.IntN(span)
			}
			if rng.Float64() < 0.3 {
				o.RuleDeadAt = step + 1 + rng.IntN(span)
			}
			for u := step + 1; u <= end; u++ {
				if rng.Float64() < 0.15 {
					o.Uses = append(o.Uses, u)
				}
			}
			if o.CandidateFrom > 0 {
				for a := o.CandidateFrom; a <= end; a += 1 + rng.IntN(4) {
					o.Asks = append(o.Asks, Ask{Step: a, Keep: rng.Float64(), OK: rng.Float64() < 0.9})
				}
			}
			outs = append(outs, o)
		}
	}
	// Offsets in step order: each output after the ones of earlier steps.
	sort.SliceStable(outs, func(i, j int) bool {
		return outs[i].Session < outs[j].Session || outs[i].Session == outs[j].Session && outs[i].Step < outs[j].Step
	})
	for i := range outs {
		outs[i].Offset = 100 * outs[i].Step
	}
	return outs, sessions
}

// TestOracleBound is the property test: over random records, the oracle never
// misses, and no pruner that respects protection and misses nothing saves more
// token-steps than the oracle, neither in total nor on any output. The pruners tried
// are random decisions (half of them forced after the output's last use, so that
// zero-miss pruners are common), every scorer cutoff, rules, recency and random.
func TestOracleBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	zeroMiss := 0
	for trial := range 300 {
		outs, sessions := randomRecords(rng)
		e := mustEval(t, outs, sessions, DefaultOptions())
		oracle := e.Oracle()
		if oracle.Misses != 0 || oracle.Decision.Misses != 0 || oracle.Applied.Misses != 0 {
			t.Fatalf("trial %d: oracle misses %d (decision level %d, applied %d)", trial, oracle.Misses, oracle.Decision.Misses, oracle.Applied.Misses)
		}
		op := stepsOf(OraclePrunes(outs))
		check := func(name string, ds []PruneAt) {
			p := stepsOf(ds)
			r, err := e.Evaluate(name, -1, ds)
			if err != nil {
				t.Fatalf("trial %d %s: %v", trial, name, err)
			}
			// Each priced miss is a use, at or after its output's decision, that
			// the stub does not hold: an output decided to be pruned misses once
			// (r.Misses counts those), or again each time a copy a recall brought
			// back is stubbed as it was and a later use misses it.
			uses := 0
			for i, d := range ds {
				for k, u := range outs[i].Uses {
					if d.Step > 0 && u >= d.Step && (k >= len(outs[i].Held) || !outs[i].Held[k]) {
						uses++
					}
				}
			}
			if r.Decision.Misses > uses || r.Applied.Misses > uses || r.Misses > uses {
				t.Errorf("trial %d %s: %d, %d priced misses (%d decided) exceed the %d uses after a decision", trial, name, r.Decision.Misses, r.Applied.Misses, r.Misses, uses)
			}
			if r.Misses != 0 {
				return
			}
			zeroMiss++
			if r.TokenSteps > oracle.TokenSteps {
				t.Errorf("trial %d %s: %d token-steps with no miss > oracle's %d", trial, name, r.TokenSteps, oracle.TokenSteps)
			}
			for i, s := range p {
				if s >= 1 && s <= outs[i].EndStep && (op[i] == 0 || s < op[i]) {
					t.Errorf("trial %d %s: output %d pruned at %d without a miss, oracle at %d", trial, name, i, s, op[i])
				}
			}
		}
		for k := range 20 {
			p := make([]int, len(outs))
			for i := range outs {
				el := outs[i].EligibleFrom()
				if el == 0 || rng.Float64() < 0.3 {
					continue
				}
				lo := el
				if n := len(outs[i].Uses); n > 0 && rng.Float64() < 0.5 {
					lo = max(lo, outs[i].Uses[n-1]+1)
				}
				if lo <= outs[i].EndStep {
					p[i] = lo + rng.IntN(outs[i].EndStep-lo+1)
				}
			}
			check("random-decisions-"+string(rune('a'+k)), steps(p))
		}
		for _, c := range DefaultCutoffs() {
			check("scorer", ScorerPrunes(outs, c, 0, 0))
		}
		check("rules", RulePrunes(outs))
		for _, n := range []int{1, 2, 5, 10} {
			check("recency", RecencyPrunes(outs, n))
		}
		check("random", RandomPrunes(outs, len(outs)/2, uint64(trial)))
		check("keep-all", make([]PruneAt, len(outs)))
	}
	if zeroMiss < 1000 {
		t.Errorf("only %d zero-miss pruners tried; the property test is too weak", zeroMiss)
	}
}

// TestRandomPruneRate: the random baseline prunes exactly as many outputs as the
// scorer result it is matched to, is deterministic for a seed, and differs between
// seeds.
func TestRandomPruneRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	differ := 0
	for trial := range 100 {
		outs, sessions := randomRecords(rng)
		e := mustEval(t, outs, sessions, DefaultOptions())
		for _, c := range []float64{0.1, 0.25, 0.5, 0.9} {
			ref := e.Scorer("x", c)
			r := e.Random(ref)
			if r.Pruned != ref.Pruned || r.PruneRate != ref.PruneRate {
				t.Errorf("trial %d cutoff %v: random pruned %d (rate %v), scorer %d (rate %v)", trial, c, r.Pruned, r.PruneRate, ref.Pruned, ref.PruneRate)
			}
			if again := e.Random(ref); !cmp.Equal(again, r) {
				t.Errorf("trial %d: random baseline not deterministic", trial)
			}
			a, b := RandomPrunes(outs, ref.Pruned, 1), RandomPrunes(outs, ref.Pruned, 2)
			if !cmp.Equal(a, b) {
				differ++
			}
		}
	}
	if differ == 0 {
		t.Error("seeds 1 and 2 never chose differently")
	}
}

func TestReport(t *testing.T) {
	outs, sessions := handOutputs()
	other := make([]Output, len(outs))
	for i, o := range outs {
		o.Asks = []Ask{{Step: o.CandidateFrom, Keep: 0.9, OK: true}}
		other[i] = o
	}
	rep, err := NewReport(outs, sessions, []ScorerInput{{Name: "x", Outputs: outs}, {Name: "high", Outputs: other}},
		ReportConfig{Cutoffs: []float64{0.5, 0.25, 0}, TargetMiss: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	b := rep.Budgets[0]
	for _, x := range b.Baselines {
		names = append(names, x.Name)
	}
	if want := []string{"keep-all", "rules", "recency-5", "recency-10", "recency-20", "oracle"}; !cmp.Equal(names, want) {
		t.Errorf("baselines %v, want %v", names, want)
	}
	names = nil
	for _, x := range b.Anchors {
		names = append(names, x.Name)
	}
	if want := AnchorNames(5000); !cmp.Equal(names, want) {
		t.Errorf("anchors %v, want %v", names, want)
	}
	x := b.Scorers[0]
	if len(x.Sweep) != 3 || x.Sweep[0].Cutoff != 0 || x.Sweep[2].Cutoff != 0.5 || len(x.Random) != 3 {
		t.Fatalf("sweep not sorted or random missing: %+v", x.Sweep)
	}
	// At cutoff 0 only the rule prunes C (no miss): the only cutoff under 10% misses
	// for scorer x (0.25 and 0.5 also prune A, which misses: 1/3).
	if x.Recommendation.None || x.Recommendation.Cutoff != 0 {
		t.Errorf("recommendation %+v, want cutoff 0", x.Recommendation)
	}
	var sb strings.Builder
	if err := rep.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"scorer x:", "scorer high:", "recommended cutoff: 0.00", "oracle", "[0.90,1.00)", "budget 100000 tokens, window 200000: keep-all pays $0.32", "gemini-cli-masking"} {
		if !strings.Contains(sb.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, sb.String())
		}
	}
	// A recommended cutoff that loses money against keep-all says so (a small window
	// where compaction is cheaper than the rewrites that avoid it).
	const losing = "pays $0.50 more than doing nothing at budget 100000"
	if strings.Contains(sb.String(), "more than doing nothing") {
		t.Errorf("a recommendation that does not lose money is flagged:\n%s", sb.String())
	}
	rep.Budgets[0].Scorers[0].Recommendation.Result.Applied.NetUSD = -0.5
	sb.Reset()
	if err := rep.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), losing) {
		t.Errorf("text report lacks %q:\n%s", losing, sb.String())
	}
	bad := append([]Output(nil), other...)
	bad[0].Tokens++
	if _, err := NewReport(outs, sessions, []ScorerInput{{Name: "bad", Outputs: bad}}, ReportConfig{TargetMiss: 0.1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("mismatched scorer outputs: err %v, want ErrInvalid", err)
	}
}

// TestDigestHeldUse is TestEvaluateHand's session with A's one use (step 6) held
// by A's stub digest: pruned at 4 with the advisor's stub, A is no miss and its
// stub stays to the end (3,000 x (11 - 4) = 21,000 token-steps, not 3,000 x 2), so
// 34,000 - 6,000 + 21,000 = 49,000; with a placeholder that holds nothing (the
// anchors'), the same decisions miss at 6 as before.
func TestDigestHeldUse(t *testing.T) {
	outs, sessions := handOutputs()
	outs[0].Held = []bool{true}
	e := mustEval(t, outs, sessions, DefaultOptions())
	got := e.Scorer("x", 0.25)
	if got.Misses != 0 || got.TokenSteps != 49_000 || got.Decision.Misses != 0 {
		t.Errorf("with the digest: %d misses (decision level %d), %d token-steps; want 0, 0, 49000", got.Misses, got.Decision.Misses, got.TokenSteps)
	}
	ds := ScorerPrunes(outs, 0.25, 0, 0)
	if r := e.pruneFigures("placeholder", 0.25, ds, holdNothing); r.Misses != 1 || r.TokenSteps != 34_000 {
		t.Errorf("placeholders: %d misses, %d token-steps; want 1, 34000", r.Misses, r.TokenSteps)
	}
	o := outs[0]
	o.Uses, o.Held = []int{6, 8, 9}, []bool{true, false, true}
	for _, tt := range []struct{ step, miss, used int }{{1, 8, 6}, {6, 8, 6}, {7, 8, 8}, {9, 0, 9}, {10, 0, 0}} {
		if m, u := o.MissFrom(tt.step), o.UsedFrom(tt.step); m != tt.miss || u != tt.used {
			t.Errorf("from %d: MissFrom %d, UsedFrom %d; want %d, %d", tt.step, m, u, tt.miss, tt.used)
		}
	}
	bad := outs[0]
	bad.Held = []bool{true, false}
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Held: 2 values for 1 uses") {
		t.Errorf("Held longer than Uses: %v", err)
	}
}

// TestFrontAndDominance: Front refines the hand session's sweep where neighbours'
// miss rates are more than the gap apart (each added point is what Scorer gives at
// its cutoff), and dominance finds, per anchor, the front point with no higher miss
// rate and the most token-steps among those with no fewer, or none.
func TestFrontAndDominance(t *testing.T) {
	outs, sessions := handOutputs()
	e := mustEval(t, outs, sessions, DefaultOptions())
	sweep := e.Sweep("x", []float64{0, 0.5})
	front := e.Front("x", sweep, 0.01, 48)
	if len(front) <= len(sweep) {
		t.Fatalf("front %d points, sweep %d: nothing refined", len(front), len(sweep))
	}
	for k := 0; k+1 < len(front); k++ {
		a, b := front[k], front[k+1]
		if b.Cutoff <= a.Cutoff {
			t.Fatalf("front not in cutoff order at %d: %v then %v", k, a.Cutoff, b.Cutoff)
		}
		far := math.Abs(b.MissRate-a.MissRate) > 0.01 || math.Abs(float64(b.TokenSteps-a.TokenSteps)) > 0.01*float64(b.TotalTokenSteps)
		if far && b.Cutoff-a.Cutoff >= 0.001 {
			t.Errorf("neighbours %v and %v: miss rates %v and %v", a.Cutoff, b.Cutoff, a.MissRate, b.MissRate)
		}
	}
	for _, r := range front {
		if d := cmp.Diff(e.Scorer("x", r.Cutoff), r, cmp.Comparer(approx)); d != "" {
			t.Errorf("front point at %v is not Scorer's (-Scorer +front):\n%s", r.Cutoff, d)
		}
	}
	pts := []Result{{Cutoff: 0.1, MissRate: 0.01, TokenSteps: 100}, {Cutoff: 0.2, MissRate: 0.03, TokenSteps: 300}, {Cutoff: 0.3, MissRate: 0.05, TokenSteps: 400}}
	got := dominance(pts, []Result{
		{Name: "a", MissRate: 0.03, TokenSteps: 250}, // 0.2 dominates (0.1 has fewer token-steps)
		{Name: "b", MissRate: 0.02, TokenSteps: 100}, // 0.1 (equal token-steps count)
		{Name: "c", MissRate: 0.02, TokenSteps: 150}, // none
	})
	want := []Dominance{
		{Anchor: "a", MissRate: 0.03, TokenSteps: 250, Cutoff: 0.2, PointMissRate: 0.03, PointTokenSteps: 300},
		{Anchor: "b", MissRate: 0.02, TokenSteps: 100, Cutoff: 0.1, PointMissRate: 0.01, PointTokenSteps: 100},
		{Anchor: "c", MissRate: 0.02, TokenSteps: 150, Cutoff: -1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("dominance (-want +got):\n%s", d)
	}
}

// TestPreviewHeldUse: Gemini CLI's masking keeps an output's head and tail, so a
// use they name (Previewed) is no miss of it; the hand session's output A is used
// at 6 after its prune at 4: with the preview holding that use, no miss and
// 3,000 x (11 - 4) = 21,000 token-steps as with the advisor's digest; a use the
// preview does not hold misses as with a placeholder. The anchor's stub is
// GeminiPreviewTokens, so an output no larger than that is never masked.
func TestPreviewHeldUse(t *testing.T) {
	outs, sessions := handOutputs()
	ds := ScorerPrunes(outs, 0.25, 0, 0)
	for _, tt := range []struct {
		previewed []bool
		misses    int
		steps     int64
	}{{[]bool{true}, 0, 49_000}, {[]bool{false}, 1, 34_000}, {nil, 1, 34_000}} {
		outs[0].Previewed = tt.previewed
		e := mustEval(t, outs, sessions, DefaultOptions())
		if r := e.pruneFigures("preview", 0.25, ds, holdPreview); r.Misses != tt.misses || r.TokenSteps != tt.steps {
			t.Errorf("Previewed %v: %d misses, %d token-steps; want %d, %d", tt.previewed, r.Misses, r.TokenSteps, tt.misses, tt.steps)
		}
	}
	bad := outs[0]
	bad.Previewed = []bool{true, true}
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Previewed: 2 values for 1 uses") {
		t.Errorf("Previewed longer than Uses: %v", err)
	}
	if n, h := (&protectWindowP{preview: true}).placeholder(); n != GeminiPreviewTokens || h != holdPreview {
		t.Errorf("gemini's stub: %d tokens, hold %d", n, h)
	}
	if n, h := (&protectWindowP{}).placeholder(); n != AnchorPlaceholderTokens || h != holdNothing {
		t.Errorf("opencode's stub: %d tokens, hold %d", n, h)
	}
}
