package advisor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/recall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// memorySession: a memory tool output loaded at step 1, then 40 reads.
func memorySession(t *testing.T) (*transcript.Session, string) {
	c := newChat("Refactor the billing module")
	notes := filler("memory note", 1500)
	c.call("Loading my notes.", "memory", `{"command":"view","path":"/memories"}`, notes)
	for i := 2; i <= 41; i++ {
		c.read("", fmt.Sprintf("/src/f%d.go", i), filler(fmt.Sprintf("f%d", i), 600))
	}
	return c.session(t, "memory.json"), notes
}

// A memory-tool output is an excluded tool by default: never pruned, however old,
// even with a scorer that would prune everything and a session far over budget.
func TestMemoryToolNeverPruned(t *testing.T) {
	s, notes := memorySession(t)
	cfg := advisor.DefaultConfig()
	cfg.Budget = 10_000
	cfg.PriceForced = false // the budget forces rewrites whatever they cost
	store := advisor.NewMemoryStore()
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0), store, newClock()), s)
	for _, st := range steps {
		if st.plan.Step == 1 {
			continue // no output yet
		}
		it := item(t, st.plan, "c1")
		if it.Decision != advisor.DecisionProtected || it.Reason != "excluded tool memory" {
			t.Fatalf("step %d: memory output is %s (%s), want protected (excluded tool memory)", st.plan.Step, it.Decision, it.Reason)
		}
		if got := outputText(t, st.out, "c1"); got != notes {
			t.Fatalf("step %d: memory output text changed", st.plan.Step)
		}
	}
	final := steps[len(steps)-1].plan
	if _, ok := store.Stubs()[item(t, final, "c1").RecallID]; ok {
		t.Errorf("the store holds a stub for the memory output")
	}
	// The rest was pruned: the test is not passing by pruning nothing. Reads at
	// steps 2..38 are past the protected window at step 42; the last forced rewrite
	// took the context down to the low-water mark, and the reads pending since wait
	// until the budget is passed again.
	pruned := 0
	for _, it := range final.Items {
		if it.Decision == advisor.DecisionPruned {
			pruned++
		}
	}
	if pruned < 25 || pruned > 37 {
		t.Errorf("%d outputs pruned at the last step, want most of the 37 reads of steps 2..38", pruned)
	}
}

// Unprotecting the memory output: either the config no longer excludes the tool, or
// the caller marks its message disposable. Then it is pruned, and recall (through
// recall.Service over the same MemoryStore) brings it back byte for byte, while the
// stub stays frozen in its slot.
func TestMemoryToolUnprotectedRecall(t *testing.T) {
	tests := []struct {
		name       string
		excluded   []string // nil: the default list
		disposable bool
		reason     string
	}{
		{"config without it", []string{"todowrite", "task"}, false, "score 0.00 < cutoff 0.25"},
		{"caller marks it disposable", nil, true, "disposable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, notes := memorySession(t)
			if tt.disposable {
				s.Messages[2].Retention = transcript.RetentionDisposable
				if got := s.Messages[2].Outputs[0].Key; got != "c1" {
					t.Fatalf("message 2 holds %s, want c1", got)
				}
			}
			cfg := advisor.DefaultConfig()
			cfg.Budget = 10_000
			cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
			cfg.SizeExponent = 0       // the stub's reason names the cutoff itself
			if tt.excluded != nil {
				cfg.ExcludedTools = tt.excluded
			}
			store := advisor.NewMemoryStore()
			clk := newClock()
			adv := newAdvisor(t, cfg, constScorer(0), store, clk)
			r := newRunner(t, adv, s)
			var st step
			for i := 1; i <= 5; i++ {
				st = r.next()
			}
			// Step 5 is the first where the step-1 output is past K = 3 steps.
			it := item(t, st.plan, "c1")
			if it.Decision != advisor.DecisionPruned || it.Reason != tt.reason || it.DecidedAt != 5 {
				t.Fatalf("step 5: c1 is %s (%s) decided at %d; want pruned (%s) at 5", it.Decision, it.Reason, it.DecidedAt, tt.reason)
			}
			stub := it.Stub
			if got := outputText(t, st.out, "c1"); got != stub {
				t.Fatalf("step 5: slot holds %.60q, want the stub", got)
			}
			if !strings.Contains(stub, fmt.Sprintf("recall(%q) restores it", it.RecallID)) {
				t.Errorf("stub %q does not name its recall id", stub)
			}

			svc := recall.New(store)
			svc.Clock = clk.Now
			got, err := svc.Recall(context.Background(), it.RecallID)
			if err != nil || got != notes {
				t.Fatalf("Recall(%s) = %d bytes, %v; want the %d-byte original", it.RecallID, len(got), err, len(notes))
			}

			// docs/DESIGN.md "Recall": the original reached the caller as the recall's own
			// result; the stub stays where it is, byte-identical, and the bytes sent do
			// not change on its account.
			st = r.next() // step 6
			it = item(t, st.plan, "c1")
			if it.Decision != advisor.DecisionRecalled || it.Stub != stub {
				t.Fatalf("step 6 after recall: c1 is %s with stub %q, want recalled with the stub %q", it.Decision, it.Stub, stub)
			}
			if got := outputText(t, st.out, "c1"); got != stub {
				t.Errorf("step 6: the slot holds %.60q, want the frozen stub", got)
			}
			if it.Uses < 1 {
				t.Errorf("step 6: c1's use history %d, want the recall counted", it.Uses)
			}
			for T := 7; T <= 10; T++ {
				st = r.next()
				if it := item(t, st.plan, "c1"); it.Decision != advisor.DecisionRecalled || it.Stub != stub {
					t.Fatalf("step %d: c1 is %s (%s), want still recalled with the same stub", T, it.Decision, it.Reason)
				}
			}
		})
	}
}

// A caller's "keep" protects any output for good.
func TestRetentionKeep(t *testing.T) {
	s, _ := memorySession(t)
	s.Messages[4].Retention = transcript.RetentionKeep // the read of /src/f2.go
	key := s.Messages[4].Outputs[0].Key
	cfg := advisor.DefaultConfig()
	cfg.Budget = 10_000
	cfg.PriceForced = false // the budget forces rewrites whatever they cost
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), s)
	it := item(t, steps[len(steps)-1].plan, key)
	if it.Decision != advisor.DecisionProtected || it.Reason != "caller marked keep" {
		t.Errorf("%s: %s (%s), want protected (caller marked keep)", key, it.Decision, it.Reason)
	}
	if it := item(t, steps[len(steps)-1].plan, "c3"); it.Decision != advisor.DecisionPruned {
		t.Errorf("c3 (unmarked neighbour) is %s, want pruned", it.Decision)
	}
}

// A 72-character output is never stubbed: the stub would not be shorter, whatever
// the size threshold, the retention class, the rules and the scorer say.
func TestShortOutputNeverStubbed(t *testing.T) {
	out := "total 3\n-rw-r--r-- 1 dev dev 120 Jan  2 10:00 main.go\n-rw-r--r-- 1 devx\n"
	if len(out) != 72 {
		t.Fatalf("test output is %d bytes, want 72", len(out))
	}
	c := newChat("List the files")
	c.call("", "Bash", `{"command":"ls -l"}`, out)
	c.call("", "Bash", `{"command":"ls -l"}`, out) // a duplicate: c1 is rule-dead
	for i := 0; i < 8; i++ {
		c.call("", "Bash", fmt.Sprintf(`{"command":"ls -l %d"}`, i), out)
	}
	s := c.session(t, "short.json")
	for _, m := range s.Messages {
		m.Retention = transcript.RetentionDisposable
	}
	cfg := advisor.DefaultConfig()
	cfg.MinCandidateTokens = 1
	cfg.RemainingMin = 100_000 // every pending prune pays for itself at once
	store := advisor.NewMemoryStore()
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0), store, newClock()), s)
	for _, st := range steps {
		for _, it := range st.plan.Items {
			if it.Decision == advisor.DecisionPruned || it.Decision == advisor.DecisionPending {
				t.Fatalf("step %d: %s is %s", st.plan.Step, it.Key, it.Decision)
			}
		}
	}
	final := steps[len(steps)-1].plan
	if it := item(t, final, "c1"); it.Reason != "stub not shorter than the output" {
		t.Errorf("c1 reason %q, want %q", it.Reason, "stub not shorter than the output")
	}
	if n := len(store.Stubs()); n != 0 {
		t.Errorf("%d stubs stored, want 0", n)
	}
}

func texts(m *transcript.Message) []string {
	var out []string
	for _, o := range m.Outputs {
		out = append(out, o.Text)
	}
	return out
}
