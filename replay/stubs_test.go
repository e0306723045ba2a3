package replay_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// TestStubs: only stubbed outputs, in session order, each with the reason and score
// of its latest pending decision at or before the rewrite (not a later one, not
// another output's, not a keep), the recall id its stub names; -1 without a
// pending decision.
func TestStubs(t *testing.T) {
	rec := &replay.Record{ID: "replay-x", Path: "/s/a.jsonl", Outputs: []replay.OutputFacts{
		{Key: "a", Tool: "Read", Summary: "a.go", Tokens: 900, StubTokens: 30, Step: 1, PrunedAt: 6},
		{Key: "b", Tool: "Bash", Summary: "go test", Tokens: 500, Step: 2},
		{Key: "c", Tool: "Read", Summary: "c.go", Tokens: 700, StubTokens: 25, Step: 3, PrunedAt: 9, RuleDeadAt: 5},
		{Key: "d", Tool: "Grep", Summary: "x", Tokens: 400, StubTokens: 20, Step: 3, PrunedAt: 7},
	}, Decisions: []advisor.DecisionRecord{
		{OutputKey: "a", Step: 4, Decision: advisor.DecisionKeep, Reason: "score 0.30 >= cutoff 0.05", Score: 0.3},
		{OutputKey: "a", Step: 5, Decision: advisor.DecisionPending, Reason: "score 0.02 < cutoff 0.05", Score: 0.02},
		{OutputKey: "a", Step: 8, Decision: advisor.DecisionPending, Reason: "later", Score: 0.01},
		{OutputKey: "b", Step: 5, Decision: advisor.DecisionPending, Reason: "never applied", Score: 0.01},
		{OutputKey: "c", Step: 5, Decision: advisor.DecisionPending, Reason: "superseded by call t9", Score: -1},
	}}
	want := []replay.Stub{
		{Session: "/s/a.jsonl", Key: "a", Tool: "Read", Summary: "a.go", Step: 1, PrunedAt: 6, Tokens: 900, StubTokens: 30,
			Reason: "score 0.02 < cutoff 0.05", Score: 0.02, RecallID: advisor.RecallID("replay-x", "a")},
		{Session: "/s/a.jsonl", Key: "c", Tool: "Read", Summary: "c.go", Step: 3, PrunedAt: 9, Tokens: 700, StubTokens: 25,
			Reason: "superseded by call t9", Score: -1, RecallID: advisor.RecallID("replay-x", "c")},
		{Session: "/s/a.jsonl", Key: "d", Tool: "Grep", Summary: "x", Step: 3, PrunedAt: 7, Tokens: 400, StubTokens: 20,
			Score: -1, RecallID: advisor.RecallID("replay-x", "d")},
	}
	if diff := cmp.Diff(want, rec.Stubs()); diff != "" {
		t.Errorf("Stubs (-want +got):\n%s", diff)
	}
}
