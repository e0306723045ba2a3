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
		// 200,000 - 33,000; Claude's measured summary; Claude Code estimates its
		// next request: the growth margin.
		{"claude", 200_000, calibrate.Compaction{Point: 167_000, Margin: 10_000, SummaryTokens: 4369, Decides: calibrate.DecidesEstimate}},
		// 64,000 - 16,384, keeping the last 20,000 tokens; the agents that count
		// their last usage keep room for the answer alone (5,000); pi counts only
		// between turns, and within one compacts past the window (overflow).
		{"pi", 64_000, calibrate.Compaction{Point: 47_616, Margin: 5_000, SummaryTokens: 1047, KeepTokens: 20_000, Decides: calibrate.DecidesTurn, Window: 64_000}},
		{"gemini", 200_000, calibrate.Compaction{Point: 100_000, Margin: 5_000, SummaryTokens: 1877, KeepFraction: 0.3, Decides: calibrate.DecidesUsage}},
		{"codex", 64_000, calibrate.Compaction{Point: 57_600, Margin: 5_000, SummaryTokens: 1877, Decides: calibrate.DecidesUsage}},
		{"opencode", 200_000, calibrate.Compaction{Point: 180_000, Margin: 5_000, SummaryTokens: 1877, KeepSteps: 2, Decides: calibrate.DecidesUsage}},
		// 40,000 - 33,000 = 7,000 is not above the margin: compacts at 7,000,
		// the hard limit is the window fraction's.
		{"claude", 40_000, calibrate.Compaction{Point: 7_000, SummaryTokens: 4369, Decides: calibrate.DecidesEstimate}},
		// An agent that does not compact cannot send more than the window.
		{"", 200_000, calibrate.Compaction{Point: 200_000, SummaryTokens: 1877}},
		{"mini-swe-agent", 32_000, calibrate.Compaction{Point: 32_000, SummaryTokens: 1877}},
	} {
		if d := cmp.Diff(tc.want, of(tc.agent, tc.window)); d != "" {
			t.Errorf("%q at %d (-want +got):\n%s", tc.agent, tc.window, d)
		}
	}
	// Every agent counted alike: the count and its margin follow.
	sent := tuning.CompactionCounted(advisor.DefaultConfig(), calibrate.DecidesSent)
	want := calibrate.Compaction{Point: 47_616, Margin: 10_000, SummaryTokens: 1047, KeepTokens: 20_000}
	if d := cmp.Diff(want, sent("pi", 64_000)); d != "" {
		t.Errorf("pi at 64,000 counted as sent (-want +got):\n%s", d)
	}
	usage := tuning.CompactionCounted(advisor.DefaultConfig(), calibrate.DecidesUsage)
	want = calibrate.Compaction{Point: 167_000, Margin: 5_000, SummaryTokens: 4369, Decides: calibrate.DecidesUsage}
	if d := cmp.Diff(want, usage("claude", 200_000)); d != "" {
		t.Errorf("claude at 200,000 counted as usage (-want +got):\n%s", d)
	}
}

// TestReplayHardLimitFromAgent: a pi session's advisor takes its hard limit from
// pi's compaction point, here in a 100,000-token window (100,000 - 16,384 =
// 83,616, less the answer margin, pi counting its last usage: 78,616; advisor's
// TestHardLimitFor), not the window fraction's 90,000: its first hard-limit
// rewrite comes before the session's context (nothing pruned) passes the point,
// and before the agent's own first compaction (step 173), so the step facts'
// whole-history counts are what the advisor counted. (In the default
// 200,000-token window the session's context, counted from the tails its two
// compactions kept, never reaches the hard limit.) Its calibrate.Calls
// (tuning.Calls) names the agent and the calls that start a turn
// (replay.StepFacts.Prompt): counted from the raw file by a Python pass over its
// message lines (an assistant message is a model call, prompted when a user
// message with text came since the previous one), 484 calls, 54 of them
// prompted, the first among them.
func TestReplayHardLimitFromAgent(t *testing.T) {
	src, err := replay.Load("../../shared/sessions/pi/before-compaction.jsonl", true)
	if err != nil {
		t.Fatal(err)
	}
	cfg := advisor.DefaultConfig()
	cfg.ContextWindow = 100_000
	rec, err := (&replay.Replayer{Config: cfg, Scorer: lexical.New(), Lenient: true}).Replay(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	calls := tuning.Calls(rec)
	if calls.Agent != advisor.AgentPi {
		t.Errorf("calibrate session's agent %q, want pi", calls.Agent)
	}
	prompted := 0
	for _, p := range calls.TurnStart {
		if p {
			prompted++
		}
	}
	if len(calls.TurnStart) != 484 || prompted != 54 || !calls.TurnStart[0] {
		t.Errorf("TurnStart: %d calls, %d start a turn; want 484, 54, the first among them", len(calls.TurnStart), prompted)
	}
	for _, s := range rec.StepFacts {
		if s.RewriteReason == "hard-limit" {
			if s.Step >= 174 || s.ContextTokens > 83_616 || s.AppliedTokens > 78_616 {
				t.Errorf("first hard-limit rewrite at step %d with %d tokens (%d after it), past pi's point", s.Step, s.ContextTokens, s.AppliedTokens)
			}
			return
		}
	}
	t.Error("no hard-limit rewrite in a session whose context reaches 132,582 tokens before its first compaction")
}
