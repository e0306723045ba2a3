package tuning

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// LagOf names a replay's modelled ask lag (replay.Settings.AskLag, AskLatency):
// "none", "1 step", "N steps", the latency ("3s", "measured"), or both.
func LagOf(s replay.Settings) string {
	switch {
	case s.AskLag == 0 && s.AskLatency == "":
		return "none"
	case s.AskLatency == "" && s.AskLag == 1:
		return "1 step"
	case s.AskLatency == "":
		return fmt.Sprintf("%d steps", s.AskLag)
	case s.AskLag == 0:
		return s.AskLatency
	}
	return fmt.Sprintf("%d steps, %s", s.AskLag, s.AskLatency)
}

// sameButLag reports whether two replays differ at most in their modelled ask
// lag: the same scorer, configuration, reading and word statistics.
func sameButLag(a, b *Group) bool {
	x, y := a.Settings, b.Settings
	x.AskLag, x.AskLatency, y.AskLag, y.AskLatency = 0, "", 0, ""
	return a.Scorer == b.Scorer && x.Hash() == y.Hash()
}

// SplitLag returns the groups of a lag comparison, the no-lag replay first when
// there is one (every group that differs from the first lagged one only in its
// lag, by lag in steps, then latency), and the groups the rest of the report is
// made of: those without a lag, else the first group alone. compare is nil when
// no group has a lag or it has nothing to be compared with.
func SplitLag(groups []*Group) (compare, rest []*Group) {
	var first *Group
	for _, g := range groups {
		if LagOf(g.Settings) != "none" {
			first = g
			break
		}
	}
	for _, g := range groups {
		if LagOf(g.Settings) == "none" {
			rest = append(rest, g)
		}
	}
	if len(rest) == 0 {
		rest = groups[:1]
	}
	if first == nil {
		return nil, groups
	}
	for _, g := range groups {
		if sameButLag(first, g) {
			compare = append(compare, g)
		}
	}
	if len(compare) < 2 {
		return nil, rest
	}
	// By lag in steps, then latency: the no-lag replay (0, "") first.
	slices.SortStableFunc(compare, func(x, y *Group) int {
		lx, mx, _ := replay.ParseAskLatency(x.Settings.AskLatency)
		ly, my, _ := replay.ParseAskLatency(y.Settings.AskLatency)
		return cmp.Or(cmp.Compare(x.Settings.AskLag, y.Settings.AskLag), cmp.Compare(lx, ly), cmpBool(mx, my))
	})
	return compare, rest
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// LagConfig is what LagCost prices each replay with.
type LagConfig struct {
	// Gather gathers each replay's records (Gather; WithStubs is not used).
	Gather GatherOptions
	// Options returns the pricing options of a replay's advisor config (the
	// command's flags over it); required.
	Options func(cfg advisor.Config) (calibrate.Options, error)
	// Report holds the recommendation's settings (Recency, TargetMiss,
	// Objective); Options, Budgets and Advisor are set per replay.
	Report calibrate.ReportConfig
}

// LagCost prices the advisor's own rewrites under each replay of compare (from
// SplitLag) at its replay's budget, each replay on its own: what it pruned and
// missed, the token-steps its stubs saved, its net dollars and rewrites; with
// the no-lag replay first, each row's token-steps lost to the lag. Errors:
// Gather's, cfg.Options', and calibrate.NewReport's (naming the replay).
func LagCost(ctx context.Context, store Store, compare []*Group, cfg LagConfig) ([]LagRow, error) {
	var rows []LagRow
	for _, g := range compare {
		in, err := Gather(ctx, store, []*Group{g}, cfg.Gather)
		if err != nil {
			return nil, err
		}
		ac := g.Settings.Config
		opts, err := cfg.Options(ac)
		if err != nil {
			return nil, err
		}
		opts.Window, opts.CompactionOf = ac.ContextWindow, CompactionOf(ac)
		rc := cfg.Report
		rc.Options, rc.Budgets = opts, []int{ac.BudgetTokens()}
		rc.Advisor = &calibrate.AdvisorInput{Scorer: g.Scorer, Cutoff: g.Cutoff(), Budget: ac.BudgetTokens(), Window: ac.ContextWindow, AppliedAt: in.Applied}
		rep, err := calibrate.NewReport(in.Base, in.Calls, in.Scorers, rc)
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", short(g.Hash), err)
		}
		r := rep.Budgets[0].Advisor
		rows = append(rows, LagRow{
			Replay: g.Label(), Lag: LagOf(g.Settings), Pruned: r.Pruned, Misses: r.Misses,
			MissRate: r.MissRate, TokenSteps: r.TokenSteps, NetUSD: r.Applied.NetUSD, Rewrites: r.Applied.Rewrites,
		})
	}
	if LagOf(compare[0].Settings) == "none" {
		for i := range rows {
			rows[i].LostTokenSteps = rows[0].TokenSteps - rows[i].TokenSteps
		}
	}
	return rows, nil
}
