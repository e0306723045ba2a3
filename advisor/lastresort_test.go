package advisor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// The last resort (docs/EVALUATION.md, "The last resort before a compaction"):
// three reads of about 6,000 tokens each, all in the last K = 3 steps, take the
// context past the hard limit of 15,000 (hardLimitConfig) with no candidate to
// prune. With Config.LastResort the forced rewrite stubs the protected reads,
// oldest first (none scored), down to the low-water mark of 8,000: the first two;
// the newest stays. Without it nothing can go; nor when the agent keeps its newest
// 20,000 tokens through a compaction (nothing would be lost to it).
func TestLastResort(t *testing.T) {
	c := newChat("Read the three files")
	for i := 1; i <= 3; i++ {
		c.read("", fmt.Sprintf("/src/big%d.go", i), filler(fmt.Sprintf("big%d", i), 6000))
	}
	s := c.session(t, "big.json")
	decisions := func(cfg advisor.Config) ([]string, advisor.Plan) {
		p, err := newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), newClock()).Advise(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range p.Items {
			out = append(out, string(it.Decision))
		}
		return out, p
	}
	cfg := hardLimitConfig()
	got, p := decisions(cfg)
	if d := cmp.Diff([]string{"pruned", "pruned", "protected"}, got); d != "" {
		t.Fatalf("with the last resort (-want +got):\n%s", d)
	}
	if !p.Rewrite || p.RewriteReason != "hard-limit" || p.ContextTokens > 8_000 {
		t.Errorf("rewrite %v (%q) to %d tokens; want a hard-limit rewrite to <= 8000", p.Rewrite, p.RewriteReason, p.ContextTokens)
	}
	if r := p.Items[0].Reason; !strings.HasPrefix(r, "hard limit, last resort: recent (protected through step") {
		t.Errorf("reason %q; want the last resort's", r)
	}
	off := hardLimitConfig()
	off.LastResort = false
	if got, p := decisions(off); !cmp.Equal(got, []string{"protected", "protected", "protected"}) || p.Rewrite {
		t.Errorf("without the last resort: %v, rewrite %v; want every read protected, no rewrite", got, p.Rewrite)
	}
	tail := hardLimitConfig()
	tail.CompactionPoints = map[string]advisor.CompactionPoint{"tiny": {Reserve: 4_000, KeepTokens: 20_000}}
	if got, _ := decisions(tail); !cmp.Equal(got, []string{"protected", "protected", "protected"}) {
		t.Errorf("an agent keeping its newest 20,000 tokens: %v; want every read protected", got)
	}
}

// The last resort acts only past the point less the configured margin, not past a
// hard limit lowered by one large step's growth: three reads of about 4,500 tokens
// in the last three steps take the context to about 13,600 tokens, past the hard
// limit (16,000 less the 4,500-token growth) but under 15,000 (16,000 less the
// 1,000-token margin), and nothing is stubbed; the plan says why.
func TestLastResortOnlyNearThePoint(t *testing.T) {
	c := newChat("Read the three files")
	for i := 1; i <= 3; i++ {
		c.read("", fmt.Sprintf("/src/mid%d.go", i), filler(fmt.Sprintf("mid%d", i), 4500))
	}
	steps := simulate(t, newAdvisor(t, hardLimitConfig(), nil, advisor.NewMemoryStore(), newClock()), c.session(t, "mid.json"))
	p := steps[len(steps)-1].plan
	if p.ContextTokens <= p.HardLimit || p.ContextTokens >= 15_000 {
		t.Fatalf("context %d, hard limit %d: want past the hard limit and under 15,000", p.ContextTokens, p.HardLimit)
	}
	for _, it := range p.Items {
		if it.Decision == advisor.DecisionPruned {
			t.Errorf("%s pruned for %q: the last resort acted short of the point less the margin", it.Key, it.Reason)
		}
	}
	if p.Waiting != "past the hard limit, but no candidate is left to prune" {
		t.Errorf("waiting %q", p.Waiting)
	}
}
