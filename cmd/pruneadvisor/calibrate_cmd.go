package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/planner"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// replayGroup is the finished replays stored under one settings hash.
type replayGroup struct {
	hash     string
	settings replay.Settings
	scorer   string
	sessions []storage.ReplayedSession // by path
}

// label names the group in reports: its scorer, settings hash and cutoff.
func (g *replayGroup) label() string {
	return fmt.Sprintf("%s (settings %s, cutoff %.2f, schedule %s, %d sessions)", g.scorer, short(g.hash), g.settings.Config.CutoffFor(g.scorer), g.settings.Config.Schedule, len(g.sessions))
}

// loadGroups reads the finished replays of db grouped by settings, most sessions
// first (then by hash).
func loadGroups(ctx context.Context, db *storage.DB) ([]*replayGroup, error) {
	rs, err := db.ReplayedSessions(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]*replayGroup{}
	var groups []*replayGroup
	for _, r := range rs {
		g := by[r.SettingsHash]
		if g == nil {
			st, err := replay.ParseSettings(r.Settings)
			if err != nil {
				return nil, fmt.Errorf("settings %s: %w", short(r.SettingsHash), err)
			}
			g = &replayGroup{hash: r.SettingsHash, settings: st, scorer: r.Scorer}
			by[r.SettingsHash] = g
			groups = append(groups, g)
		}
		g.sessions = append(g.sessions, r)
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("no finished replays in %s: run `pruneadvisor replay --db %s PATH...` first", db.Path(), db.Path())
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if len(groups[i].sessions) != len(groups[j].sessions) {
			return len(groups[i].sessions) > len(groups[j].sessions)
		}
		return groups[i].hash < groups[j].hash
	})
	return groups, nil
}

// openGroups opens the replay store at path and returns the replays selected by
// settings-hash prefixes (selectGroups); the caller closes the store. A missing
// SQLite file is errNoStore (requireStore), not created.
func openGroups(ctx context.Context, path string, prefixes []string) (*storage.DB, func(), []*replayGroup, error) {
	if err := requireStore(path, hintReplayFirst(path)); err != nil {
		return nil, nil, nil, err
	}
	db, closeDB, err := openStore(ctx, path)
	if err != nil {
		return nil, nil, nil, err
	}
	all, err := loadGroups(ctx, db)
	if err == nil {
		var groups []*replayGroup
		if groups, err = selectGroups(all, prefixes); err == nil {
			return db, closeDB, groups, nil
		}
	}
	closeDB()
	return nil, nil, nil, err
}

// selectGroups keeps the groups whose settings hash starts with one of prefixes
// (all groups when prefixes is empty), in loadGroups order.
func selectGroups(groups []*replayGroup, prefixes []string) ([]*replayGroup, error) {
	if len(prefixes) == 0 {
		return groups, nil
	}
	var out []*replayGroup
	for _, g := range groups {
		for _, p := range prefixes {
			if p != "" && strings.HasPrefix(g.hash, p) {
				out = append(out, g)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, usageError{fmt.Errorf("--settings %s matches no stored replay; stored: %s", strings.Join(prefixes, ","), groupList(groups))}
	}
	return out, nil
}

func groupList(groups []*replayGroup) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g.label()
	}
	return strings.Join(parts, "; ")
}

// parallel runs fn(i) for i in [0, n) on up to workers goroutines and returns the
// errors by index.
func parallel(n, workers int, fn func(i int) error) []error {
	errs := make([]error, n)
	if workers < 1 {
		workers = runtime.NumCPU()
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}

// loadSource reads a stored session's file again and checks its content hash.
func loadSource(rs storage.ReplayedSession, lenient bool) (*replay.Source, error) {
	if rs.Path == "" {
		return nil, fmt.Errorf("session %s has no stored path", rs.ID)
	}
	src, err := replay.Load(rs.Path, lenient)
	if err != nil {
		return nil, err
	}
	if src.ContentHash != rs.ContentHash {
		return nil, fmt.Errorf("%s: %w (stored %s, now %s)", rs.Path, replay.ErrChanged, short(rs.ContentHash), short(src.ContentHash))
	}
	return src, nil
}

type calibrateFlags struct {
	priceFlags
	budgets     []int
	windows     []int
	budgetSet   bool // --budget was given
	db          string
	targetMiss  float64
	objective   string
	plot        string
	asJSON      bool
	writeConfig string
	scorer      string
	settings    []string
	recency     []int
	bins        int
	seed        uint64
	workers     int
}

// calibrateJSON is calibrate's --json output: replay.Calibration, which the report
// page shows too (report.go), so the two cannot disagree.
type calibrateJSON = replay.Calibration

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
first stored scorer) into an advisor config file, keeping its other fields.`,
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
	out, sr, br := run.out, run.chosen, run.budget
	if err := run.digestSweep(f); err != nil {
		return err
	}
	if f.plot != "" {
		if err := writePlot(f.plot, out.Report); err != nil {
			return err
		}
	}
	var writeErr error
	if f.writeConfig != "" {
		if sr.Recommendation.None {
			writeErr = fmt.Errorf("calibrate: no cutoff of scorer %s meets --target-miss %.3f (%s); %s not written", sr.Scorer, f.targetMiss, sr.Recommendation.Reason, f.writeConfig)
		} else if writeErr = writeCutoff(f.writeConfig, sr.Scorer, sr.Recommendation.Cutoff, run.opts.SizeExponent, 0); writeErr == nil {
			out.Wrote = f.writeConfig
			if w := lowestCutoffWarning(sr); w != "" {
				fmt.Fprintf(e.stderr, "pruneadvisor: calibrate: warning: %s\n", w)
			}
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		if err := printCalibrate(e.stdout, *out, run.groups, run.in); err != nil {
			return err
		}
		if c := run.lagCompare; len(out.LagCost) > 0 {
			fmt.Fprintln(e.stdout)
			if err := printLagCost(e.stdout, out.LagCost, c[0].scorer, c[0].settings.Config.BudgetTokens()); err != nil {
				return err
			}
		}
		fmt.Fprintln(e.stdout)
		run.in.digest.Print(e.stdout)
		printDigestSweep(e.stdout, out, f.targetMiss)
		if out.Wrote != "" {
			fmt.Fprintf(e.stdout, "\nwrote cutoff %.2f for scorer %s (objective %s, target miss %.3f, budget %d) to %s\n",
				sr.Recommendation.Cutoff, sr.Scorer, out.Report.Objective, f.targetMiss, br.Budget, out.Wrote)
		}
		if f.plot != "" {
			fmt.Fprintf(e.stdout, "plot written to %s\n", f.plot)
		}
	}
	return writeErr
}

// calibrationRun is one calibration computed from a store (computeCalibration):
// what calibrate prints, and what the report page shows.
type calibrationRun struct {
	out     *calibrateJSON
	groups  []*replayGroup
	in      *calibration
	db      *storage.DB
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
	// one without first (splitLag; nil when no selected replay has a lag); groups
	// are then those without a lag.
	lagCompare []*replayGroup
}

// computeCalibration opens f.db and computes the calibration calibrate prints;
// withStubs also reads every stubbed output's decision (the report's table of
// stubs: calibration.stubs). The caller calls closeDB. Errors: bad flags
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
	compare, groups := splitLag(groups)
	run := &calibrationRun{db: db, closeDB: closeDB, groups: groups, lagCompare: compare}
	if err := run.compute(ctx, e, f, ob, withStubs); err != nil {
		closeDB()
		return nil, err
	}
	if compare != nil && !withStubs {
		lag, err := lagCost(ctx, e, db, compare, &f)
		if err != nil {
			closeDB()
			return nil, err
		}
		run.out.LagCost = lag
	}
	return run, nil
}

func (run *calibrationRun) compute(ctx context.Context, e *env, f calibrateFlags, ob calibrate.Objective, withStubs bool) error {
	groups := run.groups
	in, err := buildCalibration(ctx, e, run.db, groups, f.workers, withStubs)
	if err != nil {
		return err
	}
	run.in = in
	base := groups[0].settings.Config
	opts, err := f.priceFlags.options(base)
	if err != nil {
		return err
	}
	opts.Bins, opts.Seed, opts.PerSession = f.bins, f.seed, f.asJSON
	for i := range in.sessions {
		in.sessions[i].Provider = f.sessionProvider(in.sessions[i].Provider)
	}
	for _, b := range f.budgets {
		if b <= 0 {
			return usageError{fmt.Errorf("--budget %d: want a positive number of tokens", b)}
		}
	}
	for _, w := range f.windows {
		if w < 1000 {
			return usageError{fmt.Errorf("--window %d: want a context window of at least 1,000 tokens", w)}
		}
	}
	opts.Window, opts.CompactionOf = base.ContextWindow, replay.CompactionOf(base)
	budgets := f.budgets
	if len(f.windows) > 0 && !f.budgetSet {
		budgets = nil // each window's own budget: the config's fraction of it
	}
	adv := &calibrate.AdvisorInput{Scorer: scorerLabel(groups[0], groups), Cutoff: base.CutoffFor(groups[0].scorer), Budget: base.BudgetTokens(), Window: base.ContextWindow, AppliedAt: in.applied}
	if groups[0].scorer == replay.ScorerNone {
		adv = nil
	}
	rep, err := calibrate.NewReport(in.base, in.sessions, in.scorers, calibrate.ReportConfig{
		Options: opts, Budgets: budgets, Windows: f.windows, Recency: f.recency, TargetMiss: f.targetMiss, Objective: ob, Advisor: adv,
	})
	if err != nil {
		if errors.Is(err, calibrate.ErrInvalid) && len(groups) > 1 {
			return fmt.Errorf("%w\nthe replays were made with different protection settings; pick one with --settings (stored: %s)", err, groupList(groups))
		}
		return err
	}
	run.opts, run.replayBudget = opts, base.BudgetTokens()
	if factor, ok := planner.FitFactor(in.lengths); ok {
		in.factor = factor
	}
	out := &calibrateJSON{DB: storage.Redact(f.db), Report: rep, Dropped: in.dropped, Omitted: in.omitted}
	for _, g := range groups {
		out.Groups = append(out.Groups, g.label())
	}
	out.Sessions = in.names
	out.Digests, out.DigestBudget = in.digest.Result(), -1
	if b, _, ok := in.digest.Recommend(); ok {
		out.DigestBudget = b
	}
	run.out = out
	chosen := f.scorer
	if chosen == "" {
		chosen = in.primary
	}
	// The recommendation written is the one at the replay's own budget when it was
	// priced, else at the first budget.
	br := rep.Budgets[0]
	for _, b := range rep.Budgets {
		if b.Budget == base.BudgetTokens() && b.Window == base.ContextWindow {
			br = b
		}
	}
	run.budget = br
	for i := range br.Scorers {
		if br.Scorers[i].Scorer == chosen {
			run.chosen = &br.Scorers[i]
		}
	}
	if run.chosen == nil && (f.scorer != "" || f.writeConfig != "") {
		names := make([]string, len(br.Scorers))
		for i, s := range br.Scorers {
			names[i] = s.Scorer
		}
		return usageError{fmt.Errorf("--scorer %q: no such scorer in the report (have %s)", chosen, strings.Join(names, ", "))}
	}
	if run.chosen != nil {
		out.Chosen = run.chosen.Scorer
	}
	return nil
}

// writeCutoff sets the cutoff of scorer (scorer_cutoffs, and cutoff itself for the
// lexical scorer and others without a default entry), the size exponent it was
// chosen under (size_exponent: the replay's, since a cutoff means a threshold only
// with its exponent) and, when factor > 0, the remaining-steps factor the replayed
// sessions fit, in an advisor config file, keeping its other fields (a missing file
// starts from the defaults).
func writeCutoff(path, scorer string, cutoff, exponent, factor float64) error {
	return updateConfig(path, func(cfg *advisor.Config) {
		cfg.SizeExponent = exponent
		if cfg.ScorerCutoffs == nil {
			cfg.ScorerCutoffs = map[string]float64{}
		}
		cfg.ScorerCutoffs[scorer] = cutoff
		if _, ok := advisor.DefaultConfig().ScorerCutoffs[scorer]; !ok {
			cfg.Cutoff = cutoff
		}
		if factor > 0 {
			cfg.RemainingFactor = min(factor, 100)
		}
	})
}

// updateConfig applies change to the advisor config file at path and writes it
// back, keeping its other fields; a missing file starts from the defaults. Errors:
// the file's read or validation error (naming it), or the write's.
func updateConfig(path string, change func(*advisor.Config)) error {
	cfg, err := advisor.LoadConfig(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		cfg = advisor.DefaultConfig()
	}
	change(&cfg)
	return advisor.WriteConfig(path, cfg)
}

// calibration is what NewReport needs, gathered from the store.
type calibration struct {
	base     []calibrate.Output
	sessions []calibrate.Calls
	scorers  []calibrate.ScorerInput
	names    []string // session display names (path), by calibrate session order
	dropped  []string // sessions left out, with the reason
	primary  string   // the first stored scorer other than none and keep, else "fitted"
	inProc   []string // the baselines scored in this process
	omitted  []string // baselines left out, with the reason
	applied  []int    // the base replay's own stub steps, per base output (AppliedSteps)
	lengths  []int    // steps of each session
	factor   float64  // planner.FitFactor of lengths (0: none)
	digest   *replay.DigestCoverage
	// digestOuts[i] are the base outputs with stubs of digest budget
	// replay.DigestBudgets[i] (Record.CalibrateOutputsAt), for the digest sweep.
	digestOuts [][]calibrate.Output
	stubs      []replay.Stub // the advisor's stubs, per session in order (buildCalibration withStubs)
}

// buildCalibration loads the groups' records over the sessions they all hold, and
// scores the lexical baseline in process when no group holds lexical asks.
func buildCalibration(ctx context.Context, e *env, db *storage.DB, groups []*replayGroup, workers int, withStubs bool) (*calibration, error) {
	in := &calibration{digest: replay.NewDigestCoverage()}
	// Sessions every group holds, by content hash, in the base group's order.
	count := map[string]int{}
	for _, g := range groups {
		for _, s := range g.sessions {
			count[s.ContentHash]++
		}
	}
	base := groups[0]
	var keep []storage.ReplayedSession
	for _, s := range base.sessions {
		if count[s.ContentHash] == len(groups) {
			keep = append(keep, s)
		} else {
			in.dropped = append(in.dropped, s.Path+": not replayed under every selected setting")
		}
	}
	stored := map[string]bool{}
	for _, g := range groups {
		stored[g.scorer] = true
		if in.primary == "" && g.scorer != replay.ScorerNone && g.scorer != "keep" {
			in.primary = g.scorer
		}
	}
	// Baselines scored in this process when the store holds no replay of them, so
	// every report sets the fitted and the lexical scorer beside the rest.
	var baselines []advisor.Scorer
	if !stored["lexical"] {
		baselines = append(baselines, lexical.New())
	}
	if !stored["fitted"] {
		fs, err := fitted.NewDefault()
		if err != nil {
			return nil, err
		}
		baselines = append(baselines, fs)
	}
	if in.primary == "" {
		in.primary = "fitted"
	}
	// A baseline is set beside the rest only when every kept session could be read
	// again and scored: a baseline on fewer sessions would not be comparable.
	var inProc []map[string]*replay.Record // per kept baseline, by content hash
	kept := baselines[:0]
	for _, sc := range baselines {
		recs, failed, err := scoreInProcess(ctx, base, keep, sc, workers)
		if err != nil {
			return nil, err
		}
		if failed != "" {
			in.omitted = append(in.omitted, fmt.Sprintf("%s baseline: %s", sc.Name(), failed))
			fmt.Fprintf(e.stderr, "pruneadvisor: calibrate: %s baseline left out: %s\n", sc.Name(), failed)
			continue
		}
		in.inProc = append(in.inProc, sc.Name())
		inProc = append(inProc, recs)
		kept = append(kept, sc)
	}
	baselines = kept
	if len(keep) == 0 {
		return nil, fmt.Errorf("calibrate: no session left to calibrate on (%s)", strings.Join(in.dropped, "; "))
	}
	want := map[string]bool{}
	for _, s := range keep {
		want[s.ContentHash] = true
	}
	extra := make([][]calibrate.Output, len(baselines))
	for gi, g := range groups {
		var outs []calibrate.Output
		for _, s := range g.sessions {
			if !want[s.ContentHash] {
				continue
			}
			rec, err := db.LoadReplay(ctx, s.ID)
			if err != nil {
				return nil, err
			}
			o := rec.CalibrateOutputs()
			outs = append(outs, o...)
			if gi == 0 {
				if in.digestOuts == nil {
					in.digestOuts = make([][]calibrate.Output, len(replay.DigestBudgets))
				}
				for i, b := range replay.DigestBudgets {
					in.digestOuts[i] = append(in.digestOuts[i], rec.CalibrateOutputsAt(b)...)
				}
				in.sessions = append(in.sessions, rec.CalibrateSession())
				in.names = append(in.names, s.Path)
				in.applied = append(in.applied, rec.AppliedSteps()...)
				in.lengths = append(in.lengths, rec.Steps)
				in.digest.Add(rec)
				if withStubs {
					if rec.Decisions, err = db.Decisions(ctx, storage.DecisionFilter{SessionID: s.ID, Decision: advisor.DecisionPending}); err != nil {
						return nil, err
					}
					in.stubs = append(in.stubs, rec.Stubs()...)
				}
				for k := range baselines {
					if lr := inProc[k][s.ContentHash]; lr != nil {
						l, err := withAsks(o, lr)
						if err != nil {
							return nil, err
						}
						extra[k] = append(extra[k], l...)
					}
				}
			}
		}
		if gi == 0 {
			in.base = outs
		}
		if g.scorer != replay.ScorerNone && g.scorer != "keep" {
			in.scorers = append(in.scorers, calibrate.ScorerInput{Name: scorerLabel(g, groups), Outputs: outs})
		}
		if gi == 0 {
			for k, sc := range baselines {
				in.scorers = append(in.scorers, calibrate.ScorerInput{Name: sc.Name(), Outputs: extra[k]})
			}
		}
	}
	return in, nil
}

// scoreInProcess replays the kept sessions with sc under the base group's settings
// and returns the records by content hash; failed names the first session that could
// not be read again or replayed (and how many did not), "" when all were.
func scoreInProcess(ctx context.Context, base *replayGroup, keep []storage.ReplayedSession, sc advisor.Scorer, workers int) (map[string]*replay.Record, string, error) {
	rp := &replay.Replayer{Config: base.settings.Config, Scorer: sc, Lenient: base.settings.Lenient, Sizer: ollama.Sizer{},
		AskLag: base.settings.AskLag, AskLatency: base.settings.AskLatency}
	recs := make([]*replay.Record, len(keep))
	errs := parallel(len(keep), workers, func(i int) error {
		src, err := loadSource(keep[i], base.settings.Lenient)
		if err != nil {
			return err
		}
		recs[i], err = rp.Replay(ctx, src)
		return err
	})
	out := map[string]*replay.Record{}
	failed, first := 0, ""
	for i, err := range errs {
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, "", cerr
			}
			if failed++; first == "" {
				first = fmt.Sprintf("%s: %v", keep[i].Path, err)
			}
			continue
		}
		out[keep[i].ContentHash] = recs[i]
	}
	if failed > 0 {
		return nil, fmt.Sprintf("%d of %d sessions not scored (%s)", failed, len(keep), first), nil
	}
	return out, "", nil
}

// scorerLabel names a group's scorer in the report: the scorer name, with the
// settings hash when two selected groups share a scorer.
func scorerLabel(g *replayGroup, groups []*replayGroup) string {
	n := 0
	for _, o := range groups {
		if o.scorer == g.scorer {
			n++
		}
	}
	if n > 1 {
		return g.scorer + "@" + short(g.hash)[:8]
	}
	return g.scorer
}

// withAsks returns outs (one session's base records) with the asks of rec, a
// replay of the same session under another scorer.
func withAsks(outs []calibrate.Output, rec *replay.Record) ([]calibrate.Output, error) {
	other := rec.CalibrateOutputs()
	if len(other) != len(outs) {
		return nil, fmt.Errorf("calibrate: %s: %d outputs in process, %d stored", rec.Path, len(other), len(outs))
	}
	res := make([]calibrate.Output, len(outs))
	for i := range outs {
		if other[i].Key != outs[i].Key {
			return nil, fmt.Errorf("calibrate: %s: output %d is %q in process, %q stored", rec.Path, i, other[i].Key, outs[i].Key)
		}
		res[i] = outs[i]
		res[i].Asks = other[i].Asks
	}
	return res, nil
}

func printCalibrate(w io.Writer, out calibrateJSON, groups []*replayGroup, in *calibration) error {
	fmt.Fprintf(w, "calibrating on %d sessions from %s\n", len(out.Sessions), out.DB)
	for _, g := range groups {
		fmt.Fprintf(w, "  replay: %s\n", g.label())
	}
	for _, name := range in.inProc {
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
	if in.factor > 0 {
		fmt.Fprintf(w, "\nremaining steps: a session that has made t calls makes %.3f x t more on average here (least squares over %d sessions); the planner prices with remaining_factor %.3f (--remaining-factor)\n", in.factor, len(in.lengths), out.Report.Options.Estimator.Factor)
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
		share := 1.0
		if best > 0 {
			share = float64(removed) / float64(best)
		}
		fmt.Fprintf(w, "; the advisor nets $%.2f, %d calls over budget (%.0f%% of the oracle's reduction), %d sessions costlier, %d rewrites",
			a.Applied.NetUSD, a.Applied.StepsOverBudget, 100*share, a.Applied.SessionsCostlier, a.Applied.Rewrites)
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
	return fmt.Sprintf("cutoff %.2f for scorer %s is the lowest swept: no output scores under it, so the config written prunes nothing by score "+
		"(%d of %d cutoffs meet --target-miss %.3f; replaying more sessions or a higher --target-miss may give one that does)",
		rec.Cutoff, sr.Scorer, qualify, len(sr.Sweep), rec.TargetMiss)
}
