package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/tuning"
)

// defaultSchedules is --schedules' default: every step (the reference), every 3
// steps, the docs/DESIGN.md default doubling schedule, and a slower doubling.
const defaultSchedules = "1;3;3,6,12,24;6,12,24,48"

type backoffFlags struct {
	priceFlags
	db        string
	schedules string
	scorer    string
	model     string
	settings  []string
	budget    int
	tolerance float64
	workers   int
	asJSON    bool
	memory    memoryFlag
}

// backoffJSON is backoff's --json output.
type backoffJSON struct {
	DB      string               `json:"db"`
	Replay  string               `json:"replay"`
	Scorer  string               `json:"scorer"`
	Budget  int                  `json:"budget"`
	Dropped []string             `json:"dropped,omitempty"`
	Report  tuning.BackoffReport `json:"report"`
}

func backoffCmd(e *env) *cobra.Command {
	var f backoffFlags
	c := &cobra.Command{
		Use:   "backoff",
		Short: "Replay the stored sessions under several ask back-off schedules and recommend one",
		Long: `backoff reads the sessions of a stored replay again (their paths are in --db; a file
whose content changed since is left out) and replays each in this process under every
schedule of --schedules (separated by ';', each in the advisor's syntax: "1" every
step, "every:K" or "K", "3,6,12,24", "doubling:F[:M]"), with the replay's advisor
settings and scorer. Every-step asking ("1") is the reference and is added first when
missing; the default list also holds the schedule the replay's scorer was asked by
(its scorer_schedules entry, else schedule). Nothing is written to --db.

For each schedule it reports asks (and asks per candidate output), scorer tokens
(the request the Ollama scorer would send, estimated) and scorer time, prunes that
came later than under every-step asking and the token-steps that cost, prunes that
came earlier, decisions that changed (pruned under one schedule only), and the
savings: token-steps saved, misses, cache rewrites and net dollars (calibrate's
accounting at the replay's cutoff, at the decision level: its pruned, misses and
rewrites count decisions, so they differ from calibrate's applied rows). It
recommends the schedule with the fewest scorer tokens among those saving at least
(1 - --tolerance) of the reference's token-steps with no more misses. Apply it with
--schedule, or scorer_schedules (for that scorer; it overrides schedule) in the
config.

Re-asks happen only while a session is over its budget (docs/DESIGN.md step 5), so
schedules differ only on sessions that grow past it; --budget lowers the budget to
see the schedules at work on smaller sessions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBackoff(cmd.Context(), e, f)
		},
	}
	f.priceFlags.register(c)
	c.Flags().StringVar(&f.db, "db", defaultDBPath(), "store holding the replay: an SQLite file, or a postgres:// URL")
	c.Flags().StringVar(&f.schedules, "schedules", defaultSchedules, "schedules to compare, separated by ';'")
	c.Flags().StringVar(&f.scorer, "scorer", "stored", "stored (the replay's scorer) | lexical | ollama | none")
	c.Flags().StringVar(&f.model, "model", ollama.DefaultModel, "Ollama model for --scorer ollama")
	c.Flags().StringSliceVar(&f.settings, "settings", nil, "use the replay whose settings hash starts with this prefix (default: the one with the most sessions)")
	c.Flags().IntVar(&f.budget, "budget", 0, "context budget in tokens for every schedule (default: the replay's)")
	c.Flags().Float64Var(&f.tolerance, "tolerance", 0.02, "share of the reference's token-steps a recommended schedule may give up")
	c.Flags().IntVar(&f.workers, "workers", 0, "sessions replayed at once (default: the number of CPUs, 1 with Ollama)")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	f.memory.register(c)
	return c
}

// storedScorer rebuilds the scorer a replay recorded: "lexical", "none" (nil),
// "keep", "fitted" (the embedded model), "fitted:FILE" when the replay's config
// names that model file (model_file), or "ollama:MODEL:PROMPT" (prompt p1 or p2).
func storedScorer(name string, cfg advisor.Config) (advisor.Scorer, error) {
	switch {
	case name == replay.ScorerNone:
		return nil, nil
	case name == "lexical":
		return lexical.New(), nil
	case name == "keep":
		return fitted.KeepScorer{}, nil
	case name == "fitted":
		return fitted.NewDefault()
	case cfg.ModelFile != "" && name == "fitted:"+filepath.Base(cfg.ModelFile):
		m, err := fitted.Load(cfg.ModelFile)
		if err != nil {
			return nil, err
		}
		return fitted.New(m, filepath.Base(cfg.ModelFile)), nil
	}
	if model, prompt, ok := ollama.ParseName(name); ok {
		client, err := api.ClientFromEnvironment()
		if err != nil {
			return nil, fmt.Errorf("ollama client: %w", err)
		}
		sc := ollama.New(client, model)
		sc.Prompt = prompt
		return sc, nil
	}
	return nil, usageError{fmt.Errorf("cannot rebuild the stored scorer %q; choose one with --scorer lexical|ollama|none", name)}
}

func runBackoff(ctx context.Context, e *env, f backoffFlags) error {
	schedules, err := f.check()
	if err != nil {
		return err
	}
	restore, err := f.memory.apply()
	if err != nil {
		return err
	}
	defer restore()
	_, closeDB, groups, err := openGroups(ctx, f.db, f.settings)
	if err != nil {
		return err
	}
	defer closeDB()
	g := groups[0]
	cfg := g.Settings.Config
	if f.budget > 0 {
		cfg.Budget = f.budget
	}
	scorer, err := f.build(ctx, e, g, cfg)
	if err != nil {
		return err
	}
	if f.schedules == defaultSchedules {
		// The default list also holds the schedule the replay's scorer was asked
		// by (Config.ScheduleFor: its scorer_schedules entry, e.g. the fitted
		// scorer's 1,1,2,3,6,12,24), so that it is compared with the others.
		if schedules, err = tuning.ParseSchedules(f.schedules + ";" + cfg.ScheduleFor(scorer.Name())); err != nil {
			return err
		}
	}
	comparison, err := f.comparison(g, cfg, scorer, schedules)
	if err != nil {
		return err
	}
	out := backoffJSON{DB: storage.Redact(f.db), Replay: g.Label(), Budget: cfg.BudgetTokens(), Scorer: replay.ScorerNone}
	if scorer != nil {
		out.Scorer = scorer.Name()
	}
	workers := f.workers
	if workers == 0 {
		workers = defaultWorkers(scorer)
	}
	// Each session is replayed under every schedule, folded into the comparison
	// in session order, and forgotten: memory stays flat in the number of sessions.
	err = tuning.ReplaySchedules(ctx, g.Sessions, g.Settings.Lenient, comparison.replayers, comparison.Comparison, max(workers, 1), func(path string, err error) {
		out.Dropped = append(out.Dropped, fmt.Sprintf("%s: %v", path, err))
		fmt.Fprintf(e.stderr, "pruneadvisor: backoff: %s left out: %v\n", path, err)
	})
	if err != nil {
		return err
	}
	return f.report(e, out, comparison.Report())
}

// check validates the flags and returns the schedules to compare
// (tuning.ParseSchedules). Errors are usageErrors.
func (f *backoffFlags) check() ([]string, error) {
	schedules, err := tuning.ParseSchedules(f.schedules)
	if err != nil {
		return nil, usageError{err}
	}
	if f.tolerance < 0 || f.tolerance > 1 || f.tolerance != f.tolerance {
		return nil, usageError{fmt.Errorf("--tolerance %v: want a share in [0,1]", f.tolerance)}
	}
	if f.budget < 0 {
		return nil, usageError{fmt.Errorf("--budget %d: want a positive number of tokens", f.budget)}
	}
	return schedules, nil
}

// build returns the scorer the schedules are replayed with: the stored replay's
// (storedScorer), or the one --scorer names.
func (f *backoffFlags) build(ctx context.Context, e *env, g *tuning.Group, cfg advisor.Config) (advisor.Scorer, error) {
	switch f.scorer {
	case "stored":
		return storedScorer(g.Scorer, cfg)
	case "lexical", "ollama", "none":
		return (&scorerFlags{kind: f.scorer, model: f.model, timeout: ollama.DefaultTimeout}).build(ctx, e)
	}
	return nil, usageError{fmt.Errorf("--scorer %q: want stored, lexical, ollama or none", f.scorer)}
}

// scheduleComparison is a comparison of schedules with the replayers that make
// its records, one per schedule.
type scheduleComparison struct {
	*tuning.Comparison
	replayers []*replay.Replayer
}

// comparison returns the replayers of the schedules (tuning.ScheduleReplayers,
// sizing asks as the Ollama scorer's requests) and a comparison of them at the
// scorer's own cutoff (advisor.Config.CutoffOf: scorer_cutoffs, e.g. 0.05 for
// fitted, as the replayed advisor used it), priced under cfg and the price flags.
// Errors: a schedule the config refuses (usageError), the flags', and
// tuning.NewComparison's.
func (f *backoffFlags) comparison(g *tuning.Group, cfg advisor.Config, scorer advisor.Scorer, schedules []string) (scheduleComparison, error) {
	replayers, err := tuning.ScheduleReplayers(g, cfg, scorer, schedules, ollama.Sizer{})
	if err != nil {
		return scheduleComparison{}, usageError{err}
	}
	opts, err := f.priceFlags.options(cfg)
	if err != nil {
		return scheduleComparison{}, err
	}
	c, err := tuning.NewComparison(schedules, cfg.CutoffOf(scorer), opts, f.tolerance)
	if err != nil {
		return scheduleComparison{}, err
	}
	return scheduleComparison{c, replayers}, nil
}

// report prints the comparison's report (as JSON with --json). Errors: no
// session could be replayed; the JSON encoder's.
func (f *backoffFlags) report(e *env, out backoffJSON, rep tuning.BackoffReport) error {
	if rep.Sessions == 0 {
		return fmt.Errorf("backoff: no session could be replayed")
	}
	out.Report = rep
	if f.asJSON {
		return e.printJSON(out)
	}
	printBackoff(e.stdout, out)
	return nil
}

func printBackoff(w io.Writer, out backoffJSON) {
	rep := out.Report
	fmt.Fprintf(w, "back-off over %d sessions of replay %s\n", rep.Sessions, out.Replay)
	fmt.Fprintf(w, "scorer %s, cutoff %s, budget %d tokens; reference %q\n", out.Scorer, calibrate.CutoffText(rep.Cutoff), out.Budget, rep.Reference)
	for _, d := range out.Dropped {
		fmt.Fprintf(w, "  left out: %s\n", d)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "schedule\tasks\tasks/cand\tscorer tokens\tscorer time\tover-budget steps\tlater\tlater token-steps\tearlier\tchanged\tpruned\tmisses\ttoken-steps\trewrites\tnet $\t\n")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t\n",
			r.Schedule, r.Asks, r.AsksPerCandidate, r.ScorerTokens, r.ScorerTime.Round(time.Millisecond), r.OverBudgetSteps,
			r.Later, r.LaterTokenSteps, r.Earlier, r.Changed, r.Result.Pruned, r.Result.Misses, r.Result.TokenSteps,
			r.Result.Applied.Rewrites, r.Result.Applied.NetUSD)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nrecommended schedule: %s (%s)\n", rep.Recommended, rep.Reason)
	fmt.Fprintf(w, "apply it with --schedule %q (which clears scorer_schedules), or in the config as the scorer's scorer_schedules entry (an entry there overrides schedule)\n", rep.Recommended)
}
