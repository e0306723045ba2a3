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
