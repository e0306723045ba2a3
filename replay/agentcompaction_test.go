package replay

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestAgentCompactionFacts replays every real session of ../shared/sessions and
// checks the compactions its StepFacts record (CompactionDropped, CompactionSummary)
// against the transcript walked here: before the model call that follows an
// agent's compaction message, the tokens of the messages before the tail it
// kept (Message.CompactionKept) and the summary message's tokens. Three
// compactions drop history there (Claude Code's 3af9b1a7 once, pi's
// before-compaction.jsonl twice); pi's session.jsonl compacts after its last
// call, which no step records. ContextTokens counts the whole history at every
// step, through the compactions (the advisor counts from their kept tails).
func TestAgentCompactionFacts(t *testing.T) {
	r := &Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New(), Lenient: true}
	type fact struct{ Dropped, Summary int }
	total := 0
	for _, src := range sharedSources(t) {
		want := map[int]fact{}
		step := 1
		var whole []int // whole[s-1]: the tokens of every message before call s
		sum := 0
		for _, m := range src.Session.Messages {
			if m.Role == transcript.RoleAssistant {
				whole = append(whole, sum)
				sum += m.Tokens
				step++
				continue
			}
			sum += m.Tokens
			if !m.AgentCompaction {
				continue
			}
			dropped := 0
			for _, p := range src.Session.Messages[:m.Index-m.CompactionKept] {
				dropped += p.Tokens
			}
			if dropped > 0 && step <= src.Session.Steps() {
				want[step] = fact{dropped, m.Tokens}
			}
		}
		rec, err := r.Replay(context.Background(), src)
		if err != nil {
			t.Fatalf("%s: %v", src.Path, err)
		}
		got := map[int]fact{}
		for i, s := range rec.StepFacts {
			if s.ContextTokens != whole[i] {
				t.Errorf("%s: step %d: ContextTokens %d, want the whole history's %d", filepath.Base(src.Path), s.Step, s.ContextTokens, whole[i])
			}
			if s.CompactionDropped != 0 || s.CompactionSummary != 0 {
				got[s.Step] = fact{s.CompactionDropped, s.CompactionSummary}
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: recorded compactions by step (-transcript +replay):\n%s", filepath.Base(src.Path), d)
		}
		total += len(got)
	}
	if total != 3 {
		t.Errorf("%d recorded compactions in ../shared/sessions, want 3", total)
	}
}
