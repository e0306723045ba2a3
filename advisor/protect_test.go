package advisor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
	// steps 2..38 are past the protected window at step 42.
	pruned := 0
	for _, it := range final.Items {
		if it.Decision == advisor.DecisionPruned {
			pruned++
		}
	}
	if pruned != 37 {
		t.Errorf("%d outputs pruned at the last step, want 37 (reads of steps 2..38)", pruned)
	}
}

// Unprotecting the memory output: either the config no longer excludes the tool, or
// the caller marks its message disposable. Then it is pruned, and recall (through
// recall.Service over the same MemoryStore) brings it back: byte for byte from the
// service, and into its slot at the next step.
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

			before := st.plan.ContextTokens
			st = r.next() // step 6
			it = item(t, st.plan, "c1")
			if it.Decision != advisor.DecisionRecalled || it.Stub != "" {
				t.Fatalf("step 6 after recall: c1 is %s, want recalled", it.Decision)
			}
			if !st.plan.Rewrite || !strings.HasPrefix(st.plan.RewriteReason, "recall") {
				t.Errorf("step 6: Rewrite %v (%q), want true (recall)", st.plan.Rewrite, st.plan.RewriteReason)
			}
			if got := outputText(t, st.out, "c1"); got != notes {
				t.Errorf("step 6: the slot does not hold the original again")
			}
			// The context grows by the original minus the stub, plus the new step's
			// message(s).
			var added int
			for _, m := range st.in[len(st.in)-2:] {
				added += m.Tokens
			}
			wantCtx := before + it.Tokens - transcript.CountTokens(stub) + added
			if st.plan.ContextTokens < wantCtx-600 || st.plan.ContextTokens > wantCtx {
				// other outputs may be pruned at this step (up to one 600-token read)
				t.Errorf("step 6: context %d tokens, want about %d", st.plan.ContextTokens, wantCtx)
			}
			// Protected for one back-off window (3 steps: through step 9), then asked
			// afresh and pruned again with the byte-identical stub.
			for T := 7; T <= 9; T++ {
				st = r.next()
				if it := item(t, st.plan, "c1"); it.Decision != advisor.DecisionRecalled {
					t.Fatalf("step %d: c1 is %s (%s), want still recalled", T, it.Decision, it.Reason)
				}
			}
			st = r.next() // step 10
			it = item(t, st.plan, "c1")
			if it.Decision != advisor.DecisionPruned || it.DecidedAt != 10 || it.Stub != stub {
				t.Fatalf("step 10: c1 is %s at %d, stub %q; want pruned again at 10 with the same stub %q", it.Decision, it.DecidedAt, it.Stub, stub)
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
	cfg.RewriteFraction = 0
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

// 15k tokens of prunable output against a 400k budget (3.75%, under the 5% rewrite
// threshold) cause no rewrite until more accumulates or the cache goes cold.
func TestNoRewriteUnderThreshold(t *testing.T) {
	session := func(reads int) *transcript.Session {
		c := newChat("Survey the code base")
		for i := 1; i <= reads; i++ {
			c.read("", fmt.Sprintf("/src/m%d.go", i), filler(fmt.Sprintf("m%d", i), 600))
		}
		return c.session(t, "survey.json")
	}
	cfg := advisor.DefaultConfig()
	cfg.ContextWindow = 800_000 // budget 400,000 tokens, hard limit 720,000
	if cfg.BudgetTokens() != 400_000 {
		t.Fatalf("budget %d", cfg.BudgetTokens())
	}
	const threshold = 20_000 // 5% of 400,000

	t.Run("warm, 15k pending", func(t *testing.T) {
		steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), session(30))
		for _, st := range steps {
			if st.plan.Rewrite || st.plan.Pruned > 0 {
				t.Fatalf("step %d: rewrite (%s)", st.plan.Step, st.plan.RewriteReason)
			}
			for i, m := range st.out {
				if m != st.in[i] {
					t.Fatalf("step %d: message %d was changed", st.plan.Step, i)
				}
			}
		}
		// 27 reads (steps 1..27) are candidates at step 31, all scored 0.
		final := steps[len(steps)-1].plan
		var pending, n int
		for _, it := range final.Items {
			if it.Decision == advisor.DecisionPending {
				n++
				pending += it.Tokens
			}
		}
		if n != 27 || pending < 15_000 || final.PendingTokens >= threshold || final.PendingTokens < 13_000 {
			t.Errorf("%d pending outputs of %d tokens (%d after stubs); want 27 outputs, >= 15,000 tokens, freeing 13,000..20,000",
				n, pending, final.PendingTokens)
		}
	})

	t.Run("more accumulates", func(t *testing.T) {
		steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), session(45))
		first := -1
		for i, st := range steps {
			if st.plan.Rewrite {
				first = i
				break
			}
		}
		if first < 1 {
			t.Fatalf("no rewrite over 45 steps")
		}
		prev, at := steps[first-1].plan, steps[first].plan
		if prev.PendingTokens >= threshold || at.SavedTokens < threshold || at.RewriteReason != "pending >= 5% of budget" {
			t.Errorf("rewrite at step %d (%s) saved %d tokens; pending the step before %d; want the first step with >= %d pending",
				at.Step, at.RewriteReason, at.SavedTokens, prev.PendingTokens, threshold)
		}
		if at.PendingTokens != 0 {
			t.Errorf("after the rewrite %d tokens still pending", at.PendingTokens)
		}
	})

	for _, tt := range []struct {
		idle    time.Duration
		rewrite bool
	}{{4 * time.Minute, false}, {6 * time.Minute, true}} {
		t.Run(fmt.Sprintf("idle %s", tt.idle), func(t *testing.T) {
			clk := newClock()
			r := newRunner(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), clk), session(30))
			var st step
			for len(r.ends)-r.k > 1 {
				if st = r.next(); st.plan.Rewrite {
					t.Fatalf("step %d: early rewrite", st.plan.Step)
				}
			}
			clk.Advance(tt.idle)
			st = r.next()
			if st.plan.Rewrite != tt.rewrite {
				t.Fatalf("after %s idle: Rewrite %v (%q), want %v", tt.idle, st.plan.Rewrite, st.plan.RewriteReason, tt.rewrite)
			}
			if tt.rewrite && (st.plan.RewriteReason != "cache cold" || st.plan.Pruned != 27 || st.plan.PendingTokens != 0) {
				t.Errorf("cold rewrite: reason %q, %d pruned, %d pending; want cache cold, 27, 0", st.plan.RewriteReason, st.plan.Pruned, st.plan.PendingTokens)
			}
		})
	}
}

// 120 tool calls of 600 tokens, every candidate scored under the cutoff: at most one
// rewrite per 5% of the budget pruned, and between rewrites the messages sent do not
// change.
func TestRewritesPerBudgetFraction(t *testing.T) {
	c := newChat("Read everything")
	for i := 1; i <= 120; i++ {
		c.read("", fmt.Sprintf("/src/r%d.go", i), filler(fmt.Sprintf("r%d", i), 600))
	}
	s := c.session(t, "r120.json")
	cfg := advisor.DefaultConfig()
	steps := simulate(t, newAdvisor(t, cfg, constScorer(0.1), advisor.NewMemoryStore(), newClock()), s)
	rewrites := 0
	for i, st := range steps {
		if st.plan.Rewrite {
			rewrites++
			continue
		}
		if i == 0 {
			continue
		}
		prev := steps[i-1].out
		for j := range prev {
			if st.out[j] != prev[j] && !cmp.Equal(texts(st.out[j]), texts(prev[j])) {
				t.Fatalf("step %d: message %d changed without a rewrite", st.plan.Step, j)
			}
		}
	}
	final := steps[len(steps)-1].plan
	saved := final.SavedTokens
	per := int(cfg.RewriteFraction * float64(cfg.BudgetTokens())) // 5,000 tokens
	t.Logf("%d rewrites, %d tokens saved, %d tokens per 5%%", rewrites, saved, per)
	if rewrites == 0 || rewrites*per > saved {
		t.Errorf("%d rewrites for %d tokens saved: more than one per %d tokens", rewrites, saved, per)
	}
	// 117 reads are candidates at the last step (121 - 3 - 1); all but the ones
	// pending under the threshold are pruned.
	pruned := 0
	for _, it := range final.Items {
		if it.Decision == advisor.DecisionPruned {
			pruned++
		}
	}
	if pruned < 117-10 || pruned > 117 {
		t.Errorf("%d pruned, want 107..117", pruned)
	}
}

func texts(m *transcript.Message) []string {
	var out []string
	for _, o := range m.Outputs {
		out = append(out, o.Text)
	}
	return out
}
