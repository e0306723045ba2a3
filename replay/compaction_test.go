package replay_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/internal/testbodies"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

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
// outputs before the block are never candidates nor pruned, and the step facts
// record the block as a compaction (StepFacts.CompactionDropped: the tokens before
// it, at least the two early reads'), through which calibrate prices every pruner,
// while ContextTokens keeps counting the whole history (replay-13); the same
// session with a text block there records none.
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
	dropped := 0
	for _, st := range with {
		if st.CompactionDropped > 0 {
			if dropped > 0 {
				t.Errorf("step %d records a second compaction", st.Step)
			}
			dropped = st.CompactionDropped
		}
	}
	for _, st := range without {
		if st.CompactionDropped != 0 {
			t.Errorf("without the block step %d records a compaction dropping %d tokens", st.Step, st.CompactionDropped)
		}
	}
	last := len(with) - 1
	if dropped < early || len(without) != len(with) || without[last].ContextTokens-(with[last].ContextTokens-dropped) < early {
		t.Errorf("the block drops %d tokens; last step's context %d with it (whole history), %d without; want the block to drop the early reads' %d tokens at least",
			dropped, with[last].ContextTokens, without[last].ContextTokens, early)
	}
}

// zeroKeep scores every card 0: prune whatever may be pruned.
var zeroKeep = testkit.Const("zero", 0)
