package advisor_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/internal/testbodies"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// compactedBody is testbodies.AnthropicCompacted with reads of about 1,500 tokens.
func compactedBody(t *testing.T, compacted bool) []byte {
	t.Helper()
	b, err := testbodies.AnthropicCompacted(compacted, func(path string) string { return filler(path, 1500) })
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
						want -= o.Tokens - tokencount.Count(stub)
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
