package tuning

import (
	"fmt"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// Calibration is what `pruneadvisor calibrate --json` prints and what the report
// page shows (package report): one type, built by one function, so the two cannot
// disagree. Its JSON field names are calibrate --json's.
type Calibration struct {
	// DB is the store read, its password redacted (storage.Redact).
	DB string `json:"db"`
	// Groups labels each replay group read (scorer, settings hash, cutoff,
	// schedule, sessions).
	Groups []string `json:"replays"`
	// Sessions are the sessions calibrated on (their paths), in the order of the
	// report's per-session rows.
	Sessions []string `json:"sessions"`
	// Dropped and Omitted are the sessions and the baselines left out, each with
	// the reason.
	Dropped []string `json:"dropped,omitempty"`
	Omitted []string `json:"omitted_baselines,omitempty"`
	// Report is the calibration itself (calibrate.NewReport).
	Report calibrate.Report `json:"report"`
	// Chosen is the scorer whose recommendation --write-config writes; Wrote the
	// config file written ("" when none).
	Chosen string `json:"chosen_scorer,omitempty"`
	Wrote  string `json:"wrote_config,omitempty"`
	// Digests is the stub digests' coverage by format (DigestCoverage), "all"
	// last, its rows' Held, NamesHeld and Stub by DigestSizes (the sizes, in
	// that order); DigestBudget the budget it recommends (-1: none), in tokens,
	// and DigestShare the share of a long output it grows to (0: a fixed budget;
	// advisor.Config.DigestShare).
	Digests      []*DigestRow `json:"digests"`
	DigestSizes  []DigestSize `json:"digest_sizes"`
	DigestBudget int          `json:"digest_budget_recommended"`
	DigestShare  float64      `json:"digest_share_recommended,omitempty"`
	// DigestSweep is the chosen scorer's front at each of DigestBudgets, at the
	// replay's own budget (calibrate.DigestSweep; calibrate only, not the
	// report), and DigestSweepBudget the budget it recommends (-1: none).
	DigestSweep       []calibrate.DigestPoint `json:"digest_sweep,omitempty"`
	DigestSweepBudget int                     `json:"digest_sweep_recommended,omitempty"`
	// DigestSweepShare is the replay's digest share (advisor.Config.DigestShare)
	// that every budget of the sweep grows to on a long output, as the replay's
	// own stubs did (OutputsAt); 0 for fixed budgets.
	DigestSweepShare float64 `json:"digest_sweep_share,omitempty"`
	// LagCost compares the replays that differ only in their modelled ask lag
	// (replay --ask-lag, --ask-latency), the one without first: the advisor's own
	// rewrites under each (LagRow; calibrate only, not the report). Absent when no
	// selected replay has a lag.
	LagCost []LagRow `json:"lag_cost,omitempty"`
}

// LagRow is what the advisor did under one replay of a lag comparison
// (calibrate's "what the ask lag costs", Calibration.LagCost): its own rewrites (the applied stub
// steps) priced at the replay's budget. The flat figures are the decision-level
// ones of calibrate.Result at those steps.
type LagRow struct {
	Replay     string  `json:"replay"`      // the group's label
	Lag        string  `json:"lag"`         // "none", "2 steps", "3s", "measured", or both
	Pruned     int     `json:"pruned"`      // outputs stubbed
	Misses     int     `json:"misses"`      // stubbed outputs used at or after their stub step
	MissRate   float64 `json:"miss_rate"`   // Misses / Pruned
	TokenSteps int64   `json:"token_steps"` // token-steps the stubs saved
	// LostTokenSteps is the no-lag replay's TokenSteps less this one's (0 for
	// it, and when there is none).
	LostTokenSteps int64   `json:"lost_token_steps"`
	NetUSD         float64 `json:"net_usd"` // keep-all's price less the advisor's, recalls included
	Rewrites       int     `json:"rewrites"`
}

// AdvisorInput returns the advisor's own row of a report over in: the base
// replay's scorer (ScorerLabel) at its cutoff (Group.Cutoff), budget and window,
// with the steps at which it applied its stubs (ReportInput.Applied); nil for a
// replay without a scorer (replay.ScorerNone).
func (in *ReportInput) AdvisorInput(groups []*Group) *calibrate.AdvisorInput {
	g := groups[0]
	if g.Scorer == replay.ScorerNone {
		return nil
	}
	cfg := g.Settings.Config
	return &calibrate.AdvisorInput{Scorer: ScorerLabel(g, groups), Cutoff: g.Cutoff(), Budget: cfg.BudgetTokens(), Window: cfg.ContextWindow, AppliedAt: in.Applied}
}

// NewCalibration assembles what calibrate --json prints from the report rep of
// in over groups: db names the store (redacted by the caller), the groups'
// labels, the sessions and what was left out, and the stub digests' coverage
// with the budget it recommends (-1: none). Chosen, Wrote, the digest sweep and
// the lag cost are the caller's to set.
func NewCalibration(db string, rep calibrate.Report, in *ReportInput, groups []*Group) *Calibration {
	c := &Calibration{DB: db, Report: rep, Dropped: in.Dropped, Omitted: in.Omitted}
	for _, g := range groups {
		c.Groups = append(c.Groups, g.Label())
	}
	c.Sessions = in.Names
	c.Digests, c.DigestSizes, c.DigestBudget = in.Digest.Result(), in.Digest.Sizes, -1
	if z, _, ok := in.Digest.Recommend(); ok {
		c.DigestBudget, c.DigestShare = z.Tokens, z.Share
	}
	return c
}

// ReplayBudget returns the report's figures at the replay's own budget and window
// (those of cfg, the base replay's config) when they were priced, else at the
// first budget: the recommendation calibrate --write-config writes.
func ReplayBudget(rep calibrate.Report, cfg advisor.Config) calibrate.BudgetReport {
	br := rep.Budgets[0]
	for _, b := range rep.Budgets {
		if b.Budget == cfg.BudgetTokens() && b.Window == cfg.ContextWindow {
			br = b
		}
	}
	return br
}

// SweepOf returns the sweep of the scorer named scorer in br (its last, should
// two share the name), nil when br has none.
func SweepOf(br calibrate.BudgetReport, scorer string) *calibrate.ScorerSweep {
	var out *calibrate.ScorerSweep
	for i := range br.Scorers {
		if br.Scorers[i].Scorer == scorer {
			out = &br.Scorers[i]
		}
	}
	return out
}

// AddDigestSweep fills c's digest budget sweep (issue 39): the base replay's
// scorer's front at each of DigestBudgets, with the advisor's stubs of that
// budget (ReportInput.DigestOuts), at the replay's own budget and window under
// opts (the report's pricing options), the best point of each within targetMiss
// (calibrate.DigestSweep). Nothing for a replay without a scorer to sweep
// (Group.Scored). Errors: calibrate.DigestSweep's, wrapped.
func (c *Calibration) AddDigestSweep(in *ReportInput, groups []*Group, opts calibrate.Options, targetMiss float64) error {
	g := groups[0]
	if !g.Scored() || len(in.DigestOuts) != len(DigestBudgets) {
		return nil
	}
	opts.Budget = g.Settings.Config.BudgetTokens()
	opts.HardLimit = max(opts.HardLimit, opts.Budget)
	opts.PerSession = false
	at := func(b int) []calibrate.Output {
		for i, x := range DigestBudgets {
			if x == b {
				return in.DigestOuts[i]
			}
		}
		return nil
	}
	points, rec, err := calibrate.DigestSweep(DigestBudgets, at, in.Calls, opts, ScorerLabel(g, groups), calibrate.DefaultCutoffs(), targetMiss)
	if err != nil {
		return fmt.Errorf("calibrate: digest sweep: %w", err)
	}
	c.DigestSweep, c.DigestSweepBudget, c.DigestSweepShare = points, rec, g.Settings.Config.DigestShare
	return nil
}
