package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/tuning"
)

type fitFlags struct {
	db          string
	out         string
	writeConfig string
	folds       int
	lambda      float64
	trees       int
	blend       float64
	targetMiss  float64
	settings    []string
	ablation    bool
	asJSON      bool
	workers     int
	dumpRows    string
	wordsFrom   []string
	drop        []string
}

// fitJSON is fit's --json output.
type fitJSON struct {
	DB      string                `json:"db"`
	Replay  string                `json:"replay"`
	Out     string                `json:"out,omitempty"`
	Wrote   string                `json:"wrote_config,omitempty"` // --write-config: the config now naming the model
	Model   *fitted.Model         `json:"model"`
	Weights []fitWeight           `json:"weights"`
	CV      *fitted.CV            `json:"cv"`
	Rel     calibrate.Reliability `json:"reliability"`
	Oracle  int64                 `json:"oracle_token_steps"`
	// Anchors sets each anchor regime beside the held-out scores' front
	// (tuning.Evaluation.Anchors).
	Anchors []calibrate.Dominance `json:"anchors"`
	// BySource is the held-out figures per PATH when fit was given several
	// (tuning.Evaluation.BySource).
	BySource []tuning.SourceCV `json:"by_source,omitempty"`
	Ablation []tuning.Ablation `json:"ablation,omitempty"`
}

type fitWeight struct {
	Feature string  `json:"feature"`
	Weight  float64 `json:"weight"`
	Doc     string  `json:"doc"`
}

func fitCmd(e *env) *cobra.Command {
	var f fitFlags
	c := &cobra.Command{
		Use:   "fit [PATH...]",
		Short: "Fit the scorer's model on the evidence of a replay store; cross-validate by session",
		Long: `fit trains the fitted scorer (a logistic regression, advisor/fitted) on a replay
store: one row per ask that carries the card's signals (the use history, age, size,
action, error flag, edits since, whether task or now name it, the lexical match),
labelled "the output was used at or after the ask's step" by the later-use
evidence. It cross-validates by session (--folds; no session on both sides of a
fold): AUC, Brier and a reliability table per fold and pooled, and the share of the
oracle's token-steps the held-out scores save at the best cutoff whose miss rate is at
most --target-miss (decision level: each output pruned at its first ask under the
cutoff). Then it fits on every row and writes the model file (--out).

Beside the regression fit grows --trees N gradient-boosted trees on the same rows
(default 100, as the embedded default has; depth 3, rate 0.05, leaves of at least
50 rows, 64 quantile thresholds per feature) and the model's keep-probability is
the mean of the regression's and the trees' (a version 2 model file, read by the
fitted scorer like any other); the cross-validation measures that mean. --trees 0
fits the regression alone (a version 1 file). docs/EVALUATION.md gives the figures
of both on ../shared/corpus and held out on ../shared/sessions.

With PATHs, fit first replays them into --db as a training replay: every candidate
kept and asked when it becomes one, then 1, 1, 2, 2, 3, 4, 6, 8 and 12 steps apart
and every 12 steps after, whatever the budget (scorer keep,
schedule ` + fitted.TrainingSchedule + `, reask_under_budget), so every output is seen at
many ages. Without PATHs it fits on what --db holds (the largest replay with signals,
or --settings). The default weights embedded in the binary are made by

  go run ./cmd/pruneadvisor fit --db /tmp/pruneadvisor-fit.db --out advisor/fitted/default_model.json ../shared/corpus

The training replay's labels count a plain word as a name only where agents rarely
write it: word statistics counted on the PATHs, or with --words-from on other
sessions (the embedded default's come from ../shared/corpus; a few sessions of your
own make thin statistics). With several PATHs the held-out figures are also given
per PATH; each anchor regime is set beside the held-out front.

--ablation also cross-validates with each feature dropped in turn (slow).

Exit codes: 0 done, 1 too few rows, a store or model error, 2 bad flags.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFit(cmd.Context(), e, args, f)
		},
	}
	c.Flags().StringVar(&f.db, "db", defaultDBPath(), "replay store to fit on (and to replay PATHs into)")
	c.Flags().StringVar(&f.out, "out", "", "write the model file here")
	c.Flags().StringVar(&f.writeConfig, "write-config", "", "also make the model the scorer of this advisor config file (model_file set to --out's absolute path; created if missing, its other fields kept)")
	c.Flags().IntVar(&f.folds, "folds", 5, "cross-validation folds (by session)")
	c.Flags().Float64Var(&f.lambda, "lambda", fitted.DefaultLambda, "L2 penalty on the standardised weights")
	c.Flags().IntVar(&f.trees, "trees", fitted.DefaultTreeOptions().Trees, "gradient-boosted trees grown beside the regression (depth 3, rate 0.05, leaves >= 50 rows; 100 measured best on ../shared/corpus), their probability averaged with the regression's (a version 2 model file; 0: the regression alone, a version 1 file)")
	c.Flags().Float64Var(&f.blend, "blend", fitted.DefaultBlend, "train on the miss label (a later use the stub's digest would not hold) and blend in this weight of a model trained on the use label (0: the use label alone)")
	c.Flags().Float64Var(&f.targetMiss, "target-miss", 0.02, "miss-rate target of the token-steps figure")
	c.Flags().StringSliceVar(&f.settings, "settings", nil, "fit on the replay whose settings hash starts with this prefix")
	c.Flags().BoolVar(&f.ablation, "ablation", false, "cross-validate again with each feature dropped in turn")
	c.Flags().StringSliceVar(&f.drop, "drop", nil, "fit without these features (names as printed under weights): a model to replay beside the default, as --ablation measures one dropped feature in cross-validation")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	c.Flags().IntVar(&f.workers, "workers", 0, "sessions replayed at once for PATHs (default: the number of CPUs)")
	c.Flags().StringSliceVar(&f.wordsFrom, "words-from", nil, "count the word statistics (which plain words agents write anyway: the label's clause Specific) on these paths instead of the PATHs fitted on (the embedded default: ../shared/corpus)")
	c.Flags().StringVar(&f.dumpRows, "dump-rows", "", "write the training rows and outputs as CSV files into this folder (for probing models outside Go)")
	_ = c.Flags().MarkHidden("dump-rows")
	return c
}

func runFit(ctx context.Context, e *env, paths []string, f fitFlags) error {
	for _, d := range f.drop {
		if !slices.Contains(fitted.FeatureNames(), d) {
			return usageError{fmt.Errorf("--drop %q: no such feature (features: %s)", d, strings.Join(fitted.FeatureNames(), ", "))}
		}
	}
	if err := f.check(); err != nil {
		return err
	}
	set, words, closeDB, err := f.training(ctx, e, paths)
	if err != nil {
		return err
	}
	defer closeDB()
	if f.dumpRows != "" {
		if err := set.Dump(f.dumpRows); err != nil {
			return fmt.Errorf("fit: --dump-rows: %w", err)
		}
	}
	out, err := f.fit(set, words, paths)
	if err != nil {
		return err
	}
	if err := f.write(&out); err != nil {
		return err
	}
	if f.asJSON {
		return e.printJSON(out)
	}
	printFit(e.stdout, out)
	return nil
}

// check validates the flags (usageErrors).
func (f *fitFlags) check() error {
	if f.folds < 2 || f.folds > 100 {
		return usageError{fmt.Errorf("--folds %d: want 2 to 100", f.folds)}
	}
	if math.IsNaN(f.lambda) || f.lambda < 0 || math.IsInf(f.lambda, 0) {
		return usageError{fmt.Errorf("--lambda %v: want a finite number >= 0", f.lambda)}
	}
	if f.trees < 0 || f.trees > 5000 {
		return usageError{fmt.Errorf("--trees %d: want 0 to 5000", f.trees)}
	}
	if math.IsNaN(f.blend) || f.blend < 0 || f.blend >= 1 {
		return usageError{fmt.Errorf("--blend %v: want 0 to below 1", f.blend)}
	}
	if f.writeConfig != "" && f.out == "" {
		return usageError{fmt.Errorf("--write-config needs --out: the config names the model file")}
	}
	if f.targetMiss < 0 || f.targetMiss > 1 || f.targetMiss != f.targetMiss {
		return usageError{fmt.Errorf("--target-miss %v: want a rate in [0,1]", f.targetMiss)}
	}
	return nil
}

// training returns the training set: with PATHs, of their training replay
// (replayed into --db first, its word statistics counted: words), else of the
// largest replay with signals in --db (or --settings'); words is nil without
// PATHs. The caller calls closeDB.
func (f *fitFlags) training(ctx context.Context, e *env, paths []string) (set *tuning.TrainingSet, words *evidence.Background, closeDB func(), err error) {
	prefixes := f.settings
	if len(f.wordsFrom) > 0 && len(paths) == 0 {
		return nil, nil, nil, usageError{fmt.Errorf("--words-from needs PATHs: the word statistics label a training replay of them")}
	}
	if len(paths) > 0 {
		from := paths
		if len(f.wordsFrom) > 0 {
			from = f.wordsFrom
		}
		words = tuning.WordStats(from)
		if words == nil && len(f.wordsFrom) > 0 {
			return nil, nil, nil, fmt.Errorf("fit: --words-from: no session to count word statistics on in %s", strings.Join(from, ", "))
		}
		if words != nil {
			fmt.Fprintf(e.stderr, "pruneadvisor: fit: word statistics of %d sessions: %d plain words written in at least %.0f%% of them\n", words.Sessions, len(words.Counts), 100*words.MinShare)
		}
		hash, err := fitReplay(ctx, e, paths, *f, words)
		if err != nil {
			return nil, nil, nil, err
		}
		prefixes = []string{hash}
	}
	db, closeDB, groups, err := openGroups(ctx, f.db, prefixes)
	if err != nil {
		return nil, nil, nil, err
	}
	set, err = tuning.LoadTraining(ctx, replayStore{db}, groups)
	if err == nil {
		set.SetSources(paths)
	}
	if errors.Is(err, tuning.ErrNoSignals) {
		err = fmt.Errorf("fit: no ask of %s carries signals: replay with this version of pruneadvisor first (or give PATHs to replay)", db.Path())
	}
	if err != nil {
		closeDB()
		return nil, nil, nil, err
	}
	return set, words, closeDB, nil
}

// fit cross-validates and fits the model (tuning.TrainingSet.Fit) and names its
// word statistics and source. Without PATHs the stored replay's statistics are
// known by their digest only, and only the embedded default's can be named by
// it: an error otherwise.
func (f *fitFlags) fit(set *tuning.TrainingSet, words *evidence.Background, paths []string) (fitJSON, error) {
	opts := fitted.Options{Lambda: f.lambda, Blend: f.blend, Drop: f.drop}
	if f.trees > 0 {
		opts.Trees = fitted.DefaultTreeOptions()
		opts.Trees.Trees = f.trees
	}
	res, err := set.Fit(f.folds, opts, f.targetMiss, f.ablation)
	if err != nil {
		return fitJSON{}, fitError(err, set.Rows)
	}
	m, ev := res.Model, &res.Evaluation
	out := fitJSON{Model: m, CV: &ev.CV, Rel: ev.Reliability, Oracle: ev.Oracle, Ablation: res.Ablation, Anchors: ev.Anchors, BySource: ev.BySource}
	for i, ft := range fitted.Features {
		out.Weights = append(out.Weights, fitWeight{ft.Name, m.Weights[i], ft.Doc})
	}
	out.DB, out.Replay = f.db, set.Group.Label()
	if words == nil {
		def := fitted.DefaultBackground()
		if set.Group.Settings.Words != def.Digest() {
			return out, fmt.Errorf("fit: the replay %s was labelled under word statistics %s, not the embedded default's (%s): give the PATHs it replayed so fit can count them again", short(set.Group.Hash), set.Group.Settings.Words, def.Digest())
		}
		words = def
	}
	m.Words = words
	if len(paths) > 0 {
		m.Training.Source = strings.Join(paths, " ")
	}
	return out, nil
}

// write saves the model (--out) and names it in --write-config
// (tuning.WriteModelFile), noting both in out.
func (f *fitFlags) write(out *fitJSON) error {
	if f.out != "" {
		if err := out.Model.Save(f.out); err != nil {
			return err
		}
		out.Out = f.out
	}
	if f.writeConfig != "" {
		if err := tuning.WriteModelFile(f.writeConfig, f.out); err != nil {
			return fmt.Errorf("fit: --write-config: %w", err)
		}
		out.Wrote = f.writeConfig
	}
	return nil
}

// fitReplay replays paths into the store as a training replay
// (tuning.TrainingConfig, fitted.KeepScorer), its later-use evidence labelled
// under words, and returns its settings hash.
func fitReplay(ctx context.Context, e *env, paths []string, f fitFlags, words *evidence.Background) (string, error) {
	store, closeStore, err := openStore(ctx, f.db)
	if err != nil {
		return "", err
	}
	defer closeStore()
	rp := &replay.Replayer{Config: tuning.TrainingConfig(), Scorer: fitted.KeepScorer{}, Lenient: true, Logger: onceLogger(e.stderr), Sizer: ollama.Sizer{},
		Background: words}
	runner := &replay.Runner{Replayer: rp, Sink: store, Workers: f.workers}
	sum, err := runner.Run(ctx, paths)
	if err != nil {
		return "", fmt.Errorf("fit: training replay interrupted (%w)", err)
	}
	for _, fl := range sum.Failures {
		fmt.Fprintf(e.stderr, "pruneadvisor: fit: %s left out: %v\n", fl.Path, fl.Err)
	}
	fmt.Fprintf(e.stderr, "pruneadvisor: fit: training replay: %d sessions replayed, %d already stored, %d asks\n", sum.Replayed, sum.AlreadyDone, sum.Asks)
	if sum.Replayed+sum.AlreadyDone == 0 {
		return "", fmt.Errorf("fit: no session to fit on in %s (%d files not sessions, %d failed)",
			strings.Join(paths, ", "), sum.NotSessions, len(sum.Failures))
	}
	return rp.Settings().Hash(), nil
}

// fitError is fit's error for err from fitting rows: a too-few-rows error
// (fitted.ErrTooFew) with the training set's totals and what to do about it.
func fitError(err error, rows []fitted.Row) error {
	if !errors.Is(err, fitted.ErrTooFew) {
		return err
	}
	used, missed, sessions := 0, 0, map[string]bool{}
	for i := range rows {
		sessions[rows[i].Session] = true
		if rows[i].Used {
			used++
		}
		if rows[i].Miss {
			missed++
		}
	}
	fix := "fit on more sessions"
	if len(sessions) >= 2 {
		fix = fmt.Sprintf("every fold fits on the sessions outside it, which need at least %d rows used later and %d not: %s, or with fewer --folds", fitted.MinRows, fitted.MinRows, fix)
	}
	return fmt.Errorf("fit: %w; the training replay holds %d rows from %d sessions, %d of them used later (%d missed by the stub's digest): %s",
		err, len(rows), len(sessions), used, missed, fix)
}

func printFit(w io.Writer, out fitJSON) {
	m, cv := out.Model, out.CV
	if m.Blend != nil {
		fmt.Fprintf(w, "fitted on %s: %d sessions, %d rows (%d used later, %d of them missed by the stub's digest; blend %.2f of the use label)\n", out.Replay, m.Training.Sessions, m.Training.Rows, m.Blend.Training.Positives, m.Training.Positives, m.BlendWeight)
	} else {
		fmt.Fprintf(w, "fitted on %s: %d sessions, %d rows (%d used later, %d not)\n", out.Replay, m.Training.Sessions, m.Training.Rows, m.Training.Positives, m.Training.Negatives)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\ncross-validation by session, %d folds\nfold\tsessions\trows\tAUC\tBrier\t\n", cv.Folds)
	for i, f := range cv.PerFold {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.4f\t%.4f\t\n", i+1, f.Sessions, f.Rows, f.AUC, f.Brier)
	}
	fmt.Fprintf(tw, "pooled\t\t%d\t%.4f\t%.4f\t\n", m.Training.Rows, cv.AUC, cv.Brier)
	tw.Flush()
	if left := cv.Folds - len(cv.PerFold); left > 0 {
		fmt.Fprintf(w, "(%d of the %d folds have no figures of their own: no session fell in it, the sessions outside it had too few rows used later or not to fit on, or its rows were all of one class)\n", left, cv.Folds)
	}
	fmt.Fprintf(w, "\nheld-out reliability\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "bin\tn\tused later\trate\tmean score\t\n")
	for _, b := range out.Rel.Bins {
		fmt.Fprintf(tw, "[%.2f,%.2f)\t%d\t%d\t%.3f\t%.3f\t\n", b.Lo, b.Hi, b.N, b.Used, b.Rate, b.MeanScore)
	}
	tw.Flush()
	if cv.Cutoff >= 0 {
		fmt.Fprintf(w, "\nheld out, at cutoff %s (miss rate %.3f <= %.3f) the scores save %.1f%% of the oracle's token-steps (the oracle's: %d)\n",
			calibrate.CutoffText(cv.Cutoff), cv.MissRate, cv.TargetMiss, 100*cv.TokenStepsShare, out.Oracle)
	} else {
		fmt.Fprintf(w, "\nheld out, no cutoff keeps the miss rate at or under %.3f\n", cv.TargetMiss)
	}
	printAnchors(w, "", out.Anchors)
	printBySource(w, out.BySource)
	fmt.Fprintf(w, "\nweights (standardised features)\n")
	ws := append([]fitWeight(nil), out.Weights...)
	sort.SliceStable(ws, func(i, j int) bool { return math.Abs(ws[i].Weight) > math.Abs(ws[j].Weight) })
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, x := range ws {
		fmt.Fprintf(tw, "  %s\t%+.4f\t%s\n", x.Feature, x.Weight, x.Doc)
	}
	fmt.Fprintf(tw, "  bias\t%+.4f\n", m.Bias)
	tw.Flush()
	if len(out.Ablation) > 0 {
		fmt.Fprintf(w, "\nablation: each feature dropped in turn (cross-validated)\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "dropped\tAUC\tdelta AUC\tshare of oracle\tdelta share\t\n")
		for _, a := range out.Ablation {
			fmt.Fprintf(tw, "%s\t%.4f\t%+.4f\t%.3f\t%+.3f\t\n", a.Dropped, a.AUC, a.AUC-cv.AUC, a.TokenStepsShare, a.TokenStepsShare-cv.TokenStepsShare)
		}
		tw.Flush()
	}
	if out.Out != "" {
		fmt.Fprintf(w, "\nmodel written to %s\n", out.Out)
	}
	if out.Wrote != "" {
		fmt.Fprintf(w, "%s now names it (model_file): every command run with --config %s scores with it\n", out.Wrote, out.Wrote)
	}
}

// printBySource prints the held-out figures per PATH (fitJSON.BySource), when
// fit was given several.
func printBySource(w io.Writer, srcs []tuning.SourceCV) {
	if len(srcs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nheld out, by source (the same scores, each PATH's sessions alone)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "source\tsessions\trows\tAUC\tBrier\tcutoff\tmiss rate\tshare of oracle\t\n")
	for _, s := range srcs {
		if s.Cutoff < 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%.4f\t-\t-\t-\t\n", s.Source, s.Sessions, s.Rows, s.AUC, s.Brier)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.3f\t%.1f%%\t\n", s.Source, s.Sessions, s.Rows, s.AUC, s.Brier, s.Cutoff, s.MissRate, 100*s.TokenStepsShare)
	}
	tw.Flush()
	for _, s := range srcs {
		printAnchors(w, s.Source+": ", s.Anchors)
	}
}

// printAnchors prints each anchor regime beside the held-out scores' front
// (calibrate's wording: its point, and the dominating cutoff or "not dominated").
func printAnchors(w io.Writer, prefix string, ds []calibrate.Dominance) {
	if len(ds) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%sanchors beside the held-out front (decision level, each output pruned at its first held-out ask under the cutoff):\n", prefix)
	calibrate.WriteDominance(w, ds)
}
