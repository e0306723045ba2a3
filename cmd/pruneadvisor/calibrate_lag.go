package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// lagRow is one row of calibrate's "what the ask lag costs" (replay.LagRow).
type lagRow = replay.LagRow

// lagOf names a replay's modelled ask lag (replay.Settings.AskLag, AskLatency).
func lagOf(s replay.Settings) string {
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
func sameButLag(a, b *replayGroup) bool {
	x, y := a.settings, b.settings
	x.AskLag, x.AskLatency, y.AskLag, y.AskLatency = 0, "", 0, ""
	return a.scorer == b.scorer && x.Hash() == y.Hash()
}

// splitLag returns the groups of a lag comparison, the no-lag replay first when
// there is one (every group that differs from the first lagged one only in its
// lag), and the groups the rest of the report is made of: those without a lag,
// else the first group alone. compare is nil when no selected replay has a lag
// or it has nothing to be compared with.
func splitLag(groups []*replayGroup) (compare, rest []*replayGroup) {
	var first *replayGroup
	for _, g := range groups {
		if lagOf(g.settings) != "none" {
			first = g
			break
		}
	}
	for _, g := range groups {
		if lagOf(g.settings) == "none" {
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
	slices.SortStableFunc(compare, func(x, y *replayGroup) int {
		lx, mx, _ := replay.ParseAskLatency(x.settings.AskLatency)
		ly, my, _ := replay.ParseAskLatency(y.settings.AskLatency)
		return cmp.Or(cmp.Compare(x.settings.AskLag, y.settings.AskLag), cmp.Compare(lx, ly), cmpBool(mx, my))
	})
	return compare, rest
}

// lagCost prices the advisor's own rewrites under each replay of compare at its
// replay's budget, with calibrate's options (f), each replay on its own.
func lagCost(ctx context.Context, e *env, db *storage.DB, compare []*replayGroup, f *calibrateFlags) ([]lagRow, error) {
	var rows []lagRow
	for _, g := range compare {
		in, err := buildCalibration(ctx, e, db, []*replayGroup{g}, f.workers, false)
		if err != nil {
			return nil, err
		}
		cfg := g.settings.Config
		opts, err := f.priceFlags.options(cfg)
		if err != nil {
			return nil, err
		}
		opts.Bins, opts.Seed = f.bins, f.seed
		opts.Window, opts.CompactionOf = cfg.ContextWindow, replay.CompactionOf(cfg)
		adv := &calibrate.AdvisorInput{Scorer: g.scorer, Cutoff: cfg.CutoffFor(g.scorer), Budget: cfg.BudgetTokens(), Window: cfg.ContextWindow, AppliedAt: in.applied}
		rep, err := calibrate.NewReport(in.base, in.sessions, in.scorers, calibrate.ReportConfig{
			Options: opts, Budgets: []int{cfg.BudgetTokens()}, Recency: f.recency, TargetMiss: f.targetMiss,
			Objective: calibrate.Objective(f.objective), Advisor: adv,
		})
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", short(g.hash), err)
		}
		r := rep.Budgets[0].Advisor
		rows = append(rows, lagRow{
			Replay: g.label(), Lag: lagOf(g.settings), Pruned: r.Pruned, Misses: r.Misses,
			MissRate: r.MissRate, TokenSteps: r.TokenSteps, NetUSD: r.Applied.NetUSD, Rewrites: r.Applied.Rewrites,
		})
	}
	if lagOf(compare[0].settings) == "none" {
		for i := range rows {
			rows[i].LostTokenSteps = rows[0].TokenSteps - rows[i].TokenSteps
		}
	}
	return rows, nil
}

// printLagCost prints the lag comparison's table.
func printLagCost(w io.Writer, rows []lagRow, scorer string, budget int) error {
	fmt.Fprintf(w, "what the ask lag costs (scorer %s, the advisor's own rewrites at the replays' budget %d):\n", scorer, budget)
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lag\tpruned\tmisses\tmiss rate\ttoken-steps\tlost to the lag\tnet $\trewrites\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%d\t%d\t%.2f\t%d\t\n", r.Lag, r.Pruned, r.Misses, r.MissRate, r.TokenSteps, r.LostTokenSteps, r.NetUSD, r.Rewrites)
	}
	return tw.Flush()
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
