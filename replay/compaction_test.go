package replay_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/internal/testbodies"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// TestCompactionOf checks calibrate's compaction model against the table's rows,
// worked by hand.
func TestCompactionOf(t *testing.T) {
	of := replay.CompactionOf(advisor.DefaultConfig())
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
// below that, and calibrate's session names the agent.
func TestReplayHardLimitFromAgent(t *testing.T) {
	src, err := replay.Load("../../shared/sessions/pi/before-compaction.jsonl", true)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := (&replay.Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New(), Lenient: true}).Replay(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if a := rec.CalibrateSession().Agent; a != advisor.AgentPi {
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

// compactedAnthropicBody is testbodies.AnthropicCompacted with reads of 400
// numbered lines.
func compactedAnthropicBody(t *testing.T, compacted bool) []byte {
	t.Helper()
	b, err := testbodies.AnthropicCompacted(compacted, func(path string) string {
		var text strings.Builder
		for i := range 400 {
			fmt.Fprintf(&text, "%s line %d: value_%d = %d\n", path, i, i*7, i*i)
		}
		return text.String()
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplayProviderCompaction (issue 38, "the same in replay"): a transcript that
// holds a provider's compaction block is replayed as the provider reads it: the
// outputs before the block are never candidates nor pruned, and the context each
// later step counts starts at the block, so it is smaller than the same session's
// with a text block there by the two reads' tokens at least.
func TestReplayProviderCompaction(t *testing.T) {
	recs := map[bool]*replay.Record{}
	for _, compacted := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "body.json")
		if err := os.WriteFile(path, compactedAnthropicBody(t, compacted), 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := replay.Load(path, false)
		if err != nil {
			t.Fatal(err)
		}
		cfg := advisor.DefaultConfig()
		cfg.Budget, cfg.PriceForced = 3000, false
		rec, err := (&replay.Replayer{Config: cfg, Scorer: zeroKeep}).Replay(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		recs[compacted] = rec
	}
	early := 0
	for _, f := range recs[true].Outputs {
		if f.Key != "toolu_1" && f.Key != "toolu_2" {
			continue
		}
		early += f.Tokens
		if f.CandidateFrom != 0 || f.PendingAt != 0 || f.PrunedAt != 0 {
			t.Errorf("%s, before the compaction: candidate from %d, pending at %d, pruned at %d; want never", f.Key, f.CandidateFrom, f.PendingAt, f.PrunedAt)
		}
	}
	pruned := 0
	for _, f := range recs[false].Outputs {
		if (f.Key == "toolu_1" || f.Key == "toolu_2") && f.PrunedAt != 0 {
			pruned++
		}
	}
	if pruned == 0 {
		t.Error("without the compaction block neither early read was pruned: the test shows nothing")
	}
	with, without := recs[true].StepFacts, recs[false].StepFacts
	last := len(with) - 1
	if len(without) != len(with) || without[last].ContextTokens-with[last].ContextTokens < early {
		t.Errorf("last step's context %d with the block, %d without; want it smaller by the early reads' %d tokens at least",
			with[last].ContextTokens, without[last].ContextTokens, early)
	}
}

// zeroKeep scores every card 0: prune whatever may be pruned.
var zeroKeep = testkit.Const("zero", 0)
