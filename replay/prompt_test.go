package replay_test

import (
	"context"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// StepFacts.Prompt marks the model calls a user prompt came before. In pi's
// before-compaction.jsonl, counted from the raw file (a Python pass over its
// message lines: an assistant message is a model call, and a call is prompted
// when a user message with text came since the previous one): 484 calls, 54 of
// them prompted, the first among them.
func TestReplayPrompts(t *testing.T) {
	src, err := replay.Load("../../shared/sessions/pi/before-compaction.jsonl", true)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := (&replay.Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New(), Lenient: true}).Replay(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	prompted := 0
	for _, s := range rec.StepFacts {
		if s.Prompt {
			prompted++
		}
	}
	if len(rec.StepFacts) != 484 || prompted != 54 || !rec.StepFacts[0].Prompt {
		t.Errorf("%d steps, %d prompted, the first prompted: %v; want 484, 54, true", len(rec.StepFacts), prompted, rec.StepFacts[0].Prompt)
	}
}
