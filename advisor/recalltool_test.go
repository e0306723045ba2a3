package advisor_test

import (
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// IsRecallTool knows the recall tool by the names wrap's agents, `pruneadvisor mcp`
// and the configuration give it, and nothing else.
func TestIsRecallTool(t *testing.T) {
	tests := []struct {
		name, configured string
		want             bool
	}{
		{"recall", "recall", true},
		{"Recall", "recall", true},
		{"mcp__pruneadvisor__recall", "recall", true}, // Claude Code, Codex
		{"mcp_pruneadvisor_recall", "recall", true},   // Gemini CLI
		{"pruneadvisor_recall", "recall", true},       // opencode
		{"fetch_original", "fetch_original", true},    // --recall-tool
		{"fetch_original", "recall", false},
		{"Read", "recall", false},
		{"recaller", "recall", false},
		{"recall_v2", "recall", false},
	}
	for _, tt := range tests {
		if got := advisor.IsRecallTool(tt.name, tt.configured); got != tt.want {
			t.Errorf("IsRecallTool(%q, %q) = %v; want %v", tt.name, tt.configured, got, tt.want)
		}
	}
}

// With NoRecallTool the stubs name no tool: they say how to get the original
// without one, by the id the store keeps it under.
func TestNoRecallToolStubs(t *testing.T) {
	s, _ := memorySession(t)
	cfg := advisor.DefaultConfig()
	cfg.Budget = 10_000
	cfg.RemainingMin = 100_000
	cfg.ExcludedTools = []string{"todowrite", "task"}
	adv := newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock())
	adv.NoRecallTool = true
	steps := simulate(t, adv, s)
	last := steps[len(steps)-1].plan
	n := 0
	for _, it := range last.Items {
		if it.Decision != advisor.DecisionPruned {
			continue
		}
		n++
		want := "; no recall tool: run the call again, or \"pruneadvisor recall " + it.RecallID + "\" (GET /v1/recall/" + it.RecallID + ") restores it]"
		if !strings.HasSuffix(it.Stub, want) || strings.Contains(it.Stub, `("o_`) {
			t.Errorf("stub %q; want it to end %q and name no tool", it.Stub, want)
		}
	}
	if n == 0 {
		t.Fatal("nothing pruned")
	}
}
