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

// countedFrom sums the context of st's messages from message from on, from the
// messages' own token counts and the stubs in st's plan.
func countedFrom(st step, from int) int {
	n := 0
	for _, m := range st.in[from:] {
		n += m.Tokens
		for _, o := range m.Outputs {
			if stub, ok := st.plan.Stubs[o.Key]; ok {
				n -= o.Tokens - tokencount.Count(stub)
			}
		}
	}
	return n
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
			// The context counts from message 5.
			from := 0
			if compacted {
				from = 5
			}
			if want := countedFrom(last, from); last.plan.ContextTokens != want {
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

// The agent's own compaction, as a transcript records it (Message.AgentCompaction
// with the tail it kept, CompactionKept): the outputs before the kept tail are
// never pruned (the agent no longer sends them), the context the advisor counts
// starts at the tail, and the outputs from the tail on are pruned as usual. The
// same session without the record prunes the early outputs too.
func TestAgentCompaction(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprintf("recorded %v", recorded), func(t *testing.T) {
			c := newChat("fix the parser")
			for _, p := range []string{"a.go", "b.go", "c.go"} {
				c.read("reading "+p, p, filler(p, 1500))
			}
			c.msgs = append(c.msgs, map[string]any{"role": "user", "content": "Summary of the work so far: the parser reads a.go, b.go and c.go."})
			for _, p := range []string{"d.go", "e.go", "f.go"} {
				c.read("reading "+p, p, filler(p, 1500))
			}
			for i := 0; i < 4; i++ {
				c.say(fmt.Sprintf("thinking %d", i))
			}
			s := c.session(t, "agent-compaction.json")
			// Messages: 0 task; 1-6 the three reads (call, result); 7 the summary.
			sum := s.Messages[7]
			if sum.Role != transcript.RoleUser || !strings.HasPrefix(sum.Text, "Summary") {
				t.Fatalf("message 7 is %s %q; want the summary", sum.Role, sum.Text)
			}
			if recorded {
				sum.Meta, sum.AgentCompaction, sum.CompactionKept = true, true, 2 // keeps the read of c.go
			}
			cfg := advisor.DefaultConfig()
			cfg.Budget = 3000
			cfg.PriceForced = false
			steps := simulate(t, newAdvisor(t, cfg, constScorer(0), advisor.NewMemoryStore(), newClock()), s)
			last := steps[len(steps)-1]
			keys := []string{"c1", "c2", "c3", "c4"}
			for _, key := range keys[:2] {
				it := item(t, last.plan, key)
				if recorded && (it.Decision != advisor.DecisionProtected || it.Reason != "before the agent's compaction in message 5") {
					t.Errorf("%s is %s (%s); want protected before the agent's compaction", key, it.Decision, it.Reason)
				}
				if !recorded && it.Decision != advisor.DecisionPruned {
					t.Errorf("without the record %s is %s (%s); want pruned", key, it.Decision, it.Reason)
				}
			}
			for _, key := range keys[2:] {
				if it := item(t, last.plan, key); it.Decision != advisor.DecisionPruned {
					t.Errorf("%s, in the kept tail or after it, is %s (%s); want pruned", key, it.Decision, it.Reason)
				}
			}
			// The context counts from message 5, the kept tail's first.
			from := 0
			if recorded {
				from = 5
			}
			if want := countedFrom(last, from); last.plan.ContextTokens != want {
				t.Errorf("context %d tokens; want %d", last.plan.ContextTokens, want)
			}
		})
	}
}
