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

// TestDigestCost: a stub's digest costs the last whole live name within its
// budget; a record from before replay-15 (no DigestLive) is priced at the bound
// min(budget, DigestTokens); past the names the tracker kept, at the bound too.
func TestDigestCost(t *testing.T) {
	live := replay.OutputFacts{DigestTokens: 40, DigestLive: []int{0, 5, 9, 12}}
	old := replay.OutputFacts{DigestTokens: 40}
	for _, tt := range []struct {
		b, live, old int
	}{
		{0, 0, 0}, {4, 0, 4}, {5, 5, 5}, {11, 9, 11}, {12, 12, 12}, {128, 12, 40},
	} {
		if got := live.DigestCost(tt.b); got != tt.live {
			t.Errorf("DigestCost(%d) with live names = %d, want %d", tt.b, got, tt.live)
		}
		if got := old.DigestCost(tt.b); got != tt.old {
			t.Errorf("DigestCost(%d) of an old record = %d, want %d", tt.b, got, tt.old)
		}
	}
	cfg := advisor.DefaultConfig()
	cfg.DigestTokens = 16 // the tracker kept 32 digest tokens of names
	f := replay.OutputFacts{Tool: "Read", Summary: "a.go", Tokens: 10000, CandidateFrom: 2, DigestTokens: 60, DigestLive: []int{0, 5, 9}}
	base := advisor.StubTokens(cfg, f.Tool, f.Summary, f.Tokens)
	// A replay with digest_share 0.004 kept 2 x max(16, 0.004 x 10,000) = 80
	// digest tokens of this output's names.
	shared := cfg
	shared.DigestShare = 0.004
	for _, tt := range []struct {
		name        string
		cfg         advisor.Config
		b           int
		share       float64
		want, wantB int
	}{
		{"within the kept names", cfg, 20, 0, base + 9, 20},
		{"at the kept names' end", cfg, 32, 0, base + 9, 32},
		{"past the kept names: the bound", cfg, 64, 0, base + 60, 64},
		// max(16, 0.004 x 10,000) = 40, past the 32 kept: the bound min(40, 60).
		{"a share past the kept names", cfg, 16, 0.004, base + 40, 40},
		// The replay grew its kept names with its share: 64 is within its 80.
		{"a replay that kept more", shared, 64, 0, base + 9, 64},
		{"a share within what it kept", shared, 16, 0.006, base + 9, 60},
	} {
		if got, budget := replay.StubTokensAt(tt.cfg, &f, tt.b, tt.share); got != tt.want || budget != tt.wantB {
			t.Errorf("%s: StubTokensAt(budget %d, share %g) = %d, budget %d; want %d, %d (stub without digest %d)", tt.name, tt.b, tt.share, got, budget, tt.want, tt.wantB, base)
		}
	}
}
