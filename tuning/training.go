package tuning

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/internal/forecast"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// ErrNoSignals means no replay of the groups given to LoadTraining holds an ask
// with signals (cards.Signals): they were replayed by a version of pruneadvisor
// that did not record them.
var ErrNoSignals = errors.New("no ask carries signals")

// TrainingConfig returns the advisor config of a training replay: the defaults,
// with the schedule fitted.TrainingSchedule and re-asks under budget, so every
// candidate is asked at many ages whatever the budget.
func TrainingConfig() advisor.Config {
	cfg := advisor.DefaultConfig()
	cfg.Schedule, cfg.ScorerSchedules = fitted.TrainingSchedule, nil
	cfg.ReaskUnderBudget = true
	return cfg
}

// WordStats counts the plain words the agents of the sessions under paths wrote
// (evidence.BackgroundCounter, replay.Discover and replay.Load): the statistics a
// training replay labels under and the model ships. Files that are not sessions,
// or cannot be read, are passed over, as replay does. nil when none counts.
func WordStats(paths []string) *evidence.Background {
	found, _, _, _ := replay.Discover(paths)
	c := evidence.NewBackgroundCounter()
	for _, fd := range found {
		src, err := replay.Load(fd.Path, true)
		if err != nil {
			continue
		}
		c.Add(src.Session)
	}
	return c.Background(0)
}

// TrainingSet is the training rows of one replay group (one per OK ask with
// signals, within its output's candidate window, labelled "used at or after the
// ask's step", Row.Used, and "a use at or after it that the stub's digest would
// not hold", Row.Miss: calibrate.Output.MissFrom under the replay's digest
// budget) with the calibrate records they come from, for the token-steps
// figures of the held-out scores.
type TrainingSet struct {
	Group *Group       // the replay group the rows come from
	Rows  []fitted.Row // in the order of the replays' sessions, then asks
	// Outs are the group's calibrate records (Outputs), their Asks emptied;
	// Rows[i] is an ask of Outs[RowOut[i]] at step RowStep[i].
	Outs    []calibrate.Output
	RowOut  []int
	RowStep []int
	Calls   []calibrate.Calls // one per session (Calls)
	// Paths maps each session's name (calibrate.Output.Session, Calls.Name) to its session
	// file, as the replay stored it (replay.Record.Path): what SetSources
	// groups the sessions by.
	Paths map[string]string
	// Sources maps session names (as Paths) to the source they came from (SetSources); nil,
	// the default, for one source: Evaluate then gives no BySource.
	Sources map[string]string
}

// SetSources names each session's source: the first of roots (the PATHs fit was
// given) that is its file or a folder holding it, else the file's own folder.
// With fewer than two distinct sources it leaves Sources nil.
func (t *TrainingSet) SetSources(roots []string) {
	src := make(map[string]string, len(t.Paths))
	distinct := map[string]bool{}
	for id, p := range t.Paths {
		s := filepath.Dir(p)
		for _, r := range roots {
			if under(p, r) {
				s = r
				break
			}
		}
		src[id], distinct[s] = s, true
	}
	t.Sources = nil
	if len(distinct) > 1 {
		t.Sources = src
	}
}

// under reports whether path p is root or lies inside it (both made absolute
// when they can be, so that a relative root matches the absolute paths a walk
// stores).
func under(p, root string) bool {
	if a, err := filepath.Abs(p); err == nil {
		p = a
	}
	if a, err := filepath.Abs(root); err == nil {
		root = a
	}
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// LoadTraining reads the first of groups whose replays hold an ask with signals.
// Errors: the store's; ErrNoSignals when none does.
func LoadTraining(ctx context.Context, store Store, groups []*Group) (*TrainingSet, error) {
	for _, g := range groups {
		set := &TrainingSet{Group: g}
		for _, s := range g.Sessions {
			rec, err := store.LoadReplay(ctx, s.ID)
			if err != nil {
				return nil, err
			}
			set.add(rec)
		}
		if len(set.Rows) > 0 {
			return set, nil
		}
	}
	return nil, ErrNoSignals
}

// add appends one replayed session's rows, outputs and calls.
func (t *TrainingSet) add(rec *replay.Record) {
	outs := Outputs(rec)
	idx := make(map[string]int, len(outs))
	for i := range outs {
		idx[outs[i].Key] = len(t.Outs) + i
		outs[i].Asks = nil
	}
	t.Outs = append(t.Outs, outs...)
	calls := Calls(rec)
	t.Calls = append(t.Calls, calls)
	if t.Paths == nil {
		t.Paths = map[string]string{}
	}
	t.Paths[calls.Name] = rec.Path
	for _, a := range rec.Asks {
		i, ok := idx[a.OutputKey]
		if !ok || !a.OK || a.Signals.Step == 0 {
			continue
		}
		o := &t.Outs[i]
		if a.Step < o.CandidateFrom || a.Step > o.EndStep {
			continue
		}
		t.Rows = append(t.Rows, fitted.Row{Session: o.Session, Signals: a.Signals, Used: o.UsedFrom(a.Step) != 0, Miss: o.MissFrom(a.Step) != 0})
		t.RowOut = append(t.RowOut, i)
		t.RowStep = append(t.RowStep, a.Step)
	}
}

// Evaluation is the held-out figures of one cross-validation (TrainingSet.Evaluate).
type Evaluation struct {
	// CV holds the pooled AUC and Brier (forecast), the folds' figures and, at
	// the cutoff calibrate.RecommendBy chooses (token-steps within TargetMiss),
	// that cutoff's miss rate and share of the oracle's token-steps; Cutoff -1
	// when no cutoff saves anything within the target.
	CV fitted.CV
	// Reliability is the held-out scores' reliability table (10 bins).
	Reliability calibrate.Reliability
	// Oracle is the oracle's decision-level token-steps over the outputs.
	Oracle int64
	// Anchors sets each anchor regime beside the held-out scores' front, over
	// every output (SourceCV.Anchors).
	Anchors []calibrate.Dominance
	// BySource holds the same held-out scores' figures per source, in the
	// order of their names, when the set has several (TrainingSet.Sources);
	// nil otherwise.
	BySource []SourceCV
}

// SourceCV is the held-out figures of one source's sessions (fit --json's names):
// the scores are the pooled cross-validation's (each session scored by the fold
// that left it out), evaluated over that source's rows and outputs alone.
type SourceCV struct {
	Source   string  `json:"source"`   // the PATH (TrainingSet.SetSources)
	Sessions int     `json:"sessions"` // sessions with at least one row
	Rows     int     `json:"rows"`
	AUC      float64 `json:"auc"`
	Brier    float64 `json:"brier"`
	// Cutoff, MissRate and TokenStepsShare are Evaluation.CV's, chosen over this
	// source's outputs alone: Cutoff -1 when no cutoff saves anything within the
	// target. Oracle is its outputs' oracle token-steps.
	Cutoff          float64 `json:"cutoff"`
	MissRate        float64 `json:"miss_rate"`
	TokenStepsShare float64 `json:"token_steps_share_of_oracle"`
	Oracle          int64   `json:"oracle_token_steps"`
	// Anchors sets each anchor regime at its published defaults (calibrate's
	// Evaluator.Anchors, clear_at_least 5% of the budget as calibrate sets it)
	// beside the held-out scores' front (Evaluator.Front over HeldOutCutoffs):
	// the same outputs, each pruned at its first held-out ask under the cutoff.
	Anchors []calibrate.Dominance `json:"anchors"`
}

// Evaluate cross-validates the rows by session (fitted.CrossValidate: folds
// folds, the model opts describes: its L2 penalty, the features it drops, its
// trees) and prices the
// held-out scores: each output pruned at its first held-out ask under a cutoff
// (calibrate's decision level, under the size exponent of the group's config, the
// cutoff the advisor will prune under), swept over HeldOutCutoffs, the cutoff
// chosen by calibrate.RecommendBy with ObjectiveTokenSteps at targetMiss (in
// [0,1]). With several Sources it prices the same held-out scores once more per
// source, over that source's rows and outputs alone (BySource). Errors:
// fitted.CrossValidate's (fitted.ErrTooFew), calibrate's.
func (t *TrainingSet) Evaluate(folds int, opts fitted.Options, targetMiss float64) (Evaluation, error) {
	pred, fits, err := fitted.CrossValidate(t.Rows, folds, opts)
	if err != nil {
		return Evaluation{}, err
	}
	all := func(string) bool { return true }
	h, err := t.heldOut(pred, all, targetMiss)
	if err != nil {
		return Evaluation{}, err
	}
	ev := Evaluation{CV: fitted.CV{Folds: folds, AUC: h.AUC, Brier: h.Brier, PerFold: fits, TargetMiss: targetMiss,
		Cutoff: h.Cutoff, MissRate: h.MissRate, TokenStepsShare: h.TokenStepsShare}, Reliability: h.rel, Oracle: h.Oracle, Anchors: h.Anchors}
	for _, src := range t.sourceNames() {
		h, err := t.heldOut(pred, func(s string) bool { return t.Sources[s] == src }, targetMiss)
		if err != nil {
			return Evaluation{}, err
		}
		h.Source = src
		ev.BySource = append(ev.BySource, h.SourceCV)
	}
	return ev, nil
}

// sourceNames returns the distinct Sources, sorted; nil for one source.
func (t *TrainingSet) sourceNames() []string {
	seen := map[string]bool{}
	var names []string
	for _, s := range t.Sources {
		if !seen[s] {
			seen[s] = true
			names = append(names, s)
		}
	}
	slices.Sort(names)
	return names
}

// heldOutFigures is heldOut's result: the figures and the reliability table.
type heldOutFigures struct {
	SourceCV
	rel calibrate.Reliability
}

// heldOut prices the held-out scores pred (one per row, NaN where a fold gave
// none) over the sessions keep accepts: their rows' AUC and Brier, and the
// cutoff calibrate.RecommendBy chooses over their outputs (Evaluate's rule).
func (t *TrainingSet) heldOut(pred []float64, keep func(session string) bool, targetMiss float64) (heldOutFigures, error) {
	outs := make([]calibrate.Output, 0, len(t.Outs))
	at := make([]int, len(t.Outs)) // index in outs, -1 when left out
	for i := range t.Outs {
		at[i] = -1
		if keep(t.Outs[i].Session) {
			at[i] = len(outs)
			outs = append(outs, t.Outs[i])
		}
	}
	var scores []float64
	var labels []bool
	sessions := map[string]bool{}
	for i, p := range pred {
		k := at[t.RowOut[i]]
		if math.IsNaN(p) || k < 0 {
			continue
		}
		o := &outs[k]
		o.Asks = append(o.Asks, calibrate.Ask{Step: t.RowStep[i], Keep: p, OK: true})
		scores, labels = append(scores, p), append(labels, t.Rows[i].Used)
		sessions[o.Session] = true
	}
	var calls []calibrate.Calls
	for _, c := range t.Calls {
		if keep(c.Name) {
			calls = append(calls, c)
		}
	}
	h := heldOutFigures{SourceCV: SourceCV{Sessions: len(sessions), Rows: len(scores), AUC: forecast.AUC(scores, labels), Brier: forecast.Brier(scores, labels), Cutoff: -1}}
	h.rel = calibrate.ReliabilityOf(outs, 10)
	return h, t.price(&h.SourceCV, outs, calls, scores, targetMiss)
}

// price sets f's oracle and its best cutoff within targetMiss over outs: each
// output pruned at its first held-out ask under a cutoff (calibrate's decision
// level, under the size exponent of the group's config, the cutoff the advisor
// will prune under), swept over HeldOutCutoffs(scores), the cutoff chosen by
// calibrate.RecommendBy with ObjectiveTokenSteps. Errors: calibrate's.
func (t *TrainingSet) price(f *SourceCV, outs []calibrate.Output, calls []calibrate.Calls, scores []float64, targetMiss float64) error {
	copts := calibrate.DefaultOptions()
	copts.SizeExponent = t.Group.Settings.Config.SizeExponent
	e, err := calibrate.NewEvaluator(outs, calls, copts)
	if err != nil {
		return err
	}
	f.Oracle = e.Oracle().TokenSteps
	sweep := e.Sweep("fitted", HeldOutCutoffs(scores))
	f.Anchors = calibrate.DominanceOf(e.Front("fitted", sweep, calibrate.FrontGap, calibrate.FrontPoints), e.Anchors(calibrate.ClearAtLeast(copts.Budget)))
	rec, err := calibrate.RecommendBy(sweep, targetMiss, calibrate.ObjectiveTokenSteps)
	if err != nil && !errors.Is(err, calibrate.ErrNoCutoff) {
		return err
	}
	// A cutoff that keeps nothing out is no cutoff: the share stays unset.
	if best := rec.Result; err == nil && best.TokenSteps > 0 && f.Oracle > 0 {
		f.Cutoff, f.MissRate = best.Cutoff, best.MissRate
		f.TokenStepsShare = float64(best.TokenSteps) / float64(f.Oracle)
	}
	return nil
}

// MarshalJSON writes a NaN AUC or Brier (a source with no rows, or rows of one
// class only) as null, which JSON can carry.
func (s SourceCV) MarshalJSON() ([]byte, error) {
	type plain SourceCV
	return json.Marshal(struct {
		plain
		AUC   *float64 `json:"auc"`
		Brier *float64 `json:"brier"`
	}{plain(s), forecast.NullNaN(s.AUC), forecast.NullNaN(s.Brier)})
}

// HeldOutCutoffs are the cutoffs the held-out evaluation sweeps: 0.01 to 0.99 by
// 0.01, and the held-out scores' quantiles at every 0.25% up to the median (where
// the scores bunch, the fixed grid steps over the cutoffs a low miss rate needs:
// issue 30 asks for a front without gaps), each rounded up to the next 1e-6 so
// that the quantile's own score is pruned (a prune is score < cutoff); sorted,
// unique. The grid only proposes cutoffs: calibrate.RecommendBy chooses among
// them, as it does among calibrate's sweep.
func HeldOutCutoffs(scores []float64) []float64 {
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

// Ablation is the cross-validated figures with one feature left out (fit
// --ablation; the JSON names are fit --json's).
type Ablation struct {
	Dropped         string  `json:"dropped"`                     // the feature left out (fitted.Features)
	AUC             float64 `json:"auc"`                         // pooled held-out AUC
	TokenStepsShare float64 `json:"token_steps_share_of_oracle"` // at the chosen cutoff (Evaluation.CV)
	MissRate        float64 `json:"miss_rate"`                   // of the chosen cutoff
}

// Fit is a model fitted on a training set with its held-out evaluation.
type Fit struct {
	// Model is fitted on every row; its CV is Evaluation.CV and its
	// Training.Settings the group's settings hash.
	Model      *fitted.Model
	Evaluation Evaluation
	// Ablation holds, when asked, the figures with each of fitted.Features
	// dropped in turn.
	Ablation []Ablation
}

// Fit cross-validates (Evaluate), then fits on every row (fitted.Train with opts),
// and with ablation cross-validates again with each feature dropped in turn (opts'
// own Drop replaced). Errors: Evaluate's and fitted.Train's (fitted.ErrTooFew).
func (t *TrainingSet) Fit(folds int, opts fitted.Options, targetMiss float64, ablation bool) (*Fit, error) {
	ev, err := t.Evaluate(folds, opts, targetMiss)
	if err != nil {
		return nil, err
	}
	m, err := fitted.Train(t.Rows, opts)
	if err != nil {
		return nil, err
	}
	f := &Fit{Model: m, Evaluation: ev}
	m.CV = &f.Evaluation.CV
	m.Training.Settings = t.Group.Hash
	if ablation {
		for _, ft := range fitted.Features {
			o := opts
			o.Drop = []string{ft.Name}
			a, err := t.Evaluate(folds, o, targetMiss)
			if err != nil {
				return nil, err
			}
			f.Ablation = append(f.Ablation, Ablation{ft.Name, a.CV.AUC, a.CV.TokenStepsShare, a.CV.MissRate})
		}
	}
	return f, nil
}
