package advisor_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/backoff"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/prices"
)

// The defaults are docs/DESIGN.md's defaults table, row by row.
func TestDefaultConfigIsDesignTable(t *testing.T) {
	cfg := advisor.DefaultConfig()
	sched, err := backoff.Parse(cfg.Schedule)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Setting string
		Value   any
	}
	got := []row{
		{"context window (tokens)", cfg.ContextWindow},
		{"budget (fraction of window)", cfg.BudgetFraction},
		{"budget (tokens)", cfg.BudgetTokens()},
		{"hard limit (fraction of window)", cfg.HardLimitFraction},
		{"hard limit (tokens)", cfg.HardLimitTokens()},
		{"protected recent steps K", cfg.ProtectedSteps},
		{"minimum candidate size (tokens)", cfg.MinCandidateTokens},
		{"cutoff", cfg.Cutoff},
		{"rewrite threshold (fraction of budget)", cfg.RewriteFraction},
		{"cache TTL", time.Duration(cfg.CacheTTL)},
		{"ask back-off (steps)", sched.Gaps()},
		{"card head (characters)", cards.HeadChars},
		{"card tail (characters)", cards.TailChars},
		{"recall tool", cfg.RecallTool},
	}
	want := []row{
		{"context window (tokens)", 200_000},
		{"budget (fraction of window)", 0.5},
		{"budget (tokens)", 100_000},
		{"hard limit (fraction of window)", 0.9},
		{"hard limit (tokens)", 180_000},
		{"protected recent steps K", 3},
		{"minimum candidate size (tokens)", 200},
		{"cutoff", 0.25},
		{"rewrite threshold (fraction of budget)", 0.05},
		{"cache TTL", 5 * time.Minute},
		{"ask back-off (steps)", []int{3, 6, 12, 24}},
		{"card head (characters)", 300},
		{"card tail (characters)", 100},
		{"recall tool", "recall"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
	// Excluded by default: memory, todo, skill and task/subagent tools.
	for _, tool := range []string{"memory", "Memory", "mcp__memory__read", "TodoWrite", "todoread", "write_todos",
		"update_plan", "Skill", "Task", "agent", "spawn_subagent", "think"} {
		if !cfg.Excluded(tool) {
			t.Errorf("%s is not excluded by default", tool)
		}
	}
	for _, tool := range []string{"Read", "Bash", "Edit", "grep", "apply_patch"} {
		if cfg.Excluded(tool) {
			t.Errorf("%s is excluded by default", tool)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

// Validate names every bad field by its JSON key.
func TestValidateNamesBadFields(t *testing.T) {
	tests := []struct {
		name   string
		change func(*advisor.Config)
		want   []string // substrings of the error
	}{
		{"window", func(c *advisor.Config) { c.ContextWindow = 10 }, []string{"context_window = 10"}},
		{"budget fraction", func(c *advisor.Config) { c.BudgetFraction = 0 }, []string{"budget_fraction = 0"}},
		{"budget over window", func(c *advisor.Config) { c.Budget = 300_000 }, []string{"budget = 300000: must be at most context_window"}},
		{"negative budget", func(c *advisor.Config) { c.Budget = -1 }, []string{"budget = -1"}},
		{"hard limit under budget", func(c *advisor.Config) { c.HardLimitFraction = 0.4 }, []string{"hard_limit_fraction = 0.4"}},
		{"protected steps", func(c *advisor.Config) { c.ProtectedSteps = -1 }, []string{"protected_steps = -1"}},
		{"min size", func(c *advisor.Config) { c.MinCandidateTokens = 0 }, []string{"min_candidate_tokens = 0: must be at least 1"}},
		{"cutoff", func(c *advisor.Config) { c.Cutoff = 1.5 }, []string{"cutoff = 1.5: must be at most 1"}},
		{"rewrite fraction", func(c *advisor.Config) { c.RewriteFraction = -0.1 }, []string{"rewrite_fraction = -0.1"}},
		{"size cap", func(c *advisor.Config) { c.SizeCapTokens = -1 }, []string{"size_cap_tokens = -1"}},
		{"cache ttl", func(c *advisor.Config) { c.CacheTTL = advisor.Duration(-time.Second) }, []string{"cache_ttl = -1s"}},
		{"empty schedule", func(c *advisor.Config) { c.Schedule = "" }, []string{"schedule = "}},
		{"bad schedule", func(c *advisor.Config) { c.Schedule = "3,x" }, []string{"schedule:", `"x"`}},
		{"bad scorer schedule", func(c *advisor.Config) { c.ScorerSchedules = map[string]string{"fitted": "1", "ollama": "0,2"} }, []string{"scorer_schedules[ollama]:"}},
		{"bad glob", func(c *advisor.Config) { c.ExcludedTools = []string{"ok", "[memory"} }, []string{"excluded_tools[1]", `"[memory"`}},
		{"empty glob", func(c *advisor.Config) { c.ExcludedTools = []string{""} }, []string{"excluded_tools[0]"}},
		{"recall tool", func(c *advisor.Config) { c.RecallTool = "" }, []string{"recall_tool = "}},
		{"several", func(c *advisor.Config) { c.Cutoff = 2; c.ProtectedSteps = -3 }, []string{"cutoff = 2", "protected_steps = -3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := advisor.DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, advisor.ErrConfig) {
				t.Fatalf("Validate() = %v, want an ErrConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if _, err := advisor.New(cfg, nil, advisor.NewMemoryStore()); !errors.Is(err, advisor.ErrConfig) {
				t.Errorf("New accepted the config: %v", err)
			}
		})
	}
	if _, err := advisor.New(advisor.DefaultConfig(), nil, nil); !errors.Is(err, advisor.ErrConfig) {
		t.Errorf("New without a store: %v, want ErrConfig", err)
	}
}

// A bad field is named once: the fields compared with it (budget, the margins with
// context_window) are not named as well when only their reference is bad.
func TestValidateNamesTheBadFieldOnce(t *testing.T) {
	cfg := advisor.DefaultConfig()
	cfg.ContextWindow = -5
	want := "invalid config: context_window = -5: must be at least 1000"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v; want %q", err, want)
	}
	cfg = advisor.DefaultConfig()
	cfg.Budget = 300_000 // over the window: still said, the window is fine
	want = "invalid config: budget = 300000: must be at most context_window"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v; want %q", err, want)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("partial file keeps defaults", func(t *testing.T) {
		cfg, err := advisor.LoadConfig(write("p.json", `{"cutoff": 0.1, "cache_ttl": "90s", "excluded_tools": ["todo*"]}`))
		if err != nil {
			t.Fatal(err)
		}
		want := advisor.DefaultConfig()
		want.Cutoff, want.CacheTTL, want.ExcludedTools = 0.1, advisor.Duration(90*time.Second), []string{"todo*"}
		if d := cmp.Diff(want, cfg); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
	t.Run("a price entry keeps the provider's other defaults", func(t *testing.T) {
		cfg, err := advisor.LoadConfig(write("pr.json", `{"prices": {"anthropic": {"cache_read_per_mtok": 0.25}}}`))
		if err != nil {
			t.Fatal(err)
		}
		want := prices.MustDefault(prices.Anthropic)
		want.CacheReadPerMTok = 0.25
		if d := cmp.Diff(prices.Table{prices.Anthropic: want}, cfg.Prices); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
	t.Run("seconds as a number", func(t *testing.T) {
		cfg, err := advisor.LoadConfig(write("n.json", `{"cache_ttl": 120}`))
		if err != nil || time.Duration(cfg.CacheTTL) != 2*time.Minute {
			t.Errorf("cache_ttl 120 = %v, %v; want 2m", time.Duration(cfg.CacheTTL), err)
		}
	})
	errs := []struct {
		name, text string
		want       []string
	}{
		{"unknown field", `{"cutof": 0.1}`, []string{"u.json", `unknown field "cutof"`}},
		{"wrong type", `{"cutoff": "low"}`, []string{"u.json", "cutoff"}},
		{"invalid value", `{"protected_steps": -2}`, []string{"u.json", "protected_steps = -2"}},
		{"bad duration", `{"cache_ttl": "5 minutes"}`, []string{"u.json", `field "cache_ttl"`, "5 minutes"}},
		{"negative price", `{"prices": {"anthropic": {"input_per_mtok": -1}}}`, []string{"u.json", "prices for anthropic", "input_per_mtok = -1"}},
		{"unknown provider", `{"prices": {"acme": {"input_per_mtok": 1}}}`, []string{"u.json", `entry "acme"`, `unknown provider "acme"`}},
		{"unknown price field", `{"prices": {"openai": {"inputs": 1}}}`, []string{"u.json", `field "prices"`, `entry "openai"`, `unknown field "inputs"`}},
		{"provider not the key", `{"prices": {"openai": {"provider": "gemini"}}}`, []string{"u.json", `entry "openai" holds provider "gemini"`}},
		{"trailing data", `{"cutoff": 0.1} {"cutoff": 0.2}`, []string{"u.json", "data after the JSON object"}},
		// Line and column of a syntax error's offending byte (the second ',' is
		// byte 17 of line 2), and of the end of a file cut short (line 3 is 16
		// bytes long: column 17 is past its last byte).
		{"syntax error", "{\n  \"cutoff\": 0.1,,\n}", []string{"u.json:2:17: invalid character ','"}},
		{"cut short", "{\n  \"cutoff\": 0.1,\n  \"budget\": 5000", []string{"u.json:3:17: unexpected EOF"}},
		{"empty file", " \n", []string{"u.json: invalid config: the file is empty; want a JSON object"}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := advisor.LoadConfig(write("u.json", tt.text))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := advisor.LoadConfig(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestWriteConfigRoundTrip(t *testing.T) {
	cfg := advisor.DefaultConfig()
	cfg.Cutoff = 0.17
	cfg.Budget = 64_000
	cfg.CacheTTL = advisor.Duration(time.Hour)
	cfg.Schedule = "every:4"
	cfg.ExcludedTools = []string{"memory", "todo*"}
	cfg.RecallTool = "mcp__pruneadvisor__recall"
	p := filepath.Join(t.TempDir(), "c.json")
	if err := advisor.WriteConfig(p, cfg); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"cache_ttl": "1h0m0s"`) {
		t.Errorf("written config has no readable cache_ttl:\n%s", data)
	}
	got, err := advisor.LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(cfg, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	bad := cfg
	bad.Cutoff = -1
	if err := advisor.WriteConfig(p, bad); !errors.Is(err, advisor.ErrConfig) {
		t.Errorf("WriteConfig of an invalid config: %v", err)
	}
}

// TestScheduleFor: a scorer's ask back-off is its own entry, else its name's part
// before ':', else Schedule; the defaults re-ask the fitted scorer 1, 1, 2, 3, 6,
// 12 and 24 steps after each ask, every other scorer by Schedule.
func TestScheduleFor(t *testing.T) {
	cfg := advisor.DefaultConfig()
	for _, tc := range []struct{ name, want string }{
		{"fitted", "1,1,2,3,6,12,24"},
		{"fitted:mine.json", "1,1,2,3,6,12,24"},
		{"lexical", "3,6,12,24"},
		{"ollama:qwen2.5:0.5b:p2", "3,6,12,24"},
		{"fused(ollama:q+fitted)", "3,6,12,24"},
	} {
		if got := cfg.ScheduleFor(tc.name); got != tc.want {
			t.Errorf("ScheduleFor(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	cfg.ScorerSchedules = map[string]string{"ollama": "every:2", "ollama:big": "5"}
	for _, tc := range []struct{ name, want string }{
		{"ollama:small", "every:2"},
		{"ollama:big", "5"},
		{"fitted", "3,6,12,24"},
	} {
		if got := cfg.ScheduleFor(tc.name); got != tc.want {
			t.Errorf("with %v: ScheduleFor(%q) = %q, want %q", cfg.ScorerSchedules, tc.name, got, tc.want)
		}
	}
	if got := cfg.ScheduleOf(nil); got != cfg.Schedule {
		t.Errorf("ScheduleOf(nil) = %q", got)
	}
}
