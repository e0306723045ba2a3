package advisor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// restartCase is one session and scorer whose run is compared with restarted runs.
type restartCase struct {
	name   string
	s      *transcript.Session
	cfg    advisor.Config
	scorer func() advisor.Scorer
}

func restartCases(t *testing.T) []restartCase {
	cfg := advisor.DefaultConfig()
	cfg.Budget = 6000
	cfg.PriceForced = false // the budget forces rewrites whatever they cost
	cases := []restartCase{{"frozen/parity", frozenSession(t), cfg, func() advisor.Scorer { return parityScorer() }}}
	file := filepath.Join(sessionsDir, "claude-code", "ff33b5b0-cc51-4271-a3eb-545a85882e5f.jsonl")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Logf("no real session, only the made-up one: %v", err)
		return cases
	}
	s, err := transcript.Read(filepath.Base(file), data, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lex := cfg
	lex.Cutoff = 0.7 // lexical scores on this session are 0.4-0.9: prune some
	fit, err := fitted.NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	fitCfg := cfg
	// Above the default 0.05, so that this session has a stub to recall early.
	fitCfg.ScorerCutoffs = map[string]float64{"fitted": 0.2}
	return append(cases,
		restartCase{"real/lexical", s, lex, func() advisor.Scorer { return lexical.New() }},
		restartCase{"real/fitted", s, fitCfg, func() advisor.Scorer { return fit }})
}

// plansEqual compares two plans of one step. Two fields differ by design: Changed
// (an advisor that starts on a session lists every item as changed at its first
// step) and an item's DecidedAt (the step of its latest decision change: an advisor
// that starts on a session decides every output afresh at its first step; the
// store's decision records keep the history).
var plansEqual = cmp.Options{cmpopts.IgnoreFields(advisor.Plan{}, "Changed"), cmpopts.IgnoreFields(advisor.Item{}, "DecidedAt")}

// An advisor started on a session already advised (a restart, another replica
// taking over) gives, from its first step on, the very plans the advisor that never
// stopped gives: scores, ask steps and the back-off, pending prunes, the use history
// and the card signals come back from the store (each step's asks in the ask table
// included), and so do the time of the last step, for the cache-TTL rule.
func TestRestartGivesSamePlans(t *testing.T) {
	for _, c := range restartCases(t) {
		t.Run(c.name, func(t *testing.T) {
			// The first stub is recalled two steps after it is applied (the agent
			// calls recall, or a person runs `pruneadvisor recall`), in every run.
			first := newRunner(t, newAdvisor(t, c.cfg, c.scorer(), advisor.NewMemoryStore(), newClock()), c.s).all()
			recallAfter, recallOf := 0, advisor.Item{}
			for _, st := range first {
				for _, it := range st.plan.Items {
					if recallAfter == 0 && it.Decision == advisor.DecisionPruned {
						recallAfter, recallOf = st.plan.Step+2, it
					}
				}
			}
			if recallAfter == 0 || recallAfter >= len(first) {
				t.Fatalf("no stub to recall before the last step")
			}
			// next advises r's next step on store, then records the recall after its step.
			next := func(r *runner, store *advisor.MemoryStore) step {
				st := r.next()
				if st.plan.Step == recallAfter {
					e := advisor.RecallEvent{RecallID: recallOf.RecallID, SessionID: advisor.SessionKey(c.s), OutputKey: recallOf.Key}
					if err := store.RecordRecall(context.Background(), e); err != nil {
						t.Fatal(err)
					}
				}
				return st
			}
			refStore := advisor.NewMemoryStore()
			rr := newRunner(t, newAdvisor(t, c.cfg, c.scorer(), refStore, newClock()), c.s)
			var ref []step
			for !rr.done() {
				ref = append(ref, next(rr, refStore))
			}
			stubs, asks := 0, 0
			for _, st := range ref {
				stubs += st.plan.Pruned
				asks += st.plan.Asked
			}
			if stubs < 3 || asks == 0 {
				t.Fatalf("the reference run pruned %d outputs and asked %d cards: the test needs both", stubs, asks)
			}
			if it := item(t, ref[len(ref)-1].plan, recallOf.Key); it.Decision != advisor.DecisionRecalled {
				t.Fatalf("%s is %s at the end, want recalled", recallOf.Key, it.Decision)
			}
			t.Logf("%d steps, %d stubs, %d asks, %s recalled after step %d", len(ref), stubs, asks, recallOf.Key, recallAfter)
			for K := 2; K <= len(ref); K++ {
				store := advisor.NewMemoryStore()
				clk := newClock()
				r := newRunner(t, newAdvisor(t, c.cfg, c.scorer(), store, clk), c.s)
				for range K - 1 {
					next(r, store)
				}
				// The process stops; a new one (with its own clock reading later, within
				// the cache TTL) takes the session over at step K.
				clk.Advance(30 * time.Second)
				r.adv = newAdvisor(t, c.cfg, c.scorer(), store, clk)
				for k := K - 1; !r.done(); k++ {
					st := next(r, store)
					want := ref[k].plan
					// The restarted clock is 30 s ahead; times do not reach the plan.
					if d := cmp.Diff(want, st.plan, plansEqual); d != "" {
						t.Fatalf("restart before step %d: step %d differs (-without +with the restart):\n%s", K, st.plan.Step, d)
					}
					if fmt.Sprint(stubsIn(c.s, st.out)) != fmt.Sprint(stubsIn(c.s, ref[k].out)) {
						t.Fatalf("restart before step %d: step %d sends other messages", K, st.plan.Step)
					}
				}
			}
		})
	}
}
