package advisor_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// lagSession is 30 reads of about 600 tokens: over a 3,000-token budget from
// step 6 on; read i (output ci) is a candidate from step i+4.
func lagSession(t *testing.T) *transcript.Session {
	c := newChat("Read a lot")
	for i := 1; i <= 30; i++ {
		c.read("", fmt.Sprintf("/src/s%d.go", i), filler(fmt.Sprintf("s%d", i), 600))
	}
	return c.session(t, "lag.json")
}

// TestModelledLag: with AskLag k an ask's scores count k steps after it, one ask
// in flight per session, the outputs whose recency protection ends next are
// asked a step ahead, and the asks are stored with the step they were made at.
func TestModelledLag(t *testing.T) {
	s := lagSession(t)
	cfg := lagConfig()
	tests := []struct {
		lag        int
		askSteps   []int // the steps asks were made at (the first few)
		scoredAt   int   // the first step whose plan shows c1's score
		firstStub1 int   // the step c1 is stubbed at
	}{
		{0, []int{5, 6, 7, 8, 9}, 5, 6},
		// From lag 1 on, an output is first asked a step ahead, at step i+3, when
		// its card is known and its recency protection ends: at lag 1 its score
		// counts at the step it becomes a candidate, as on the step's path.
		{1, []int{4, 5, 6, 7, 8}, 5, 6},
		{2, []int{4, 6, 8, 10, 12}, 6, 6},
		{4, []int{4, 8, 12, 16, 20}, 8, 8},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("lag%d", tt.lag), func(t *testing.T) {
			store := advisor.NewMemoryStore()
			adv := newAdvisor(t, cfg, constScorer(0.1), store, newClock())
			adv.AskLag = tt.lag
			scoredAt, stubbed := 0, 0
			for _, st := range simulate(t, adv, s) {
				it := advisor.Item{Score: -1}
				if len(st.plan.Items) > 0 {
					it = st.plan.Items[0]
				}
				if scoredAt == 0 && it.Score >= 0 {
					scoredAt = st.plan.Step
				}
				if stubbed == 0 && it.Decision == advisor.DecisionPruned {
					stubbed = st.plan.Step
				}
			}
			steps := map[int]bool{}
			for _, a := range store.Asks() {
				if !a.OK || a.Score != 0.1 {
					t.Fatalf("ask %+v", a)
				}
				steps[a.Step] = true
			}
			got := slices.Sorted(maps.Keys(steps))
			if d := cmp.Diff(tt.askSteps, got[:min(len(got), 5)]); d != "" {
				t.Errorf("ask steps (-want +got):\n%s", d)
			}
			if d := cmp.Diff([2]int{tt.scoredAt, tt.firstStub1}, [2]int{scoredAt, stubbed}); d != "" {
				t.Errorf("c1 [scored at, stubbed at] (-want +got):\n%s", d)
			}
		})
	}
}

// gateScorer answers 0.1 for every card once its gate is open, or the ask's
// context error when that ends first.
type gateScorer struct {
	gate chan struct{}
	asks chan int // the number of cards of each ask, as it starts
}

func (g *gateScorer) Name() string { return "gate" }

// newGate returns a gateScorer whose gate is shut.
func newGate() *gateScorer {
	return &gateScorer{gate: make(chan struct{}), asks: make(chan int, 100)}
}

// lagConfig is the configuration of the background-ask tests on lagSession: a
// 3,000-token budget, rewrites forced by it whatever they cost.
func lagConfig() advisor.Config {
	cfg := advisor.DefaultConfig()
	cfg.Budget = 3000
	cfg.PriceForced = false
	return cfg
}

// withRunner gives adv an AskRunner of its own, closed when the test ends (Close
// may also be called before).
func withRunner(t *testing.T, adv *advisor.Advisor) *advisor.AskRunner {
	r := advisor.NewAskRunner()
	adv.Asks = r
	t.Cleanup(r.Close)
	return r
}

func (g *gateScorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	g.asks <- len(b.Cards)
	select {
	case <-g.gate:
		return constScores(b, 0.1), nil
	case <-ctx.Done():
		return make([]cards.Score, len(b.Cards)), fmt.Errorf("gate: %w", ctx.Err())
	}
}

// started waits until g starts an ask (at most 5 s).
func started(t *testing.T, g *gateScorer) {
	t.Helper()
	select {
	case <-g.asks:
	case <-time.After(5 * time.Second):
		t.Fatal("no ask started within 5 s")
	}
}

// waitIdle waits until r runs no ask (at most 5 s).
func waitIdle(t *testing.T, r *advisor.AskRunner) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); r.Running() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d asks still running after 5 s", r.Running())
		}
	}
}

// TestBackgroundAsks: Advise returns while the scorer has not answered; the
// answer counts from the first step after it came, stored with the ask's step;
// Close leaves no goroutine.
func TestBackgroundAsks(t *testing.T) {
	s := lagSession(t)
	cfg := lagConfig()
	store := advisor.NewMemoryStore()
	g := newGate()
	adv := newAdvisor(t, cfg, g, store, newClock())
	runner := withRunner(t, adv)
	r := newRunner(t, adv, s)
	var last step
	for range 8 { // steps 1..8: the ask of step 4 (c1, a step ahead) stays unanswered
		last = r.next()
	}
	started(t, g)
	if n := len(g.asks); n != 0 {
		t.Fatalf("%d more asks started by step 8, want 0 (one in flight per session)", n)
	}
	if it := item(t, last.plan, "c1"); it.Score != -1 || last.plan.Pruned != 0 {
		t.Fatalf("step 8: c1 %+v, %d pruned, before any answer", it, last.plan.Pruned)
	}
	close(g.gate)
	waitIdle(t, runner)
	p := r.next().plan // step 9 folds in the answer of step 4 and asks about c2..c6
	if d := cmp.Diff([]float64{0.1, -1}, []float64{item(t, p, "c1").Score, item(t, p, "c2").Score}); d != "" {
		t.Errorf("step 9 scores of c1, c2 (-want +got):\n%s", d)
	}
	if p.Asked != 5 || item(t, p, "c1").Decision != advisor.DecisionPruned {
		t.Errorf("step 9: asked %d (want 5: c2..c5, due while c1's ask was out, and c6 ahead), c1 %s (%s)", p.Asked, item(t, p, "c1").Decision, p.Waiting)
	}
	var steps []int
	for _, a := range store.Asks() {
		steps = append(steps, a.Step)
	}
	if d := cmp.Diff([]int{4}, steps); d != "" {
		t.Errorf("stored ask steps (-want +got):\n%s", d)
	}
	runner.Close()
	if n := runner.Running(); n != 0 {
		t.Errorf("%d asks running after Close", n)
	}
}

// TestBackgroundNeverAnswers: a scorer that never answers leaves its cards "no
// score", each counted once (kind timeout), and prunes nothing on its account.
func TestBackgroundNeverAnswers(t *testing.T) {
	s := lagSession(t)
	cfg := lagConfig()
	store := advisor.NewMemoryStore()
	g := newGate()
	adv := newAdvisor(t, cfg, g, store, newClock())
	runner := withRunner(t, adv)
	runner.Timeout = 20 * time.Millisecond
	asked, failed, out := 0, 0, 0
	for _, st := range newRunner(t, adv, s).allWaiting(func() { waitIdle(t, runner) }) {
		asked += st.plan.Asked
		if st.plan.Asked > 0 {
			out = st.plan.Asked // the latest ask: out when the next step comes
		}
		failed += st.plan.ScorerFailures["timeout"]
		if len(st.plan.ScorerFailures) > 1 || st.plan.Pruned > 0 {
			t.Fatalf("step %d: failures %v, %d pruned", st.plan.Step, st.plan.ScorerFailures, st.plan.Pruned)
		}
		for _, it := range st.plan.Items {
			if it.Score != -1 {
				t.Fatalf("step %d: %s scored %v", st.plan.Step, it.Key, it.Score)
			}
		}
	}
	stored := 0
	for _, a := range store.Asks() {
		if a.OK || a.FailKind != "timeout" {
			t.Fatalf("ask %+v, want failed by timeout", a)
		}
		stored++
	}
	// Every card counted once, when its ask's timeout came back; the last ask is
	// still out when the session ends: asked, not answered.
	if d := cmp.Diff([3]int{asked, asked - out, asked - out}, [3]int{asked, failed, stored}); asked == 0 || d != "" {
		t.Errorf("[asked, counted failed, stored failed] (-want +got):\n%s", d)
	}
}

// allWaiting runs the remaining steps, calling between before each.
func (r *runner) allWaiting(between func()) []step {
	var out []step
	for !r.done() {
		between()
		out = append(out, r.next())
	}
	return out
}

// TestCloseWithAskInFlight: stopping with an ask in flight loses nothing
// decided: an advisor started afresh on the store sends the same stubs.
func TestCloseWithAskInFlight(t *testing.T) {
	s := lagSession(t)
	cfg := lagConfig()
	store := advisor.NewMemoryStore()
	g := newGate()
	adv := newAdvisor(t, cfg, g, store, newClock())
	runner := withRunner(t, adv)
	r := newRunner(t, adv, s)
	close(g.gate)
	var last step
	for range 12 {
		waitIdle(t, runner)
		last = r.next()
	}
	if len(last.plan.Stubs) == 0 {
		t.Fatal("no stub by step 12")
	}
	want := maps.Clone(last.plan.Stubs)
	// An ask that never answers is in flight when the process stops.
	g2 := newGate()
	adv.Scorer = g2
	waitIdle(t, runner)
	r.next()
	started(t, g2)
	runner.Close()
	if n := runner.Running(); n != 0 {
		t.Fatalf("%d asks running after Close", n)
	}
	// The runner is closed: later steps ask nothing (and start no goroutine).
	// The ask in flight was never answered: it is neither folded in nor stored.
	asksBefore := len(store.Asks())
	for range 3 {
		if p := r.next().plan; p.Asked != 0 || len(p.ScorerFailures) != 0 {
			t.Fatalf("step %d after Close: asked %d, failures %v", p.Step, p.Asked, p.ScorerFailures)
		}
	}
	if n, m := runner.Running(), len(store.Asks()); n != 0 || m != asksBefore {
		t.Fatalf("after Close: %d asks running, %d asks stored (%d before)", n, m, asksBefore)
	}
	fresh := newAdvisor(t, cfg, constScorer(0.9), store, newClock())
	view := *s
	view.Messages = s.Messages[:r.ends[r.k-1]]
	p, err := fresh.Advise(context.Background(), &view)
	if err != nil {
		t.Fatal(err)
	}
	got := maps.Clone(p.Stubs)
	for k := range got {
		if _, ok := want[k]; !ok {
			delete(got, k) // pruned at the step advised again: not the point here
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("stubs after the restart (-before +after):\n%s", d)
	}
}

// TestHardLimitNeverWaits: a rewrite forced by the hard limit does not wait for
// the scorer (here one that never answers, asked in the background): candidates
// not scored yet are ranked by the Fallback scorer (even files 0.10, odd ones
// 0.60), lowest first, down to the low-water mark.
func TestHardLimitNeverWaits(t *testing.T) {
	cfg := hardLimitConfig()
	g := newGate()
	adv := newAdvisor(t, cfg, g, advisor.NewMemoryStore(), newClock())
	withRunner(t, adv) // asks in the background
	adv.Fallback = &fakeScorer{name: "fitted", fn: func(_ int, b cards.Batch) ([]cards.Score, error) {
		out := make([]cards.Score, len(b.Cards))
		for i, c := range b.Cards {
			var n int
			fmt.Sscanf(c.Args, "/src/m%d.go", &n)
			out[i] = cards.Score{Keep: 0.1, OK: true}
			if n%2 == 1 {
				out[i].Keep = 0.6
			}
		}
		return out, nil
	}}
	done := make(chan advisor.Plan, 1)
	go func() {
		p, err := adv.Advise(context.Background(), survey(t, 40))
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	var p advisor.Plan
	select {
	case p = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Advise waited for the scorer")
	}
	if !p.Rewrite || p.RewriteReason != "hard-limit" || p.ContextTokens > 8_000 {
		t.Fatalf("rewrite %v (%q), context %d; want a hard-limit rewrite to <= 8000", p.Rewrite, p.RewriteReason, p.ContextTokens)
	}
	low, high, lowKept := 0, 0, 0
	for _, it := range p.Items {
		switch {
		case it.Decision == advisor.DecisionPruned && it.Reason == "hard limit, not asked yet, fitted score 0.10":
			low++
		case it.Decision == advisor.DecisionPruned && it.Reason == "hard limit, not asked yet, fitted score 0.60":
			high++
		case it.Decision == advisor.DecisionPruned:
			t.Errorf("%s pruned for %q", it.Key, it.Reason)
		case it.Decision == advisor.DecisionKeep && strings.Contains(it.Summary, "m") && it.Tokens > 0:
			var n int
			fmt.Sscanf(it.Summary, "/src/m%d.go", &n)
			if n%2 == 0 {
				lowKept++
			}
		}
	}
	if low == 0 || high > 0 && lowKept > 0 {
		t.Errorf("pruned %d at 0.10 (%d kept) and %d at 0.60; want every 0.10 one before any 0.60", low, lowKept, high)
	}
}
