package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/internal/forecast"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

type fitFlags struct {
	db          string
	out         string
	writeConfig string
	folds       int
	lambda      float64
	targetMiss  float64
	settings    []string
	ablation    bool
	asJSON      bool
	workers     int
	dumpRows    string
}

// fitJSON is fit's --json output.
type fitJSON struct {
	DB       string                `json:"db"`
	Replay   string                `json:"replay"`
	Out      string                `json:"out,omitempty"`
	Wrote    string                `json:"wrote_config,omitempty"` // --write-config: the config now naming the model
	Model    *fitted.Model         `json:"model"`
	Weights  []fitWeight           `json:"weights"`
	CV       *fitted.CV            `json:"cv"`
	Rel      calibrate.Reliability `json:"reliability"`
	Oracle   int64                 `json:"oracle_token_steps"`
	Ablation []fitAblation         `json:"ablation,omitempty"`
}

type fitWeight struct {
	Feature string  `json:"feature"`
	Weight  float64 `json:"weight"`
	Doc     string  `json:"doc"`
}

// fitAblation is the cross-validated figures with one feature left out.
type fitAblation struct {
	Dropped         string  `json:"dropped"`
	AUC             float64 `json:"auc"`
	TokenStepsShare float64 `json:"token_steps_share_of_oracle"`
	MissRate        float64 `json:"miss_rate"`
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

With PATHs, fit first replays them into --db as a training replay: every candidate
kept and asked at ages 1, 2, 4, ... 64 steps apart whatever the budget (scorer keep,
schedule ` + fitted.TrainingSchedule + `, reask_under_budget), so every output is seen at
many ages. Without PATHs it fits on what --db holds (the largest replay with signals,
or --settings). The default weights embedded in the binary are made by

  go run ./cmd/pruneadvisor fit --db /tmp/pruneadvisor-fit.db --out advisor/fitted/default_model.json ../shared/corpus

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
	c.Flags().Float64Var(&f.targetMiss, "target-miss", 0.02, "miss-rate target of the token-steps figure")
	c.Flags().StringSliceVar(&f.settings, "settings", nil, "fit on the replay whose settings hash starts with this prefix")
	c.Flags().BoolVar(&f.ablation, "ablation", false, "cross-validate again with each feature dropped in turn")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	c.Flags().IntVar(&f.workers, "workers", 0, "sessions replayed at once for PATHs (default: the number of CPUs)")
	c.Flags().StringVar(&f.dumpRows, "dump-rows", "", "write the training rows and outputs as CSV files into this folder (for probing models outside Go)")
	_ = c.Flags().MarkHidden("dump-rows")
	return c
}

// trainingConfig is the advisor config of a training replay.
func trainingConfig() advisor.Config {
	cfg := advisor.DefaultConfig()
	cfg.Schedule = fitted.TrainingSchedule
	cfg.ReaskUnderBudget = true
	return cfg
}

func runFit(ctx context.Context, e *env, paths []string, f fitFlags) error {
	if f.folds < 2 || f.folds > 100 {
		return usageError{fmt.Errorf("--folds %d: want 2 to 100", f.folds)}
	}
	if math.IsNaN(f.lambda) || f.lambda < 0 || math.IsInf(f.lambda, 0) {
		return usageError{fmt.Errorf("--lambda %v: want a finite number >= 0", f.lambda)}
	}
	if f.writeConfig != "" && f.out == "" {
		return usageError{fmt.Errorf("--write-config needs --out: the config names the model file")}
	}
	if f.targetMiss < 0 || f.targetMiss > 1 || f.targetMiss != f.targetMiss {
		return usageError{fmt.Errorf("--target-miss %v: want a rate in [0,1]", f.targetMiss)}
	}
	prefixes := f.settings
	var words *evidence.Background
	if len(paths) > 0 {
		words = wordStats(e, paths)
		hash, err := fitReplay(ctx, e, paths, f, words)
		if err != nil {
			return err
		}
		prefixes = []string{hash}
	}
	db, closeDB, groups, err := openGroups(ctx, f.db, prefixes)
	if err != nil {
		return err
	}
	defer closeDB()
	set, err := loadTraining(ctx, db, groups)
	if err != nil {
		return err
	}
	if f.dumpRows != "" {
		if err := set.dumpTraining(f.dumpRows); err != nil {
			return err
		}
	}
	out, err := fitAndReport(set, f)
	if err != nil {
		return err
	}
	out.DB, out.Replay = f.db, set.group.label()
	if words == nil {
		// No PATHs: the stored replay's statistics are known by their digest only,
		// and only the embedded default's can be named by it.
		def := fitted.DefaultBackground()
		if set.group.settings.Words != def.Digest() {
			return fmt.Errorf("fit: the replay %s was labelled under word statistics %s, not the embedded default's (%s): give the PATHs it replayed so fit can count them again", short(set.group.hash), set.group.settings.Words, def.Digest())
		}
		words = def
	}
	out.Model.Words = words
	if len(paths) > 0 {
		out.Model.Training.Source = strings.Join(paths, " ")
	}
	if f.out != "" {
		if err := out.Model.Save(f.out); err != nil {
			return err
		}
		out.Out = f.out
	}
	if f.writeConfig != "" {
		if err := writeModelFile(f.writeConfig, f.out); err != nil {
			return err
		}
		out.Wrote = f.writeConfig
	}
	if f.asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printFit(e.stdout, out)
	return nil
}

// wordStats counts the plain words the agents of the sessions under paths wrote
// (evidence.BackgroundCounter): the statistics the training replay labels under
// and the model ships. Files that are not sessions are passed over, as replay
// does.
func wordStats(e *env, paths []string) *evidence.Background {
	found, _, _, _ := replay.Discover(paths)
	c := evidence.NewBackgroundCounter()
	for _, fd := range found {
		src, err := replay.Load(fd.Path, true)
		if err != nil {
			continue
		}
		c.Add(src.Session)
	}
	bg := c.Background(0)
	if bg != nil {
		fmt.Fprintf(e.stderr, "pruneadvisor: fit: word statistics of %d sessions: %d plain words written in at least %.0f%% of them\n", bg.Sessions, len(bg.Counts), 100*bg.MinShare)
	}
	return bg
}

// fitReplay replays paths into the store as a training replay, its later-use
// evidence labelled under words, and returns its settings hash.
func fitReplay(ctx context.Context, e *env, paths []string, f fitFlags, words *evidence.Background) (string, error) {
	store, closeStore, err := openStore(ctx, f.db)
	if err != nil {
		return "", err
	}
	defer closeStore()
	rp := &replay.Replayer{Config: trainingConfig(), Scorer: fitted.KeepScorer{}, Lenient: true, Logger: onceLogger(e.stderr), Sizer: ollama.Sizer{},
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

// trainingSet is the rows of one replay group with the calibrate outputs they come
// from (for the token-steps figures).
type trainingSet struct {
	group    *replayGroup
	rows     []fitted.Row
	outs     []calibrate.Output // base outputs, Asks emptied
	rowOut   []int              // rows[i] is an ask of outs[rowOut[i]]
	rowStep  []int
	sessions []calibrate.Calls
}

// loadTraining reads the first group holding asks with signals.
func loadTraining(ctx context.Context, db *storage.DB, groups []*replayGroup) (*trainingSet, error) {
	for _, g := range groups {
		set := &trainingSet{group: g}
		for _, s := range g.sessions {
			rec, err := db.LoadReplay(ctx, s.ID)
			if err != nil {
				return nil, err
			}
			set.add(rec)
		}
		if len(set.rows) > 0 {
			return set, nil
		}
	}
	return nil, fmt.Errorf("fit: no ask of %s carries signals: replay with this version of pruneadvisor first (or give PATHs to replay)", db.Path())
}

// add appends one replayed session's rows.
func (t *trainingSet) add(rec *replay.Record) {
	outs := rec.CalibrateOutputs()
	idx := make(map[string]int, len(outs))
	for i := range outs {
		idx[outs[i].Key] = len(t.outs) + i
		outs[i].Asks = nil
	}
	t.outs = append(t.outs, outs...)
	t.sessions = append(t.sessions, rec.CalibrateSession())
	for _, a := range rec.Asks {
		i, ok := idx[a.OutputKey]
		if !ok || !a.OK || a.Signals.Step == 0 {
			continue
		}
		o := &t.outs[i]
		if a.Step < o.CandidateFrom || a.Step > o.EndStep {
			continue
		}
		t.rows = append(t.rows, fitted.Row{Session: o.Session, Signals: a.Signals, Used: o.UsedFrom(a.Step) != 0})
		t.rowOut = append(t.rowOut, i)
		t.rowStep = append(t.rowStep, a.Step)
	}
}

// evaluation is the held-out figures of one cross-validation.
type evaluation struct {
	cv     fitted.CV
	rel    calibrate.Reliability
	oracle int64
}

// evaluate cross-validates and prices the held-out scores.
func (t *trainingSet) evaluate(folds int, lambda, targetMiss float64, drop []string) (evaluation, error) {
	pred, fits, err := fitted.CrossValidate(t.rows, folds, fitted.Options{Lambda: lambda, Drop: drop})
	if err != nil {
		return evaluation{}, err
	}
	outs := append([]calibrate.Output(nil), t.outs...)
	var scores []float64
	var labels []bool
	for i, p := range pred {
		if math.IsNaN(p) {
			continue
		}
		o := &outs[t.rowOut[i]]
		o.Asks = append(o.Asks, calibrate.Ask{Step: t.rowStep[i], Keep: p, OK: true})
		scores, labels = append(scores, p), append(labels, t.rows[i].Used)
	}
	ev := evaluation{cv: fitted.CV{Folds: folds, AUC: forecast.AUC(scores, labels), Brier: forecast.Brier(scores, labels), PerFold: fits, TargetMiss: targetMiss, Cutoff: -1}}
	ev.rel = calibrate.ReliabilityOf(outs, 10)
	opts := calibrate.DefaultOptions()
	opts.SizeExponent = t.group.settings.Config.SizeExponent // the cutoff the advisor will prune under
	e, err := calibrate.NewEvaluator(outs, t.sessions, opts)
	if err != nil {
		return evaluation{}, err
	}
	ev.oracle = e.Oracle().TokenSteps
	cutoffs := fitCutoffs(scores)
	var best calibrate.Result
	for _, r := range e.Sweep("fitted", cutoffs) {
		if r.MissRate <= targetMiss && r.TokenSteps > best.TokenSteps {
			best = r
		}
	}
	if best.Pruned > 0 && ev.oracle > 0 {
		ev.cv.Cutoff, ev.cv.MissRate = best.Cutoff, best.MissRate
		ev.cv.TokenStepsShare = float64(best.TokenSteps) / float64(ev.oracle)
	}
	return ev, nil
}

func fitAndReport(set *trainingSet, f fitFlags) (fitJSON, error) {
	ev, err := set.evaluate(f.folds, f.lambda, f.targetMiss, nil)
	if err != nil {
		return fitJSON{}, fitError(err)
	}
	m, err := fitted.Train(set.rows, fitted.Options{Lambda: f.lambda})
	if err != nil {
		return fitJSON{}, fitError(err)
	}
	m.CV = &ev.cv
	m.Training.Settings = set.group.hash
	out := fitJSON{Model: m, CV: &ev.cv, Rel: ev.rel, Oracle: ev.oracle}
	for i, ft := range fitted.Features {
		out.Weights = append(out.Weights, fitWeight{ft.Name, m.Weights[i], ft.Doc})
	}
	if f.ablation {
		for _, ft := range fitted.Features {
			a, err := set.evaluate(f.folds, f.lambda, f.targetMiss, []string{ft.Name})
			if err != nil {
				return fitJSON{}, fitError(err)
			}
			out.Ablation = append(out.Ablation, fitAblation{ft.Name, a.cv.AUC, a.cv.TokenStepsShare, a.cv.MissRate})
		}
	}
	return out, nil
}

func fitError(err error) error {
	if errors.Is(err, fitted.ErrTooFew) {
		return fmt.Errorf("fit: %w", err)
	}
	return err
}

func printFit(w io.Writer, out fitJSON) {
	m, cv := out.Model, out.CV
	fmt.Fprintf(w, "fitted on %s: %d sessions, %d rows (%d used later, %d not)\n", out.Replay, m.Training.Sessions, m.Training.Rows, m.Training.Positives, m.Training.Negatives)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\ncross-validation by session, %d folds\nfold\tsessions\trows\tAUC\tBrier\t\n", cv.Folds)
	for i, f := range cv.PerFold {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.4f\t%.4f\t\n", i+1, f.Sessions, f.Rows, f.AUC, f.Brier)
	}
	fmt.Fprintf(tw, "pooled\t\t%d\t%.4f\t%.4f\t\n", m.Training.Rows, cv.AUC, cv.Brier)
	tw.Flush()
	fmt.Fprintf(w, "\nheld-out reliability\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "bin\tn\tused later\trate\tmean score\t\n")
	for _, b := range out.Rel.Bins {
		fmt.Fprintf(tw, "[%.2f,%.2f)\t%d\t%d\t%.3f\t%.3f\t\n", b.Lo, b.Hi, b.N, b.Used, b.Rate, b.MeanScore)
	}
	tw.Flush()
	if cv.Cutoff >= 0 {
		fmt.Fprintf(w, "\nheld out, at cutoff %.2f (miss rate %.3f <= %.3f) the scores save %.1f%% of the oracle's token-steps (%d)\n",
			cv.Cutoff, cv.MissRate, cv.TargetMiss, 100*cv.TokenStepsShare, out.Oracle)
	} else {
		fmt.Fprintf(w, "\nheld out, no cutoff keeps the miss rate at or under %.3f\n", cv.TargetMiss)
	}
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

// writeModelFile sets model_file in the advisor config file at path (created with
// the defaults when missing, its other fields kept) to model's absolute path, so
// every advising command run with --config path scores with that model.
func writeModelFile(path, model string) error {
	abs, err := filepath.Abs(model)
	if err != nil {
		return fmt.Errorf("fit: --write-config: %w", err)
	}
	if err := updateConfig(path, func(cfg *advisor.Config) { cfg.ModelFile = abs }); err != nil {
		return fmt.Errorf("fit: --write-config: %w", err)
	}
	return nil
}

// fitCutoffs are the cutoffs fit's held-out evaluation sweeps: 0.01 to 0.99 by 0.01,
// and the held-out scores' quantiles at every 0.25% up to the median (where the
// scores bunch, the fixed grid steps over the cutoffs a low miss rate needs: issue
// 30 asks for a front without gaps), each rounded up to the next 1e-6 so that the
// quantile's own score is pruned (a prune is score < cutoff); sorted, unique.
func fitCutoffs(scores []float64) []float64 {
	var cutoffs []float64
	for c := 0.01; c < 0.995; c += 0.01 {
		cutoffs = append(cutoffs, math.Round(c*100)/100)
	}
	sorted := slices.Sorted(slices.Values(scores))
	for q := 1; q <= 200 && len(sorted) > 0; q++ {
		v := sorted[min(len(sorted)-1, q*len(sorted)/400)]
		cutoffs = append(cutoffs, math.Ceil(v*1e6+0.5)/1e6)
	}
	slices.Sort(cutoffs)
	return slices.Compact(cutoffs)
}
