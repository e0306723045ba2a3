package advisor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
)

// The one table of compaction points (issue 31), each worked out by hand from
// docs/DESIGN.md's table: Claude Code window - 20k - 13k; Codex 90%; pi window -
// 16,384; Gemini CLI 50%; opencode window - 20,000. Overrides replace a row.
func TestCompactionPoints(t *testing.T) {
	tests := []struct {
		agent    string
		override map[string]advisor.CompactionPoint
		window   int
		want     int
	}{
		{"claude", nil, 200_000, 167_000},
		{"claude", nil, 1_000_000, 967_000},
		{"codex", nil, 272_000, 244_800},
		{"codex", nil, 200_000, 180_000},
		{"pi", nil, 200_000, 183_616},
		{"gemini", nil, 1_000_000, 500_000},
		{"opencode", nil, 200_000, 180_000},
		// model_auto_compact_token_limit = 200,000 under 90% of 272,000.
		{"codex", map[string]advisor.CompactionPoint{"codex": {Fraction: 0.9, Tokens: 200_000}}, 272_000, 200_000},
		// A fraction row: 70% of the window. (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=70 is
		// 70% of the window less 20,000 in 2.1.332, a tokens row: docs/CONFIG.md.)
		{"claude", map[string]advisor.CompactionPoint{"claude": {Fraction: 0.7}}, 200_000, 140_000},
		// An agent the table does not have.
		{"aider", map[string]advisor.CompactionPoint{"aider": {Reserve: 50_000}}, 200_000, 150_000},
	}
	for _, tt := range tests {
		cfg := advisor.DefaultConfig()
		cfg.ContextWindow, cfg.CompactionPoints, cfg.Agent = tt.window, tt.override, tt.agent
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: %v", tt.agent, err)
		}
		p, ok := cfg.PointOf(tt.agent)
		if !ok || p.At(tt.window) != tt.want {
			t.Errorf("%s at %d (override %v): point %d, %v; want %d", tt.agent, tt.window, tt.override, p.At(tt.window), ok, tt.want)
		}
		if p.Source == "" && tt.override == nil {
			t.Errorf("%s: the table's row names no source", tt.agent)
		}
	}
	for _, name := range []string{"claude", "codex", "pi", "gemini", "opencode"} {
		if _, ok := advisor.CompactionPoints[name]; !ok {
			t.Errorf("the table has no row for %s (wrap's agent)", name)
		}
	}
}

// The hard limit is the point less the larger of compaction_margin (10,000) and
// the largest step growth; a request's trigger is the point; an unknown agent gets
// the window fraction (0.9 x 200,000).
func TestHardLimitFor(t *testing.T) {
	cfg := advisor.DefaultConfig()
	tests := []struct {
		agent           string
		trigger, growth int
		want            advisor.Limit
	}{
		{"claude", 0, 0, advisor.Limit{Point: 167_000, Margin: 10_000, Tokens: 157_000, Source: "agent:claude"}},
		{"claude", 0, 15_000, advisor.Limit{Point: 167_000, Margin: 15_000, Tokens: 152_000, Source: "agent:claude"}},
		{"claude", 150_000, 0, advisor.Limit{Point: 150_000, Margin: 10_000, Tokens: 140_000, Source: "trigger"}},
		{"", 120_000, 0, advisor.Limit{Point: 120_000, Margin: 10_000, Tokens: 110_000, Source: "trigger"}},
		{"", 0, 0, advisor.Limit{Tokens: 180_000, Source: "window-fraction"}},
		{"nobody", 0, 0, advisor.Limit{Tokens: 180_000, Source: "window-fraction"}},
		// A step that grew more than the point: no point left above the margin.
		{"claude", 0, 170_000, advisor.Limit{Tokens: 180_000, Source: "window-fraction (claude compacts at 167000, under the margin)"}},
		// Agents that count their last usage keep room for the answer alone
		// (5,000), whatever a step grew: pi at 200,000 - 16,384, Gemini CLI at
		// half the window, Codex at 90%, opencode at the window less 20,000.
		{"pi", 0, 0, advisor.Limit{Point: 183_616, Margin: 5_000, Tokens: 178_616, Source: "agent:pi"}},
		{"pi", 0, 30_000, advisor.Limit{Point: 183_616, Margin: 5_000, Tokens: 178_616, Source: "agent:pi"}},
		{"gemini", 0, 120_000, advisor.Limit{Point: 100_000, Margin: 5_000, Tokens: 95_000, Source: "agent:gemini"}},
		{"codex", 0, 0, advisor.Limit{Point: 180_000, Margin: 5_000, Tokens: 175_000, Source: "agent:codex"}},
		{"opencode", 0, 0, advisor.Limit{Point: 180_000, Margin: 5_000, Tokens: 175_000, Source: "agent:opencode"}},
		// A trigger is the provider's, counted on the request: the growth margin.
		{"pi", 150_000, 0, advisor.Limit{Point: 150_000, Margin: 10_000, Tokens: 140_000, Source: "trigger"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, cfg.HardLimitFor(tt.agent, tt.trigger, tt.growth)); diff != "" {
			t.Errorf("HardLimitFor(%q, %d, %d) (-want +got):\n%s", tt.agent, tt.trigger, tt.growth, diff)
		}
	}
	cfg.AnswerMargin = 2_000
	if got := cfg.HardLimitFor("pi", 0, 0).Tokens; got != 181_616 {
		t.Errorf("answer_margin 2,000: pi's hard limit %d; want 183,616 - 2,000 = 181616", got)
	}
}

// An unknown agent, a row that sets nothing or is out of range, and a margin out
// of range are config errors naming the field, never a silent change of the hard
// limit.
func TestCompactionConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		json string
		want string
	}{
		{"unknown agent", `{"agent": "aider"}`, `agent: unknown agent "aider"; known agents: claude, codex, gemini, opencode, pi`},
		{"empty row", `{"compaction_points": {"codex": {}}}`, "compaction_points[codex]: sets none of fraction, reserve_tokens, tokens"},
		{"fraction", `{"compaction_points": {"codex": {"fraction": 1.5}}}`, "compaction_points[codex].fraction = 1.5"},
		{"reserve", `{"compaction_points": {"pi": {"reserve_tokens": 300000}}}`, "compaction_points[pi]: reserve_tokens 300000 leaves nothing of the context_window 200000"},
		{"margin", `{"compaction_margin": -1}`, "compaction_margin = -1"},
		{"margin over window", `{"compaction_margin": 200000}`, "compaction_margin = 200000"},
		{"typo", `{"compaction_points": {"pi": {"reserve": 1}}}`, `unknown field "reserve"`},
		{"point under the margin", `{"agent": "claude", "context_window": 40000}`, "agent: claude compacts at 7000 tokens of a context_window of 40000, not above compaction_margin 10000"},
		{"point under the answer margin", `{"agent": "gemini", "context_window": 8000}`, "agent: gemini compacts at 4000 tokens of a context_window of 8000, not above answer_margin 5000"},
		{"answer margin", `{"answer_margin": -1}`, "answer_margin = -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(file, []byte(tt.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := advisor.LoadConfig(file)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadConfig(%s) = %v; want an error with %q", tt.json, err, tt.want)
			}
		})
	}
	// An agent a config row adds is known.
	cfg := advisor.DefaultConfig()
	cfg.Agent, cfg.CompactionPoints = "aider", map[string]advisor.CompactionPoint{"aider": {Fraction: 0.8}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("an agent with its own row: %v", err)
	}
	if err := cfg.CheckAgent("nobody"); !errors.Is(err, advisor.ErrUnknownAgent) {
		t.Errorf("CheckAgent(nobody) = %v; want ErrUnknownAgent", err)
	}
}

// hardLimitConfig is a 20,000-token window whose agent "tiny" compacts at 16,000
// (reserve 4,000), with a margin of 1,000: hard limit 15,000 while no step grows
// more; budget 10,000, low-water mark 8,000. PriceForced stays on (the default):
// past the hard limit the price does not matter. Digests of 64 tokens, as these
// tests were worked out with: 40 stubs of 600-token reads then fit under the mark.
func hardLimitConfig() advisor.Config {
	cfg := advisor.DefaultConfig()
	cfg.ContextWindow, cfg.Agent, cfg.CompactionMargin = 20_000, "tiny", 1_000
	cfg.DigestTokens = 64
	cfg.CompactionPoints = map[string]advisor.CompactionPoint{"tiny": {Reserve: 4_000}}
	cfg.LowWaterFraction = 0.8 // the hand computations' mark: 8,000 of the 10,000 budget
	return cfg
}

// A warm-cache session growing toward the point (issue 31, must show 3): the
// scorer keeps every output (0.9 over the cutoff), so nothing is ever pending;
// stubs go in before the point, the rewrite goes down to the low-water mark
// taking candidates by lowest keep-probability, and no step sends a context over
// the hard limit.
func TestHardLimitGrowingSession(t *testing.T) {
	cfg := hardLimitConfig()
	// Odd files (/src/m1.go, m3, ...) 0.6, even ones 0.9: all over the cutoff.
	sc := &fakeScorer{fn: func(_ int, b cards.Batch) ([]cards.Score, error) {
		out := make([]cards.Score, len(b.Cards))
		for i, c := range b.Cards {
			out[i] = cards.Score{Keep: 0.9, OK: true}
			if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(c.Args, "/src/m"), ".go")); err == nil && n%2 == 1 {
				out[i].Keep = 0.6
			}
		}
		return out, nil
	}}
	steps := simulate(t, newAdvisor(t, cfg, sc, advisor.NewMemoryStore(), newClock()), survey(t, 40))
	rewrites := 0
	for _, st := range steps {
		p := st.plan
		if p.HardLimit != 15_000 || p.HardLimitSource != "agent:tiny" {
			t.Fatalf("step %d: hard limit %d from %q; want 15000 from agent:tiny", p.Step, p.HardLimit, p.HardLimitSource)
		}
		if p.ContextTokens > p.HardLimit {
			t.Fatalf("step %d: context %d sent over the hard limit %d", p.Step, p.ContextTokens, p.HardLimit)
		}
		if p.Rewrite {
			rewrites++
			if p.RewriteReason != "hard-limit" || p.ContextTokens > 8_000 {
				t.Errorf("step %d: rewrite %q to %d tokens; want hard-limit down to the low-water mark 8000", p.Step, p.RewriteReason, p.ContextTokens)
			}
		}
	}
	if rewrites == 0 {
		t.Fatal("no rewrite: the session grew to 24,000 tokens with a hard limit of 15,000")
	}
	// The first rewrite took the lowest keep-probabilities first: the odd files
	// (0.6) before the even ones (0.9).
	var first advisor.Plan
	for _, st := range steps {
		if st.plan.Rewrite {
			first = st.plan
			break
		}
	}
	odd, even, oddKept := 0, 0, 0
	for _, it := range first.Items {
		switch {
		case it.Decision == advisor.DecisionKeep && it.Score == 0.6:
			oddKept++
		case it.Decision != advisor.DecisionPruned:
		case !strings.HasPrefix(it.Reason, "hard limit, score"):
			t.Errorf("%s pruned for %q; want the hard limit's reason", it.Key, it.Reason)
		case it.Score == 0.6:
			odd++
		default:
			even++
		}
	}
	if odd == 0 || even > 0 && oddKept > 0 {
		t.Errorf("first rewrite (step %d) pruned %d outputs at 0.6 (%d kept) and %d at 0.9; want every 0.6 one before any 0.9", first.Step, odd, oddKept, even)
	}
}

// A session that arrives already past the point (a proxy started mid-session) is
// pruned at once, at its first step, with no scorer at all: candidates not scored
// yet go, oldest first, down to the low-water mark.
func TestHardLimitStartsPast(t *testing.T) {
	cfg := hardLimitConfig()
	s := survey(t, 40)
	p, err := newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), newClock()).Advise(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Rewrite || p.RewriteReason != "hard-limit" || p.ContextTokens > 8_000 {
		t.Fatalf("first step: rewrite %v (%q), context %d; want a hard-limit rewrite to <= 8000", p.Rewrite, p.RewriteReason, p.ContextTokens)
	}
	// The oldest read goes first among equals (all unscored).
	if it := item(t, p, p.Items[0].Key); it.Decision != advisor.DecisionPruned || it.Reason != "hard limit, not scored yet" {
		t.Errorf("oldest output: %s (%q); want pruned, hard limit, not scored yet", it.Decision, it.Reason)
	}
}

// The trigger a request asks the provider to compact at is the point; an agent
// that compacts under the budget (Gemini CLI at half the window) lowers the budget
// to the hard limit.
func TestHardLimitTriggerAndBudget(t *testing.T) {
	cfg := advisor.DefaultConfig()
	cfg.ContextWindow = 20_000
	cfg.CompactionMargin = 1_000
	s := survey(t, 3)
	s.CompactTrigger = 12_000
	p, err := newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), nil).Advise(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if p.HardLimit != 11_000 || p.HardLimitSource != "trigger" {
		t.Errorf("with a trigger of 12,000: hard limit %d from %q; want 11000 from trigger", p.HardLimit, p.HardLimitSource)
	}
	cfg.Agent, cfg.AnswerMargin = "gemini", 1_000
	p, err = newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), nil).Advise(context.Background(), survey(t, 3))
	if err != nil {
		t.Fatal(err)
	}
	// 0.5 x 20,000 - 1,000 (Gemini CLI counts its last usage: the answer
	// margin) = 9,000, under the budget of 10,000.
	if p.HardLimit != 9_000 || p.Budget != 9_000 {
		t.Errorf("gemini: hard limit %d, budget %d; want both 9000", p.HardLimit, p.Budget)
	}
}

// The tool definitions a request carries count toward the agent's point but are
// in no message: the hard limit is lowered by them (e2e TestClaudeCompaction:
// Claude Code's 11,087 tokens of tools took it past its point through the proxy
// before). The same session under the hard limit by its messages alone is pruned
// once its tools are counted, down to the low-water mark of the lowered limit.
func TestHardLimitLessToolTokens(t *testing.T) {
	cfg := hardLimitConfig() // point 16,000, margin 1,000: hard limit 15,000
	cfg.Budget = cfg.ContextWindow
	p, err := newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), newClock()).Advise(context.Background(), survey(t, 20))
	if err != nil {
		t.Fatal(err)
	}
	if p.Rewrite || p.HardLimit != 15_000 || p.ToolTokens != 0 || p.ContextTokens <= 10_000 || p.ContextTokens >= 15_000 {
		t.Fatalf("without tools: rewrite %v, hard limit %d, tool tokens %d, context %d; want no rewrite, 15000, 0, a context in (10000, 15000)",
			p.Rewrite, p.HardLimit, p.ToolTokens, p.ContextTokens)
	}
	full := p.ContextTokens
	s := survey(t, 20)
	s.ToolTokens = 5_000
	p, err = newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), newClock()).Advise(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if p.HardLimit != 10_000 || p.ToolTokens != 5_000 || p.HardLimitSource != "agent:tiny" {
		t.Errorf("with 5,000 tokens of tools: hard limit %d (%q), tool tokens %d; want 10000 (agent:tiny), 5000", p.HardLimit, p.HardLimitSource, p.ToolTokens)
	}
	// The low-water mark is 0.8 of the lowered limit (the budget is lowered to it).
	if !p.Rewrite || p.RewriteReason != "hard-limit" || p.ContextTokens > 8_000 {
		t.Errorf("with 5,000 tokens of tools: rewrite %v (%q), context %d of %d; want a hard-limit rewrite to <= 8000", p.Rewrite, p.RewriteReason, p.ContextTokens, full)
	}
}

// The hard limit's margin is the largest growth of the last growth_steps steps
// (docs/EVALUATION.md, "The hard limit's margin"): one read of about 6,000 tokens
// (a growth of 6,023) lowers the hard limit of hardLimitConfig (point 16,000,
// least margin 1,000) to 9,977 for the five steps whose window holds it, and then
// it is 15,000 again; with growth_steps 0 it stays low for the rest of the session.
func TestHardLimitGrowthWindow(t *testing.T) {
	c := newChat("Read the big file, then the small ones")
	c.read("", "/src/big.go", filler("big", 6000))
	for i := 1; i <= 9; i++ {
		c.read("", fmt.Sprintf("/src/s%d.go", i), filler(fmt.Sprintf("s%d", i), 100))
	}
	s := c.session(t, "growth.json")
	limits := func(n int) []int {
		cfg := hardLimitConfig()
		cfg.GrowthSteps = n
		var out []int
		for _, st := range simulate(t, newAdvisor(t, cfg, nil, advisor.NewMemoryStore(), newClock()), s) {
			out = append(out, st.plan.HardLimit)
		}
		return out
	}
	five, all := limits(5), limits(0)
	low := five[1] // the step that sees the big read
	if low >= 15_000 || low < 9_000 {
		t.Fatalf("hard limit after the big read %d; want about 16,000 less its growth", low)
	}
	for i, l := range five {
		switch {
		case i >= 1 && i <= 5 && l != low:
			t.Errorf("step %d: hard limit %d; want %d for five steps after the read", i+1, l, low)
		case i > 5 && l != 15_000:
			t.Errorf("step %d: hard limit %d; want 15000 once the read is out of the window", i+1, l)
		}
	}
	if all[len(all)-1] != low {
		t.Errorf("growth_steps 0: last hard limit %d; want %d, the read's, to the end", all[len(all)-1], low)
	}
}
