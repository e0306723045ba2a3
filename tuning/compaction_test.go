package tuning_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/tuning"
)

// TestCompactionOf checks calibrate's compaction model against the table's rows,
// worked by hand.
func TestCompactionOf(t *testing.T) {
	of := tuning.CompactionOf(advisor.DefaultConfig())
	for _, tc := range []struct {
		agent  string
		window int
		want   calibrate.Compaction
	}{
		// 200,000 - 33,000; Claude's measured summary.
		{"claude", 200_000, calibrate.Compaction{Point: 167_000, Margin: 10_000, SummaryTokens: 4369}},
		// 64,000 - 16,384, keeping the last 20,000 tokens.
		{"pi", 64_000, calibrate.Compaction{Point: 47_616, Margin: 10_000, SummaryTokens: 1047, KeepTokens: 20_000}},
		{"gemini", 200_000, calibrate.Compaction{Point: 100_000, Margin: 10_000, SummaryTokens: 1877, KeepFraction: 0.3}},
		{"codex", 64_000, calibrate.Compaction{Point: 57_600, Margin: 10_000, SummaryTokens: 1877}},
		{"opencode", 200_000, calibrate.Compaction{Point: 180_000, Margin: 10_000, SummaryTokens: 1877, KeepSteps: 2}},
		// 40,000 - 33,000 = 7,000 is not above the margin: compacts at 7,000,
		// the hard limit is the window fraction's.
		{"claude", 40_000, calibrate.Compaction{Point: 7_000, SummaryTokens: 4369}},
		// An agent that does not compact cannot send more than the window.
		{"", 200_000, calibrate.Compaction{Point: 200_000, SummaryTokens: 1877}},
		{"mini-swe-agent", 32_000, calibrate.Compaction{Point: 32_000, SummaryTokens: 1877}},
	} {
		if d := cmp.Diff(tc.want, of(tc.agent, tc.window)); d != "" {
			t.Errorf("%q at %d (-want +got):\n%s", tc.agent, tc.window, d)
		}
	}
}

// TestReplayHardLimitFromAgent: a pi session's advisor takes its hard limit from
// pi's compaction point (200,000 - 16,384 = 183,616, less the margin: at most
// 173,616), not the window fraction's 180,000; its first hard-limit rewrite comes
// below that, and its calibrate.Calls (tuning.Calls) names the agent.
func TestReplayHardLimitFromAgent(t *testing.T) {
	src, err := replay.Load("../../shared/sessions/pi/before-compaction.jsonl", true)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := (&replay.Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New(), Lenient: true}).Replay(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if a := tuning.Calls(rec).Agent; a != advisor.AgentPi {
		t.Errorf("calibrate session's agent %q, want pi", a)
	}
	for _, s := range rec.StepFacts {
		if s.RewriteReason == "hard-limit" {
			if s.ContextTokens > 173_616 {
				t.Errorf("first hard-limit rewrite at step %d with %d tokens, past pi's point less the margin", s.Step, s.ContextTokens)
			}
			return
		}
	}
	t.Error("no hard-limit rewrite in a session that grows to 368,400 tokens")
}
