package advisor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// `now` names the file an old read holds: through the advisor, the lexical scorer
// ranks that read above the unrelated ones (the Plan's scores).
func TestNowRanksNamedFileLexical(t *testing.T) {
	c := newChat("The server fails to start; find out why.")
	files := map[string]string{
		"/app/config.yaml": "server:\n  host: 0.0.0.0\n  port: 8080\n" + filler("yaml setting", 300),
		"/app/README.md":   filler("readme project overview", 300),
		"/app/main.go":     filler("func handler", 300),
		"/app/LICENSE":     filler("license permission notice", 300),
	}
	order := []string{"/app/README.md", "/app/config.yaml", "/app/main.go", "/app/LICENSE"}
	var calls []tc
	var outs []string
	for _, p := range order {
		calls = append(calls, tc{"Read", fmt.Sprintf(`{"file_path":%q}`, p)})
		outs = append(outs, files[p])
	}
	ids := c.turn("Reading the project files.", calls, outs...)
	c.call("", "Bash", `{"command":"go build ./..."}`, "ok")
	c.call("", "Bash", `{"command":"go vet ./..."}`, "ok")
	c.call("The build is fine; next I will update the port in config.yaml.", "Bash", `{"command":"ss -ltn"}`, "LISTEN 0 4096 *:8080")
	c.say("Done.")
	s := c.session(t, "lexical.json")
	sc := lexical.New()
	steps := simulate(t, newAdvisor(t, advisor.DefaultConfig(), sc, advisor.NewMemoryStore(), newClock()), s)
	// Step 5 is the first where the step-1 reads are past K = 3: all four are asked
	// together, with now = the step-4 text.
	p := steps[4].plan
	if p.Step != 5 || p.Asked != 4 {
		t.Fatalf("step %d asked %d cards, want step 5 asking 4", p.Step, p.Asked)
	}
	scores := map[string]float64{}
	for i, path := range order {
		scores[path] = item(t, p, ids[i]).Score
	}
	t.Logf("scores: %v", scores)
	top := scores["/app/config.yaml"]
	for path, sc := range scores {
		if path != "/app/config.yaml" && !(top > sc) {
			t.Errorf("config.yaml scores %.3f, not above %s at %.3f", top, path, sc)
		}
		if sc < 0 || sc > 1 {
			t.Errorf("%s: score %v out of range", path, sc)
		}
	}
	if top < 0.25 {
		t.Errorf("config.yaml scores %.3f, under the cutoff: it would be pruned", top)
	}
}

// failingScorer fails every request in one way.
func failingScorer(name string, fn func(b cards.Batch) ([]cards.Score, error)) *fakeScorer {
	return &fakeScorer{name: name, fn: func(_ int, b cards.Batch) ([]cards.Score, error) { return fn(b) }}
}

func scoresOf(b cards.Batch, s cards.Score) []cards.Score {
	out := make([]cards.Score, len(b.Cards))
	for i := range out {
		out[i] = s
	}
	return out
}

// A scorer failure of any kind: nothing is pruned on its account, every card of
// the batch is counted in Plan.ScorerFailures under its kind, and the next ask of a
// card follows the back-off (3, 6, 12 steps later while over budget), not every step.
func TestScorerFailures(t *testing.T) {
	errWith := func(err error) func(b cards.Batch) ([]cards.Score, error) {
		return func(b cards.Batch) ([]cards.Score, error) { return make([]cards.Score, len(b.Cards)), err }
	}
	answer := func(s cards.Score) func(b cards.Batch) ([]cards.Score, error) {
		return func(b cards.Batch) ([]cards.Score, error) { return scoresOf(b, s), nil }
	}
	tests := []struct {
		name string
		fn   func(b cards.Batch) ([]cards.Score, error)
		kind string
	}{
		{"ollama timeout", errWith(fmt.Errorf("scoring: %w", ollama.ErrTimeout)), "timeout"},
		{"ollama unreachable", errWith(ollama.ErrUnreachable), "unreachable"},
		{"ollama http", errWith(ollama.ErrHTTP), "http"},
		{"ollama truncated", errWith(ollama.ErrTruncated), "truncated"},
		{"ollama invalid", errWith(ollama.ErrInvalidAnswer), "invalid"},
		{"ollama too large", errWith(ollama.ErrTooLarge), "too_large"},
		{"ollama canceled", errWith(ollama.ErrCanceled), "canceled"},
		{"lexical empty query", errWith(lexical.ErrEmptyQuery), "empty_query"},
		{"deadline", errWith(fmt.Errorf("x: %w", context.DeadlineExceeded)), "timeout"},
		{"plain error", errWith(errors.New("boom")), "error"},
		{"too few scores", func(b cards.Batch) ([]cards.Score, error) { return nil, nil }, "invalid"},
		{"not OK", answer(cards.Score{Keep: 0, OK: false}), "no-score"},
		{"NaN", answer(cards.Score{Keep: math.NaN(), OK: true}), "invalid"},
		{"above 1", answer(cards.Score{Keep: 1.5, OK: true}), "invalid"},
		{"below 0", answer(cards.Score{Keep: -0.1, OK: true}), "invalid"},
	}
	c := newChat("Read a lot")
	for i := 1; i <= 30; i++ {
		c.read("", fmt.Sprintf("/src/s%d.go", i), filler(fmt.Sprintf("s%d", i), 600))
	}
	s := c.session(t, "fail.json")
	cfg := advisor.DefaultConfig()
	cfg.Budget = 3000 // over budget from step 6 on
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := advisor.NewMemoryStore()
			steps := simulate(t, newAdvisor(t, cfg, failingScorer(tt.name, tt.fn), store, newClock()), s)
			failures := 0
			for _, st := range steps {
				if st.plan.Pruned != 0 || st.plan.PendingTokens != 0 {
					t.Fatalf("step %d: %d pruned, %d tokens pending", st.plan.Step, st.plan.Pruned, st.plan.PendingTokens)
				}
				want := map[string]int(nil)
				if st.plan.Asked > 0 {
					want = map[string]int{tt.kind: st.plan.Asked}
				}
				if d := cmp.Diff(want, st.plan.ScorerFailures); d != "" {
					t.Fatalf("step %d: ScorerFailures (-want +got):\n%s", st.plan.Step, d)
				}
				failures += st.plan.Asked
				for _, it := range st.plan.Items {
					if it.Score != -1 || strings.HasPrefix(it.Reason, "score") {
						t.Fatalf("step %d: %s has score %v (%s)", st.plan.Step, it.Key, it.Score, it.Reason)
					}
				}
			}
			if failures == 0 {
				t.Fatal("no ask failed")
			}
			var c1 []int
			for _, a := range store.Asks() {
				if a.OK || a.FailKind != tt.kind {
					t.Fatalf("ask record %+v, want failed with kind %s", a, tt.kind)
				}
				if a.OutputKey == "c1" {
					c1 = append(c1, a.Step)
				}
			}
			// c1 (step 1) is first asked at step 5, then 3, 6 and 12 steps later.
			if d := cmp.Diff([]int{5, 8, 14, 26}, c1); d != "" {
				t.Errorf("steps c1 was asked at (-want +got):\n%s", d)
			}
			if n := len(store.Stubs()); n != 0 {
				t.Errorf("%d stubs stored", n)
			}
		})
	}
}

// A candidate whose score wobbles around the cutoff is pruned at most once and never
// un-pruned except by recall. Scores for c1 alternate 0.26, 0.24, 0.26, …; the rest
// score 0.9. Rewrites need a cold cache here (threshold = the whole budget).
func TestWobbleAroundCutoff(t *testing.T) {
	c := newChat("Keep working")
	for i := 1; i <= 40; i++ {
		c.read("", fmt.Sprintf("/src/w%d.go", i), filler(fmt.Sprintf("w%d", i), 600))
	}
	s := c.session(t, "wobble.json")
	cfg := advisor.DefaultConfig()
	cfg.Budget = 5000
	cfg.RewriteFraction = 1
	cfg.SizeExponent = 0 // the scores wobble around the cutoff itself
	c1Asks := 0
	sc := &fakeScorer{fn: func(_ int, b cards.Batch) ([]cards.Score, error) {
		out := scoresOf(b, cards.Score{Keep: 0.9, OK: true})
		for i, cd := range b.Cards {
			if cd.ID == "c1" {
				c1Asks++
				out[i].Keep = []float64{0.26, 0.24}[(c1Asks-1)%2]
			}
		}
		return out, nil
	}}
	store := &countingStore{MemoryStore: advisor.NewMemoryStore()}
	clk := newClock()
	r := newRunner(t, newAdvisor(t, cfg, sc, store, clk), s)
	var decisions []string
	var stub string
	for T := 1; T <= 30; T++ {
		if T == 20 {
			clk.Advance(10 * time.Minute) // the cache goes cold: pending prunes are applied
		}
		st := r.next()
		if T == 1 {
			continue
		}
		it := item(t, st.plan, "c1")
		if n := len(decisions); n == 0 || decisions[n-1] != string(it.Decision) {
			decisions = append(decisions, string(it.Decision))
		}
		if it.Decision == advisor.DecisionPruned {
			if stub == "" {
				stub = it.Stub
			}
			if it.Stub != stub || outputText(t, st.out, "c1") != stub {
				t.Fatalf("step %d: the stub changed", T)
			}
		}
	}
	if d := cmp.Diff([]string{"protected", "keep", "pending", "pruned"}, decisions); d != "" {
		t.Errorf("c1's decisions (-want +got):\n%s", d)
	}
	if c1Asks != 2 {
		t.Errorf("c1 asked %d times, want 2 (0.26 keep, then 0.24 pending, then never again)", c1Asks)
	}
	if n := store.stubSaves["c1"]; n != 1 {
		t.Errorf("c1's stub saved %d times, want 1", n)
	}

	// Only a recall un-prunes it.
	st := r.next() // step 31
	id := item(t, st.plan, "c1").RecallID
	if err := store.RecordRecall(context.Background(), advisor.RecallEvent{RecallID: id, SessionID: "wobble.json", OutputKey: "c1", At: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	st = r.next() // step 32
	if it := item(t, st.plan, "c1"); it.Decision != advisor.DecisionRecalled {
		t.Errorf("after the recall c1 is %s, want recalled", it.Decision)
	}
}

// countingStore counts the stubs committed (SavePrunes) by output key.
type countingStore struct {
	*advisor.MemoryStore
	stubSaves map[string]int
	originals int
}

func (c *countingStore) SavePrunes(ctx context.Context, ps []advisor.Prune) error {
	if c.stubSaves == nil {
		c.stubSaves = map[string]int{}
	}
	if err := c.MemoryStore.SavePrunes(ctx, ps); err != nil {
		return err
	}
	for _, p := range ps {
		c.stubSaves[p.Stub.OutputKey]++
		c.originals++
	}
	return nil
}

// A cutoff of 0 cannot prune on a score, so the scorer is never asked; a score of 0
// at cutoff 0.25 would have pruned (the same session with that cutoff asks).
func TestCutoffZeroAsksNothing(t *testing.T) {
	s, err := transcript.ReadFile("../../shared/sessions/mini-swe-agent/sympy__sympy-20438.traj.json", transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		cutoff    float64
		wantAsked bool
	}{{0, false}, {0.25, true}} {
		cfg := advisor.DefaultConfig()
		cfg.Cutoff = tt.cutoff
		sc := constScorer(0)
		asked := 0
		for _, st := range simulate(t, newAdvisor(t, cfg, sc, advisor.NewMemoryStore(), nil), s) {
			asked += st.plan.Asked
		}
		if got := asked > 0 || sc.reqs > 0; got != tt.wantAsked {
			t.Errorf("cutoff %v: %d cards asked in %d requests; want asked = %v", tt.cutoff, asked, sc.reqs, tt.wantAsked)
		}
	}
}
