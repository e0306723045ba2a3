package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// configFlags are the advisor settings every advising command accepts: a config
// file, then flags over it.
type configFlags struct {
	file       string
	cutoff     float64
	budget     int
	window     int
	schedule   string
	recallTool string
	forced     bool
	cmd        *cobra.Command
}

func (f *configFlags) register(c *cobra.Command) {
	f.cmd = c
	d := advisor.DefaultConfig()
	c.Flags().StringVar(&f.file, "config", "", "JSON config file (fields as in docs/CONFIG.md); flags override it")
	c.Flags().Float64Var(&f.cutoff, "cutoff", 0, fmt.Sprintf("keep-probability under which a scored candidate of 1,000 tokens is pruned, whatever the scorer; scaled by each output's size as (tokens/1000)^size_exponent, tokens capped at size_cap_tokens (default: the config's cutoff for the scorer: %g for fitted, else %g)", d.CutoffFor("fitted"), d.Cutoff))
	c.Flags().IntVar(&f.budget, "budget", 0, fmt.Sprintf("context budget in tokens (default: window x budget_fraction = %d); over it a rewrite must also pay for its cache write unless --price-forced=false, and past the hard limit (the agent's compaction point less a margin) it is forced", d.BudgetTokens()))
	c.Flags().IntVar(&f.window, "window", d.ContextWindow, "the agent model's context window in tokens")
	c.Flags().StringVar(&f.schedule, "schedule", "", fmt.Sprintf("ask back-off of whichever scorer runs: \"1\" every step, \"every:K\", or gaps \"3,6,12,24\" (default: the config's schedule for the scorer: %s for fitted, else %s)", d.ScheduleFor("fitted"), d.Schedule))
	c.Flags().StringVar(&f.recallTool, "recall-tool", d.RecallTool, "recall tool name the stubs name (e.g. mcp__pruneadvisor__recall)")
	c.Flags().BoolVar(&f.forced, "price-forced", d.PriceForced, "over the budget, rewrite only when the rewrite pays for itself too (false: whenever pending prunes reach the least rewrite or the low-water mark)")
}

// load returns the config file's settings (or the defaults) with the flags the user
// set on top, validated.
func (f *configFlags) load() (advisor.Config, error) {
	cfg := advisor.DefaultConfig()
	if f.file != "" {
		var err error
		if cfg, err = advisor.LoadConfig(f.file); err != nil {
			return cfg, err
		}
	}
	set := func(name string) bool { return f.cmd != nil && f.cmd.Flags().Changed(name) }
	if set("cutoff") {
		// --cutoff is the cutoff of whichever scorer runs: Cutoff and every
		// scorer's entry (the config's and the defaults'). The entries are set, not
		// dropped: a config read back from a store or a file takes the defaults'
		// scorer_cutoffs where it has none, and calibrate would price a replay made
		// at --cutoff C at the default cutoff instead of C.
		cuts := map[string]float64{}
		for name := range advisor.DefaultConfig().ScorerCutoffs {
			cuts[name] = f.cutoff
		}
		for name := range cfg.ScorerCutoffs {
			cuts[name] = f.cutoff
		}
		cfg.Cutoff, cfg.ScorerCutoffs = f.cutoff, cuts
	}
	if set("budget") {
		cfg.Budget = f.budget
	}
	if set("window") {
		cfg.ContextWindow = f.window
	}
	if set("schedule") {
		// --schedule is the ask back-off of whichever scorer runs.
		cfg.Schedule, cfg.ScorerSchedules = f.schedule, nil
	}
	if set("recall-tool") {
		cfg.RecallTool = f.recallTool
	}
	if set("price-forced") {
		cfg.PriceForced = f.forced
	}
	return cfg, cfg.Validate()
}

// defaultDBPath is $PRUNEADVISOR_DB (a path or a postgres:// URL), else
// pruneadvisor.db under the user's data directory ($XDG_DATA_HOME or
// ~/.local/share).
func defaultDBPath() string {
	if p := os.Getenv("PRUNEADVISOR_DB"); p != "" {
		return p
	}
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "pruneadvisor.db"
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "pruneadvisor", "pruneadvisor.db")
}

// openStore opens the store dsn names (storage.Open): a postgres:// URL, or the path
// of an SQLite file, whose folder it creates.
func openStore(ctx context.Context, dsn string) (*storage.DB, func(), error) {
	if dir := filepath.Dir(dsn); dir != "" && !storage.IsPostgres(dsn) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("open store: %w", err)
		}
	}
	db, err := storage.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	return db, func() { _ = db.Close() }, nil
}
