package advisor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/recall"
)

// TestRecallBackoff: an agent that needs one output again each time it is stubbed
// recalls it four times. Each recall's result is protected for a window that grows
// with the recalls (3, 6, 12, 24 steps: the default ask schedule), so the session
// is rewritten at most once per recall; every stub naming the recall id stays
// frozen, every recall gives the original back byte for byte, and each recall
// counts once as a use of the original, whether the agent's recall tool records a
// recall event (MCP, the extension) or only its result is in the messages (a
// replayed session).
func TestRecallBackoff(t *testing.T) {
	for _, events := range []bool{true, false} {
		t.Run(fmt.Sprintf("recall events %v", events), func(t *testing.T) {
			testRecallBackoff(t, events)
		})
	}
}

func testRecallBackoff(t *testing.T, events bool) {
	cfg := advisor.DefaultConfig()
	cfg.Budget = 1000 // one visible copy of the original is over it
	cfg.RemainingMin = 100_000
	store := advisor.NewMemoryStore()
	clk := newClock()
	adv := newAdvisor(t, cfg, constScorer(0), store, clk)
	svc := recall.New(store)
	svc.Clock = clk.Now
	ctx := context.Background()

	orig := filler("config", 1500)
	c := newChat("make the port configurable")
	latest := c.read("reading the config", "/src/config.go", orig) // the copy the agent sees: c1, step 1
	origKey := latest

	wantWindows := []int{3, 6, 12, 24} // independent of the code: docs/DESIGN.md "Recall"
	var (
		rid         string
		recallSteps []int          // step of each recall's call (its result's step)
		resultKeys  []string       // each recall's result
		prunedAt    map[string]int // output key -> step its stub was applied
		frozen      = map[string]string{}
		rewrites    int
		last        advisor.Plan
	)
	prunedAt = map[string]int{}
	// The run ends with the last recall's window: through step S4 + 24.
	for T := 2; T <= 100; T++ {
		if n := len(recallSteps); n == len(wantWindows) && T > recallSteps[n-1]+wantWindows[n-1] {
			break
		}
		s := c.session(t, "recall-backoff")
		p, err := adv.Advise(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if p.Step != T {
			t.Fatalf("plan step %d; want %d", p.Step, T)
		}
		if p.Rewrite {
			rewrites++
		}
		for key, stub := range p.Stubs {
			if was, ok := frozen[key]; ok && was != stub {
				t.Fatalf("step %d: the stub of %s changed from %q to %q", T, key, was, stub)
			}
			if _, ok := frozen[key]; !ok {
				frozen[key], prunedAt[key] = stub, T
			}
		}
		it := item(t, p, latest)
		if it.Decision == advisor.DecisionPruned && len(recallSteps) < len(wantWindows) {
			if rid == "" {
				rid = it.RecallID
			}
			if it.RecallID != rid || !strings.Contains(it.Stub, rid) {
				t.Fatalf("step %d: %s's stub %q names %s; want the original's id %s", T, latest, it.Stub, it.RecallID, rid)
			}
			text := orig
			if events { // the recall tool of wrap's agents records an event
				got, err := svc.Recall(ctx, rid)
				if err != nil || got != orig {
					t.Fatalf("step %d: recall gave %d bytes, %v; want the %d-byte original", T, len(got), err, len(orig))
				}
				text = got
			}
			latest = c.call("I need the config again", "recall", fmt.Sprintf(`{"id":%q}`, rid), text)
			recallSteps, resultKeys = append(recallSteps, T), append(resultKeys, latest)
		} else {
			c.call("working", "Bash", fmt.Sprintf(`{"command":"echo step %d"}`, T), "ok")
		}
		last = p.Clone()
	}

	if len(recallSteps) != len(wantWindows) {
		t.Fatalf("%d recalls at steps %v; want %d", len(recallSteps), recallSteps, len(wantWindows))
	}
	// Each result stays unpruned through its window and is stubbed at the first step
	// after it (over budget, scored 0): the windows grow.
	for k, key := range resultKeys {
		S, want := recallSteps[k], wantWindows[k]
		at, ok := prunedAt[key]
		switch {
		case k < len(resultKeys)-1 && (!ok || at != S+want+1):
			t.Errorf("recall %d (step %d): its result %s stubbed at step %d (%v); want %d, after %d protected steps", k+1, S, key, at, ok, S+want+1, want)
		case k == len(resultKeys)-1 && ok:
			t.Errorf("recall %d (step %d): its result stubbed at step %d, inside its %d-step window (the run ends at %d)", k+1, S, at, want, last.Step)
		}
		if stub, ok := frozen[key]; ok && !strings.Contains(stub, fmt.Sprintf("%q", rid)) {
			t.Errorf("the stub of recall result %s is %q; want it to name the original's id %s", key, stub, rid)
		}
	}
	if rewrites > len(recallSteps) {
		t.Errorf("%d rewrites for %d recalls; want at most one per recall", rewrites, len(recallSteps))
	}
	if o, err := store.Original(ctx, rid); err != nil || o.Text != orig {
		t.Errorf("the store's original of %s: %d bytes, %v; want the %d-byte original", rid, len(o.Text), err, len(orig))
	}
	if it := item(t, last, origKey); it.Uses != len(recallSteps) {
		t.Errorf("the original's use history counts %d uses; want one per recall, %d", it.Uses, len(recallSteps))
	}
}
