package advisor_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// A rewrite forced by the hard limit that cannot bring the context to it, while
// the context is still under the agent's point, must pay (docs/DESIGN.md step
// 6(c); planner.Input.Point): hardLimitConfig's agent compacts at 16,000, hard
// limit 15,000. The context grows by todo lists (an excluded tool: never a
// candidate) of about 300 tokens a step; one 210-token read, made near 14,000,
// is the only candidate once its 3 protected steps are over, with the context
// past the hard limit, and stubbing it frees about 160 tokens (the last resort
// is off). The steps whose context lies past 15,000 and at or under 16,000 make
// no rewrite and say why, naming the point; the first step that would send more
// than 16,000 rewrites whatever it costs, and sends less.
func TestFutileHardLimitRewrite(t *testing.T) {
	cfg := hardLimitConfig()
	cfg.LastResort = false
	c := newChat("Survey the code base")
	todo := func(i int) { c.call("", "TodoWrite", fmt.Sprintf(`{"n":%d}`, i), filler(fmt.Sprintf("t%d", i), 300)) }
	for i := 1; i <= 45; i++ {
		todo(i)
	}
	c.read("", "/src/small.go", filler("small", 210))
	for i := 46; i <= 60; i++ {
		todo(i)
	}
	steps := simulate(t, newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), newClock()), c.session(t, "futile.json"))
	waited, rewrote := 0, 0
	for _, st := range steps {
		p := st.plan
		switch {
		case p.Rewrite && rewrote == 0:
			// The context this step would have sent is past the point: the plan
			// gives the context after the rewrite.
			rewrote = p.Step
			if p.RewriteReason != "hard-limit" || waited == 0 || p.ContextTokens > 16_000 {
				t.Errorf("step %d: rewrite %q to %d tokens after %d waiting steps; want a hard-limit rewrite under the point after some", p.Step, p.RewriteReason, p.ContextTokens, waited)
			}
		case p.Rewrite:
			t.Errorf("step %d: a second rewrite (%q)", p.Step, p.RewriteReason)
		case strings.Contains(p.Waiting, "the agent's point (16000) is not reached"):
			waited++
			if p.ContextTokens <= p.HardLimit || p.ContextTokens > 16_000 {
				t.Errorf("step %d: waiting for the point with a context of %d (hard limit %d)", p.Step, p.ContextTokens, p.HardLimit)
			}
		}
	}
	if waited == 0 || rewrote == 0 {
		t.Fatalf("%d steps waited for the point, the rewrite came at step %d; want both", waited, rewrote)
	}
}
