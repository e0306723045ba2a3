package calibrate

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/planner"
)

// A rewrite whose first changed message is the very first one (an output with no
// prompt before it, at offset 0) is still a rewrite. On edgeSession (5 outputs of
// 20,000, output 1 at offset 0): Gemini CLI masks outputs 1-2 at call 6, one
// rewrite; opencode (protect 40,000, prune at 20,000) prunes output 1 at call 4
// (outputs 2-3 fill its window), 2 at call 5 and 3 at call 6, three rewrites
// (see TestAnchorsAtTheirThresholds); Anthropic and Claude Code do nothing. The
// advisor's own stub of output 1 at call 3, traced, is a rewrite at call 3.
func TestRewriteOfTheFirstMessage(t *testing.T) {
	outs, sessions := edgeSession(5, 20_000, 8, 0)
	got := map[string][2]int{}
	for _, r := range mustEval(t, outs, sessions, DefaultOptions()).Anchors(0) {
		got[r.Name] = [2]int{r.Decision.Rewrites, r.Applied.Rewrites}
	}
	want := map[string][2]int{"anthropic-clearing": {0, 0}, "gemini-cli-masking": {1, 1}, "opencode-prune": {3, 3}, "claude-code-idle-clearing": {0, 0}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rewrites (decision, applied) by anchor (-want +got):\n%s", d)
	}
	applied := make([]int, len(outs))
	applied[0] = 3
	tr, err := Traces(outs, sessions, DefaultOptions(), applied)
	if err != nil {
		t.Fatal(err)
	}
	// 20,000 (s-1) sent, less 20,000 - 40 = 19,960 from call 3 on.
	wantAdv := Series{Context: []int{0, 20_000, 20_040, 40_040, 60_040, 80_040, 80_040, 80_040}, Rewrites: []int{3}}
	if d := cmp.Diff(&wantAdv, tr[0].Advisor); d != "" {
		t.Errorf("advisor's trace (-want +got):\n%s", d)
	}
}

// A rewrite writes the cache again from its first changed message, the earliest
// of the outputs it stubs, whatever order the policy lists them in. On
// edgeSession with 6 outputs of 20,000, Anthropic's clearing acts once: call 7
// would send 120,000 > 100,000, and it clears outputs 1-3 (offsets 0, 20,000,
// 40,000; 19,990 each), so call 7 sends 60,030 and reads nothing from the cache.
// Every other call reads what the previous one sent.
func TestRewriteWritesFromTheEarliestStub(t *testing.T) {
	outs, sessions := edgeSession(6, 20_000, 8, 0)
	e := mustEval(t, outs, sessions, DefaultOptions())
	p := e.sessions[0].price
	want := p.Call(0, 0) + p.Call(0, 20_000) + p.Call(20_000, 40_000) + p.Call(40_000, 60_000) + p.Call(60_000, 80_000) +
		p.Call(80_000, 100_000) + p.Call(0, 60_030) + p.Call(60_030, 60_030)
	for _, r := range e.Anchors(0) {
		if r.Name != "anthropic-clearing" {
			continue
		}
		if r.Pruned != 3 || r.Decision.Rewrites != 1 {
			t.Errorf("Anthropic cleared %d outputs in %d rewrites; want 3 in 1", r.Pruned, r.Decision.Rewrites)
		}
		if math.Abs(r.Decision.PaidUSD-want) > 1e-12 || math.Abs(r.Applied.PaidUSD-want) > 1e-12 {
			t.Errorf("Anthropic pays %.9f (decision), %.9f (applied); want %.9f", r.Decision.PaidUSD, r.Applied.PaidUSD, want)
		}
	}
}

// A stub no shorter than its output changes nothing: no rewrite, no token-step,
// no miss when the output is used later, the price and peak of keep-all (3,130
// tokens at call 4). The output has 30 tokens and a 40-token stub; it is
// "stubbed" at call 2 and used at call 3.
func TestStubNoShorterChangesNothing(t *testing.T) {
	outs := []Output{{Session: "n", Key: "small", Tokens: 30, StubTokens: 40, Offset: 100, Step: 1, EndStep: 4, Uses: []int{3}}}
	sessions := []Calls{{Name: "n", Context: []int{100, 1130, 2130, 3130}}}
	e := mustEval(t, outs, sessions, DefaultOptions())
	r, err := e.Applied("stub at 2", []int{2})
	if err != nil {
		t.Fatal(err)
	}
	want := Level{PaidUSD: e.KeepAllUSD(), PeakContext: 3130}
	if d := cmp.Diff(want, r.Decision); d != "" {
		t.Errorf("decision level (-want +got):\n%s", d)
	}
}

// An output visible from call 1 (produced before it, Step 0) and stubbed at step
// 1 is out of every call: a 10,000-token output with a 40-token stub keeps 9,960
// tokens out of each of 3 calls, 29,880 token-steps, in one rewrite (call 1).
func TestStubAtStepOne(t *testing.T) {
	outs := []Output{{Session: "o", Key: "first", Tokens: 10_000, StubTokens: 40, Offset: 500, Step: 0, EndStep: 3}}
	sessions := []Calls{{Name: "o", Context: []int{10_500, 12_000, 13_000}}}
	e := mustEval(t, outs, sessions, DefaultOptions())
	r, err := e.Applied("stub at 1", []int{1})
	if err != nil {
		t.Fatal(err)
	}
	p := e.sessions[0].price
	want := Level{TokenSteps: 29_880, Rewrites: 1, PeakContext: 3040, PaidUSD: p.Call(0, 540) + p.Call(540, 2040) + p.Call(2040, 3040)}
	want.NetUSD = e.KeepAllUSD() - want.PaidUSD
	if d := cmp.Diff(want, r.Decision, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })); d != "" {
		t.Errorf("decision level (-want +got):\n%s", d)
	}
}

// hardLimitSession: budget 100,000, hard limit 120,000; call s sends 1,000 +
// 20,000 min(s-1, 7), 8 calls. Outputs: a 30-token one from before call 1 whose
// 40-token stub would not be shorter (scored 0.55 at 1); outputs 1-7 of 20,000
// from calls 1-7 at offset 1,000 + 20,000 (k-1): output 1 a candidate from call 7
// (scored 0.6 then, used at 8), output 2 never a candidate, outputs 3-6
// candidates from the call after theirs (scored 0.9 then), output 7 never. At
// cutoff 0.5 nothing is pending.
func hardLimitSession() ([]Output, []Calls) {
	outs := []Output{{Session: "h", Key: "tiny", Tokens: 30, StubTokens: 40, Step: 0, CandidateFrom: 1, EndStep: 8,
		Asks: []Ask{{Step: 1, Keep: 0.55, OK: true}}}}
	for k := 1; k <= 7; k++ {
		o := Output{Session: "h", Key: string(rune('0' + k)), Tokens: 20_000, StubTokens: 40, Offset: 1000 + 20_000*(k-1), Step: k, EndStep: 8}
		switch k {
		case 1:
			o.CandidateFrom, o.Asks, o.Uses = 7, []Ask{{Step: 7, Keep: 0.6, OK: true}}, []int{8}
		case 3, 4, 5, 6:
			o.CandidateFrom, o.Asks = k+1, []Ask{{Step: k + 1, Keep: 0.9, OK: true}}
		}
		outs = append(outs, o)
	}
	c := make([]int, 8)
	for s := 1; s <= 8; s++ {
		c[s-1] = 1000 + 20_000*min(s-1, 7)
	}
	return outs, []Calls{{Name: "h", Context: c}}
}

// Past the hard limit the planner may stub candidates that are not pending, by
// their last score, lowest first, down to its mark: only outputs that are
// candidates by then (from that very call too) and whose stub is shorter. On
// hardLimitSession at cutoff 0.5, worked by hand: calls 1-6 send up to 101,000,
// under the hard limit, nothing pending: no rewrite. Call 7 would send 121,000 >
// 120,000; the candidates not pending are outputs 1 (0.6) and 3-6 (0.9; the tiny
// one's stub is no shorter, output 2 is no candidate). Lowest first: output 1
// (121,000 - 19,960 = 101,040 left), then 3 (81,080), then 4 (61,120). With the
// low-water mark alone (HardLimitLowWaterFraction 0) the mark is 80,000: one
// rewrite freeing 59,880 tokens. With the default 0.5 the mark is the lower
// 60,000 (half the hard limit), so output 5 goes too (41,160): 79,840. Either
// way output 1, used at 8, misses, and the peak is call 6's 101,000, the one call
// over the budget.
func TestHardLimitTakesCandidatesNotPending(t *testing.T) {
	for _, tt := range []struct {
		fraction float64
		frees    int
	}{{0, 59_880}, {0.5, 79_840}} {
		outs, sessions := hardLimitSession()
		opts := DefaultOptions()
		// The low-water mark of the hand computation: 80% of the budget.
		opts.HardLimit, opts.HardLimitLowWaterFraction, opts.LowWaterFraction = 120_000, tt.fraction, 0.8
		type rewrite struct {
			Step   int
			Reason planner.Reason
			Frees  int
		}
		var told []rewrite
		opts.OnRewrite = func(_ string, step int, d planner.Rewrite) { told = append(told, rewrite{step, d.Reason, d.Frees}) }
		r := mustEval(t, outs, sessions, opts).Scorer("s", 0.5)
		type figures struct{ Rewrites, Misses, Peak, OverBudget int }
		if d := cmp.Diff(figures{1, 1, 101_000, 1}, figures{r.Applied.Rewrites, r.Applied.Misses, r.Applied.PeakContext, r.Applied.StepsOverBudget}); d != "" {
			t.Errorf("fraction %v: applied level (-want +got):\n%s", tt.fraction, d)
		}
		if d := cmp.Diff([]rewrite{{7, planner.ReasonHardLimit, tt.frees}}, told); d != "" {
			t.Errorf("fraction %v: rewrites told to OnRewrite (-want +got):\n%s", tt.fraction, d)
		}
	}
}

// An output's last score at step s is its last answered ask at or before s
// (clamped to [0,1]); asks after s and asks without a score do not count; with
// none, 1.
func TestLastKeep(t *testing.T) {
	asks := []Ask{{Step: 3, Keep: 0.4, OK: true}, {Step: 5, OK: false}, {Step: 6, Keep: 0.2, OK: true}, {Step: 8, Keep: 0.7, OK: true}}
	for _, tc := range []struct {
		step int
		want float64
	}{{2, 1}, {3, 0.4}, {5, 0.4}, {6, 0.2}, {7, 0.2}, {8, 0.7}, {9, 0.7}} {
		if got := lastKeep(&Output{Asks: asks}, tc.step); got != tc.want {
			t.Errorf("lastKeep at step %d = %v, want %v", tc.step, got, tc.want)
		}
	}
	if got := lastKeep(&Output{}, 4); got != 1 {
		t.Errorf("lastKeep without asks = %v, want 1", got)
	}
}

// The stub savings before a position (what offset subtracts) are the sum of the
// savings added at the positions before it, for every prefix, however many
// positions there are; checked against the plain sum.
func TestFenwickSums(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8, 13} {
		f, plain := make(fenwick, n), make([]int, n)
		for i := 0; i < n; i++ {
			v := (i*7)%5 + 1
			f.add(i, v)
			plain[i] += v
			if i%2 == 0 { // add twice at some positions
				f.add(i, 10)
				plain[i] += 10
			}
		}
		want := 0
		for i := 0; i <= n; i++ {
			if got := f.sum(i); got != want {
				t.Errorf("n=%d: sum of the first %d = %d, want %d", n, i, got, want)
			}
			if i < n {
				want += plain[i]
			}
		}
		if got := f.sum(n + 3); got != want {
			t.Errorf("n=%d: sum past the end = %d, want %d", n, got, want)
		}
	}
}
