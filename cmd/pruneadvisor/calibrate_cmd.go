package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/tuning"
)

type calibrateFlags struct {
	priceFlags
	budgets []int
	windows []int
	// compactionDecides: the count the agents compare with their points
	// ("agent": each its own; "sent", "usage", "turn" or "estimate" for all;
	// calibrate.Compaction.Decides).
	compactionDecides string
	budgetSet         bool // --budget was given
	db                string
	targetMiss        float64
	objective         string
	plot              string
	asJSON            bool
	writeConfig       string
	scorer            string
	settings          []string
	recency           []int
	bins              int
	seed              uint64
	workers           int
}

// calibrateJSON is calibrate's --json output: tuning.Calibration, which the report
// page shows too (report.go), so the two cannot disagree.
type calibrateJSON = tuning.Calibration

func calibrateCmd(e *env) *cobra.Command {
	var f calibrateFlags
	c := &cobra.Command{
		Use:   "calibrate",
		Short: "Price every pruner against doing nothing, call by call, and choose the cutoff from replay evidence",
		Long: `calibrate reads the replays stored by 'pruneadvisor replay' and reports, for every
scorer replayed: a reliability table (score bins: asks, later-used count, rate), the
Brier score and AUC; then, at every --budget, each pruner priced call by call as the
provider bills it (cache reads, cache writes of the suffix after a rewrite's first
changed message, free rewrites after a pause longer than the cache TTL, recalls of
pruned outputs used later) against keep-all, at the decision level (every prune the
moment it is decided) and the applied level (under the planner's rewrite regime):
net dollars (positive = cheaper than doing nothing), sessions costlier than keep-all,
steps over the budget, peak context and rewrites. For each scorer, a cutoff sweep
with random pruning at the same prune rate beside it, and the recommended cutoff: the
one with the best --objective among those whose miss rate is at most --target-miss.

Beside the advisor, on the same sessions and in the same run: keep-all, rules only,
recency masking (keep the last N outputs), the oracle (every output pruned right after
its last later use: the most any pruner saves without a miss), and the anchors'
regimes (Anthropic's tool-result clearing, gemini-cli's masking, opencode's prune,
Claude Code's idle clearing). The lexical and the fitted scorer are set beside the
rest too: their stored replays, or scored in this process when the store holds none
(the session files are read again; a baseline some session cannot be read for is
left out, said on stderr).

Every session compacts where its agent would (Claude Code at the window less 33,000
tokens, Codex at 90%, pi at the window less 16,384, Gemini CLI at half, opencode at
the window less 20,000; an agent the format does not name at the window itself), for
every pruner alike: the summarising call is priced, the context becomes the summary
and what the agent keeps, and outputs dropped that the agent uses later are counted
as lost ("compactions", "lost", beside the recallable "stub misses"). --window models
other windows (a list; the budget is then half of each unless --budget is given).

Objective: token-steps (default) maximises the context kept out of the agent's calls;
net maximises net dollars under the planner's regime (the applied level). Each budget
has its own recommendation.

--write-config writes the recommended cutoff of one scorer (--scorer, default the
first stored scorer) into an advisor config file, keeping its other fields: the
recommendation at the replay's own budget when it was priced, else at the first
budget of the first --window, whose context_window it writes too (a budget over
that window goes back to budget_fraction of it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.budgetSet = cmd.Flags().Changed("budget")
			return runCalibrate(cmd.Context(), e, f)
		},
	}
	f.register(c)
	c.Flags().StringVar(&f.plot, "plot", "", "also draw the reliability and savings plot to this .png or .svg file")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	c.Flags().StringVar(&f.writeConfig, "write-config", "", "write the recommended cutoff into this advisor config file (created if missing)")
	c.Flags().StringVar(&f.scorer, "scorer", "", "the scorer whose cutoff --write-config writes (default: the first stored scorer, else lexical)")
	return c
}

// register adds the flags calibrate and report share (the same names, defaults and
// meaning, so that one set of flags gives both the same figures).
func (f *calibrateFlags) register(c *cobra.Command) {
	f.priceFlags.register(c)
	c.Flags().IntSliceVar(&f.budgets, "budget", []int{20_000, 50_000, 100_000}, "budgets to price at, in tokens (a list); the replay's own budget shows the advisor's real rewrites")
	c.Flags().StringVar(&f.compactionDecides, "compaction-decides", "agent", "what the agents compare with their compaction points before a call: agent (each its own count, the compaction table's: the last usage for Codex, opencode and Gemini CLI, the same only between turns for pi, the next request before the proxy's rewrite for Claude Code), or, for every agent, sent (what the call sends after the proxy's rewrite, the most a proxy could do), usage, turn or estimate; docs/EVALUATION.md, \"When the agent decides to compact\"")
	c.Flags().IntSliceVar(&f.windows, "window", nil, "context windows to model, in tokens (a list; default: the config's context_window): where each session's agent compacts (docs/EVALUATION.md); in a window other than the config's, the hard limit and, unless --budget is given, the budget are the config's fractions of it")
	c.Flags().StringVar(&f.db, "db", defaultDBPath(), "store holding the replays: an SQLite file, or a postgres:// URL")
	c.Flags().Float64Var(&f.targetMiss, "target-miss", 0.02, "highest acceptable miss rate (pruned outputs used later / pruned outputs)")
	c.Flags().StringVar(&f.objective, "objective", string(calibrate.ObjectiveTokenSteps), "what the recommended cutoff maximises: token-steps | net")
	c.Flags().StringSliceVar(&f.settings, "settings", nil, "use only the replays whose settings hash starts with these prefixes (default: all)")
	c.Flags().IntSliceVar(&f.recency, "recency", calibrate.DefaultRecency, "windows N of the recency-masking baseline (keep the last N outputs)")
	c.Flags().IntVar(&f.bins, "bins", 10, "score bins of the reliability table")
	c.Flags().Uint64Var(&f.seed, "seed", 1, "seed of the random baseline")
	c.Flags().IntVar(&f.workers, "workers", 0, "sessions scored at once by the in-process lexical baseline (default: the number of CPUs)")
}

func runCalibrate(ctx context.Context, e *env, f calibrateFlags) error {
	run, err := computeCalibration(ctx, e, f, false)
	if err != nil {
		return err
	}
	defer run.closeDB()
	if err := run.out.AddDigestSweep(run.in, run.groups, run.opts, f.targetMiss); err != nil {
		return err
	}
	if f.plot != "" {
		if err := writePlot(f.plot, run.out.Report); err != nil {
			return err
		}
	}
	writeErr := run.writeConfig(e, f)
	if f.asJSON {
		if err := e.printJSON(run.out); err != nil {
			return err
		}
	} else if err := run.printText(e, f); err != nil {
		return err
	}
	return writeErr
}

// writeConfig writes the chosen scorer's recommended cutoff into --write-config
// (tuning.WriteCutoff, under the replay's size exponent), noting it in the output,
// and warns on stderr when that cutoff is the lowest swept. The error is the
// write's, or says that no cutoff met --target-miss; nil without --write-config.
func (run *calibrationRun) writeConfig(e *env, f calibrateFlags) error {
	sr := run.chosen
	if f.writeConfig == "" {
		return nil
	}
	if sr.Recommendation.None {
		return fmt.Errorf("calibrate: no cutoff of scorer %s meets --target-miss %.3f (%s); %s not written", sr.Scorer, f.targetMiss, sr.Recommendation.Reason, f.writeConfig)
	}
	if err := tuning.WriteCutoff(f.writeConfig, tuning.ScorerName(sr.Scorer), sr.Recommendation.Cutoff, run.opts.SizeExponent, run.opts.SizeCapTokens, 0); err != nil {
		return err
	}
	// The cutoff was priced at run.budget's window: a file for another window
	// (calibrate --window 64000 on a store replayed at 200,000) gets it too, so
	// that it runs the window that was priced. Its budget is the user's to keep.
	if window := run.budget.Window; window > 0 {
		if err := tuning.UpdateConfig(f.writeConfig, func(cfg *advisor.Config) {
			cfg.ContextWindow = window
			if cfg.Budget > window {
				cfg.Budget = 0 // the budget_fraction of the new window, not one over it
			}
		}); err != nil {
			return err
		}
	}
	run.out.Wrote = f.writeConfig
	if w := lowestCutoffWarning(sr); w != "" {
		fmt.Fprintf(e.stderr, "pruneadvisor: calibrate: warning: %s\n", w)
	}
	return nil
}

// printText prints the calibration as text: the report, what the ask lag costs,
// the stub digests' coverage and budget sweep, and what was written.
func (run *calibrationRun) printText(e *env, f calibrateFlags) error {
	out, sr := run.out, run.chosen
	if err := printCalibrate(e.stdout, *out, run.groups, run.in); err != nil {
		return err
	}
	if c := run.lagCompare; len(out.LagCost) > 0 {
		fmt.Fprintln(e.stdout)
		if err := printLagCost(e.stdout, out.LagCost, c[0].Scorer, c[0].Settings.Config.BudgetTokens()); err != nil {
			return err
		}
	}
	fmt.Fprintln(e.stdout)
	run.in.Digest.Print(e.stdout)
	printDigestSweep(e.stdout, out, f.targetMiss)
	if out.Wrote != "" {
		fmt.Fprintf(e.stdout, "\nwrote cutoff %s for scorer %s (objective %s, target miss %.3f, priced at budget %d) and context_window %d to %s\n",
			calibrate.CutoffText(sr.Recommendation.Cutoff), sr.Scorer, out.Report.Objective, f.targetMiss, run.budget.Budget, run.budget.Window, out.Wrote)
	}
	if f.plot != "" {
		fmt.Fprintf(e.stdout, "plot written to %s\n", f.plot)
	}
	run.printWhatToSet(e.stdout, f)
	return nil
}

// printWhatToSet ends the text with the settings the calibration recommends, in
// one place: the chosen scorer's cutoff at the budget --write-config writes (with
// what it nets there), and the digest budget of the stubs' coverage, beside the
// values the chosen scorer's replay ran with (the first replay's for a scorer
// scored in this process).
func (run *calibrationRun) printWhatToSet(w io.Writer, f calibrateFlags) {
	sr := run.chosen
	if sr == nil {
		return
	}
	cfg, name := run.groups[0].Settings.Config, tuning.ScorerName(sr.Scorer)
	for _, g := range run.groups {
		if tuning.ScorerLabel(g, run.groups) == sr.Scorer {
			cfg = g.Settings.Config // the replay the chosen sweep comes from
		}
	}
	fmt.Fprintf(w, "\nwhat to set (the replay ran with cutoff %s for %s and digest_tokens %d%s):\n",
		calibrate.CutoffText(cfg.CutoffFor(name)), name, cfg.DigestTokens, shareWords(cfg.DigestShare, " "))
	if rec := sr.Recommendation; rec.None {
		fmt.Fprintf(w, "  scorer_cutoffs.%s: none meets --target-miss %.3f at budget %d (%s)\n", name, f.targetMiss, run.budget.Budget, rec.Reason)
	} else {
		fmt.Fprintf(w, "  scorer_cutoffs.%s = %s  (objective %s at budget %d, window %d: miss rate %.3f, net $%.2f%s; --write-config writes it)\n",
			name, calibrate.CutoffText(rec.Cutoff), rec.Objective, run.budget.Budget, run.budget.Window, rec.Result.MissRate, rec.Result.Applied.NetUSD, costlierWords(rec.Result.Applied.NetUSD))
	}
	if z, reason, ok := run.in.Digest.Recommend(); ok {
		fmt.Fprintf(w, "  digest_tokens = %d%s  (%s)\n", z.Tokens, shareWords(z.Share, " = "), reason)
		if z.Tokens != cfg.DigestTokens || z.Share != cfg.DigestShare {
			// The cutoff above was priced with the replay's digests (its label
			// counts a use the digest holds as no miss): a new digest budget needs
			// a replay under it before its cutoff means anything.
			fmt.Fprintf(w, "  (--write-config does not write digest_tokens or digest_share: the cutoff was priced with %d%s; set them, replay with that config and calibrate again)\n", cfg.DigestTokens, shareWords(cfg.DigestShare, " "))
		}
	}
}

// shareWords is what printWhatToSet says of a digest_share after digest_tokens,
// sep between the name and the value (" " for the replay's, " = " for the one to
// set): "" for 0 (a fixed budget; digest_share's default).
func shareWords(share float64, sep string) string {
	if share == 0 {
		return ""
	}
	return fmt.Sprintf(", digest_share%s%g", sep, share)
}

// costlierWords is what printWhatToSet adds to a net price under 0.
func costlierWords(net float64) string {
	if net < 0 {
		return ": costlier than doing nothing there"
	}
	return ""
}

// calibrationRun is one calibration computed from a store (computeCalibration):
// what calibrate prints, and what the report page shows.
type calibrationRun struct {
	out     *calibrateJSON
	groups  []*tuning.Group
	in      *tuning.ReportInput
	store   tuning.Store
	closeDB func()
	// chosen is the sweep of the scorer --write-config writes (nil when the report
	// has none and none was asked for), at budget, the replay's own budget when
	// priced, else the first.
	chosen *calibrate.ScorerSweep
	budget calibrate.BudgetReport
	// opts are the pricing options of the report (its Budget the first budget's).
	opts calibrate.Options
	// replayBudget is the base replay's own budget, in tokens.
	replayBudget int
	// lagCompare are the replays that differ only in their modelled ask lag, the
	// one without first (tuning.SplitLag; nil when no selected replay has a lag);
	// groups are then those without a lag.
	lagCompare []*tuning.Group
}

// computeCalibration opens f.db and computes the calibration calibrate prints;
// withStubs also reads every stubbed output's decision (the report's table of
// stubs: tuning.ReportInput.Stubs). The caller calls closeDB. Errors: bad flags
// (usageError), the store's, and calibrate.NewReport's.
func computeCalibration(ctx context.Context, e *env, f calibrateFlags, withStubs bool) (*calibrationRun, error) {
	ob := calibrate.Objective(f.objective)
	if ob != calibrate.ObjectiveTokenSteps && ob != calibrate.ObjectiveNet {
		return nil, usageError{fmt.Errorf("--objective %q: want token-steps or net", f.objective)}
	}
	if f.targetMiss < 0 || f.targetMiss > 1 || f.targetMiss != f.targetMiss {
		return nil, usageError{fmt.Errorf("--target-miss %v: want a rate in [0,1]", f.targetMiss)}
	}
	db, closeDB, groups, err := openGroups(ctx, f.db, f.settings)
	if err != nil {
		return nil, err
	}
	// Replays that differ only in their modelled ask lag are compared on their
	// own (what the lag costs); the rest of the report is made of those without.
	compare, groups := tuning.SplitLag(groups)
	run := &calibrationRun{store: replayStore{db}, closeDB: closeDB, groups: groups, lagCompare: compare}
	if err := run.compute(ctx, e, f, ob, withStubs); err != nil {
		closeDB()
		return nil, err
	}
	if compare != nil && !withStubs {
		lag, err := tuning.LagCost(ctx, run.store, compare, tuning.LagConfig{
			Gather:  f.gatherOptions(e, false),
			Options: f.lagOptions,
			Report:  calibrate.ReportConfig{Recency: f.recency, TargetMiss: f.targetMiss, Objective: calibrate.Objective(f.objective)},
		})
		if err != nil {
			closeDB()
			return nil, err
		}
		run.out.LagCost = lag
	}
	return run, nil
}

// compute gathers the groups' records (tuning.Gather), prices them under the
// flags' options (calibrate.NewReport), assembles the output and chooses the
// sweep --write-config writes.
func (run *calibrationRun) compute(ctx context.Context, e *env, f calibrateFlags, ob calibrate.Objective, withStubs bool) error {
	groups := run.groups
	in, err := tuning.Gather(ctx, run.store, groups, f.gatherOptions(e, withStubs))
	if err != nil {
		return err
	}
	run.in = in
	base := groups[0].Settings.Config
	opts, budgets, err := f.reportOptions(base, in)
	if err != nil {
		return err
	}
	rep, err := calibrate.NewReport(in.Base, in.Calls, in.Scorers, calibrate.ReportConfig{
		Options: opts, Budgets: budgets, Windows: f.windows, Recency: f.recency, TargetMiss: f.targetMiss, Objective: ob, Advisor: in.AdvisorInput(groups),
	})
	if err != nil {
		if errors.Is(err, calibrate.ErrInvalid) && len(groups) > 1 {
			return fmt.Errorf("%w\nthe replays were made with different protection settings; pick one with --settings (stored: %s)", err, tuning.GroupList(groups))
		}
		return err
	}
	run.opts, run.replayBudget = opts, base.BudgetTokens()
	run.out = tuning.NewCalibration(storage.Redact(f.db), rep, in, groups)
	return run.choose(f, rep)
}

// gatherOptions are tuning.Gather's settings from the flags: --workers, the
// Ollama request size of the in-process baselines' asks, and a warning on stderr
// for each baseline left out.
func (f *calibrateFlags) gatherOptions(e *env, withStubs bool) tuning.GatherOptions {
	return tuning.GatherOptions{Workers: f.workers, WithStubs: withStubs, Sizer: ollama.Sizer{}, OnOmit: func(baseline, why string) {
		fmt.Fprintf(e.stderr, "pruneadvisor: calibrate: %s baseline left out: %s\n", baseline, why)
	}}
}

// reportOptions returns the report's pricing options under the base replay's
// config and the flags (each session priced as --provider when given, its
// compaction modelled in the config's window), and the budgets to price at: nil
// when --window is given without --budget (each window's own budget, the config's
// fraction of it). Errors: bad flags (usageError).
func (f *calibrateFlags) reportOptions(base advisor.Config, in *tuning.ReportInput) (calibrate.Options, []int, error) {
	opts, err := f.priceFlags.options(base)
	if err != nil {
		return opts, nil, err
	}
	opts.Bins, opts.Seed, opts.PerSession = f.bins, f.seed, f.asJSON
	for i := range in.Calls {
		in.Calls[i].Provider = f.sessionProvider(in.Calls[i].Provider)
	}
	for _, b := range f.budgets {
		if b <= 0 {
			return opts, nil, usageError{fmt.Errorf("--budget %d: want a positive number of tokens", b)}
		}
	}
	for _, w := range f.windows {
		if w < 1000 {
			return opts, nil, usageError{fmt.Errorf("--window %d: want a context window of at least 1,000 tokens", w)}
		}
	}
	switch d := f.compactionDecides; d {
	case tuning.OwnCount:
		opts.CompactionOf = tuning.CompactionOf(base)
	case "sent":
		opts.CompactionOf = tuning.CompactionCounted(base, calibrate.DecidesSent)
	case calibrate.DecidesUsage, calibrate.DecidesEstimate, calibrate.DecidesTurn:
		opts.CompactionOf = tuning.CompactionCounted(base, d)
	default:
		return opts, nil, usageError{fmt.Errorf("--compaction-decides %q: want agent, sent, usage, turn or estimate", d)}
	}
	opts.Window, opts.CompactionCount = base.ContextWindow, f.compactionDecides
	budgets := f.budgets
	if len(f.windows) > 0 && !f.budgetSet {
		budgets = nil // each window's own budget: the config's fraction of it
	}
	return opts, budgets, nil
}

// lagOptions are the pricing options of one replay of a lag comparison: its
// config under the price flags, with --bins and --seed.
func (f *calibrateFlags) lagOptions(cfg advisor.Config) (calibrate.Options, error) {
	opts, err := f.priceFlags.options(cfg)
	if err != nil {
		return opts, err
	}
	opts.Bins, opts.Seed = f.bins, f.seed
	return opts, nil
}

// choose picks the sweep --write-config writes: --scorer's (default the first
// stored scorer, tuning.ReportInput.Primary) at the replay's own budget when it
// was priced, else at the first (tuning.ReplayBudget). Errors: a usageError when
// that scorer has no sweep and one was asked for (--scorer or --write-config).
func (run *calibrationRun) choose(f calibrateFlags, rep calibrate.Report) error {
	chosen := f.scorer
	if chosen == "" {
		chosen = run.in.Primary
	}
	br := tuning.ReplayBudget(rep, run.groups[0].Settings.Config)
	run.budget = br
	run.chosen = tuning.SweepOf(br, chosen)
	if run.chosen == nil && (f.scorer != "" || f.writeConfig != "") {
		names := make([]string, len(br.Scorers))
		for i, s := range br.Scorers {
			names[i] = s.Scorer
		}
		return usageError{fmt.Errorf("--scorer %q: no such scorer in the report (have %s)", chosen, strings.Join(names, ", "))}
	}
	if run.chosen != nil {
		run.out.Chosen = run.chosen.Scorer
	}
	return nil
}

func printCalibrate(w io.Writer, out calibrateJSON, groups []*tuning.Group, in *tuning.ReportInput) error {
	fmt.Fprintf(w, "calibrating on %d sessions from %s\n", len(out.Sessions), out.DB)
	for _, g := range groups {
		fmt.Fprintf(w, "  replay: %s\n", g.Label())
	}
	for _, name := range in.InProcess {
		fmt.Fprintf(w, "  %s baseline: scored in this process (no %s replay stored)\n", name, name)
	}
	for _, d := range out.Dropped {
		fmt.Fprintf(w, "  left out: %s\n", d)
	}
	for _, d := range out.Omitted {
		fmt.Fprintf(w, "  left out: %s\n", d)
	}
	fmt.Fprintf(w, "objective %s, target miss rate %.3f\n\n", out.Report.Objective, out.Report.TargetMiss)
	if err := out.Report.WriteText(w); err != nil {
		return err
	}
	if in.Factor > 0 {
		fmt.Fprintf(w, "\nremaining steps: a session that has made t calls makes %.3f x t more on average here (least squares over %d sessions); the planner prices with remaining_factor %.3f (--remaining-factor)\n", in.Factor, len(in.Lengths), out.Report.Options.Estimator.Factor)
	}
	for _, b := range out.Report.Budgets {
		printBudgetSummary(w, b)
	}
	return nil
}

// printBudgetSummary states, for one budget, what the advisor's row (or, without one,
// the oracle) did against keep-all and the oracle under the same regime.
func printBudgetSummary(w io.Writer, b calibrate.BudgetReport) {
	var keepAll, oracle calibrate.Result
	for _, x := range b.Baselines {
		switch x.Name {
		case "keep-all":
			keepAll = x
		case "oracle":
			oracle = x
		}
	}
	fmt.Fprintf(w, "\nat budget %d: keep-all pays $%.2f and is over budget at %d calls; the oracle (same regime) nets $%.2f, %d calls over budget, %d sessions costlier",
		b.Budget, b.KeepAllUSD, keepAll.Applied.StepsOverBudget, oracle.Applied.NetUSD, oracle.Applied.StepsOverBudget, oracle.Applied.SessionsCostlier)
	if a := b.Advisor; a != nil {
		removed, best := keepAll.Applied.StepsOverBudget-a.Applied.StepsOverBudget, keepAll.Applied.StepsOverBudget-oracle.Applied.StepsOverBudget
		reduction := "the oracle reduces none"
		if best > 0 {
			reduction = fmt.Sprintf("%.0f%% of the oracle's reduction", 100*float64(removed)/float64(best))
		}
		fmt.Fprintf(w, "; the advisor nets $%.2f, %d calls over budget (%s), %d sessions costlier, %d rewrites",
			a.Applied.NetUSD, a.Applied.StepsOverBudget, reduction, a.Applied.SessionsCostlier, a.Applied.Rewrites)
		if a.Applied.NetUSD < 0 {
			fmt.Fprintf(w, " (costlier than doing nothing here: keep-all pays less at this budget and window)")
		}
	}
	fmt.Fprintln(w, ".")
}

// lowestCutoffWarning is the warning calibrate --write-config gives when the cutoff it
// writes is the lowest of the sweep (its first entry): no output scores under it, so
// the config written never prunes by score (the rules and the budget still act).
// That is the honest recommendation when no higher cutoff meets the miss target, but
// a user who asked for a cutoff expects to hear it. "" otherwise.
func lowestCutoffWarning(sr *calibrate.ScorerSweep) string {
	rec := sr.Recommendation
	if rec.None || len(sr.Sweep) == 0 || rec.Cutoff > sr.Sweep[0].Cutoff {
		return ""
	}
	qualify := 0
	for _, r := range sr.Sweep {
		if r.MissRate <= rec.TargetMiss {
			qualify++
		}
	}
	return fmt.Sprintf("cutoff %s for scorer %s is the lowest swept: no output scores under it, so the config written prunes nothing by score "+
		"(%d of %d cutoffs meet --target-miss %.3f; replaying more sessions or a higher --target-miss may give one that does)",
		calibrate.CutoffText(rec.Cutoff), sr.Scorer, qualify, len(sr.Sweep), rec.TargetMiss)
}
