package advisor_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// compactedBody is an Anthropic Messages request body: two reads, then (message 5)
// the assistant message the provider's compaction block opens when compacted is
// set (a plain text block otherwise), then eight more reads.
func compactedBody(t *testing.T, compacted bool) []byte {
	t.Helper()
	var msgs []map[string]any
	n := 0
	read := func(path string) {
		n++
		id := fmt.Sprintf("toolu_%d", n)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Read", "input": map[string]any{"file_path": path}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": filler(path, 1500)}}})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "Port the parser to the new API."})
	read("/src/a.go")
	read("/src/b.go")
	first := map[string]any{"type": "text", "text": "Summary so far: a.go and b.go read."}
	if compacted {
		first = map[string]any{"type": "compaction", "content": "Summary so far: a.go and b.go read."}
	}
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": []any{first, map[string]any{"type": "text", "text": "Going on."}}},
		map[string]any{"role": "user", "content": "Carry on."})
	for i := range 8 {
		read(fmt.Sprintf("/src/c%d.go", i))
	}
	b, err := json.Marshal(map[string]any{"model": "claude-test", "max_tokens": 1024, "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A provider's compaction block: the outputs before it are never pruned, however
// old and low-scored, and the context the advisor counts starts at it; the outputs
// after it are pruned as usual, and the block goes out byte for byte. The same
// session with a text block there prunes the early outputs too.
func TestProviderCompaction(t *testing.T) {
	for _, compacted := range []bool{true, false} {
		t.Run(fmt.Sprintf("compaction %v", compacted), func(t *testing.T) {
			body := compactedBody(t, compacted)
			s, err := transcript.Read("body.json", body, transcript.Options{Format: transcript.FormatAnthropic})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Messages[5].Compaction; got != compacted {
				t.Fatalf("message 5 Compaction = %v; want %v", got, compacted)
			}
			cfg := advisor.DefaultConfig()
			cfg.Budget = 3000
			cfg.PriceForced = false
			steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), s)
			last := steps[len(steps)-1]
			for _, key := range []string{"toolu_1", "toolu_2"} {
				it := item(t, last.plan, key)
				if compacted && (it.Decision != advisor.DecisionProtected || it.Reason != "before the provider's compaction in message 5") {
					t.Errorf("%s is %s (%s); want protected before the compaction", key, it.Decision, it.Reason)
				}
				if !compacted && it.Decision != advisor.DecisionPruned {
					t.Errorf("without a compaction %s is %s (%s); want pruned", key, it.Decision, it.Reason)
				}
			}
			if it := item(t, last.plan, "toolu_3"); it.Decision != advisor.DecisionPruned {
				t.Errorf("toolu_3, after the compaction, is %s (%s); want pruned", it.Decision, it.Reason)
			}
			// The context counts from message 5: summed here from the messages' own
			// token counts and the stubs in the plan.
			want := 0
			for i, m := range last.in {
				if i < 5 && compacted {
					continue
				}
				want += m.Tokens
				for _, o := range m.Outputs {
					if stub, ok := last.plan.Stubs[o.Key]; ok {
						want -= o.Tokens - transcript.CountTokens(stub)
					}
				}
			}
			if last.plan.ContextTokens != want {
				t.Errorf("context %d tokens; want %d", last.plan.ContextTokens, want)
			}
			out, err := s.Rewrite(last.plan.Stubs)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := gjson.GetBytes(body, "messages.5").Raw, gjson.GetBytes(out, "messages.5").Raw; a != b || !strings.Contains(b, `"type":"`) {
				t.Errorf("message 5 went out as %.80s; want it as sent, %.80s", b, a)
			}
		})
	}
}
