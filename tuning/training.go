package tuning

import (
	"context"
	"errors"
	"math"
	"slices"

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
	cfg.Schedule = fitted.TrainingSchedule
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
// ask's step") with the calibrate records they come from, for the token-steps
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
	t.Calls = append(t.Calls, Calls(rec))
	for _, a := range rec.Asks {
		i, ok := idx[a.OutputKey]
		if !ok || !a.OK || a.Signals.Step == 0 {
			continue
		}
		o := &t.Outs[i]
		if a.Step < o.CandidateFrom || a.Step > o.EndStep {
			continue
		}
		t.Rows = append(t.Rows, fitted.Row{Session: o.Session, Signals: a.Signals, Used: o.UsedFrom(a.Step) != 0})
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
}

// Evaluate cross-validates the rows by session (fitted.CrossValidate: folds
// folds, the model opts describes: its L2 penalty, the features it drops, its
// trees) and prices the
// held-out scores: each output pruned at its first held-out ask under a cutoff
// (calibrate's decision level, under the size exponent of the group's config, the
// cutoff the advisor will prune under), swept over HeldOutCutoffs, the cutoff
// chosen by calibrate.RecommendBy with ObjectiveTokenSteps at targetMiss (in
// [0,1]). Errors: fitted.CrossValidate's (fitted.ErrTooFew), calibrate's.
func (t *TrainingSet) Evaluate(folds int, opts fitted.Options, targetMiss float64) (Evaluation, error) {
	pred, fits, err := fitted.CrossValidate(t.Rows, folds, opts)
	if err != nil {
		return Evaluation{}, err
	}
	outs := append([]calibrate.Output(nil), t.Outs...)
	var scores []float64
	var labels []bool
	for i, p := range pred {
		if math.IsNaN(p) {
			continue
		}
		o := &outs[t.RowOut[i]]
		o.Asks = append(o.Asks, calibrate.Ask{Step: t.RowStep[i], Keep: p, OK: true})
		scores, labels = append(scores, p), append(labels, t.Rows[i].Used)
	}
	ev := Evaluation{CV: fitted.CV{Folds: folds, AUC: forecast.AUC(scores, labels), Brier: forecast.Brier(scores, labels), PerFold: fits, TargetMiss: targetMiss, Cutoff: -1}}
	ev.Reliability = calibrate.ReliabilityOf(outs, 10)
	copts := calibrate.DefaultOptions()
	copts.SizeExponent = t.Group.Settings.Config.SizeExponent // the cutoff the advisor will prune under
	e, err := calibrate.NewEvaluator(outs, t.Calls, copts)
	if err != nil {
		return Evaluation{}, err
	}
	ev.Oracle = e.Oracle().TokenSteps
	rec, err := calibrate.RecommendBy(e.Sweep("fitted", HeldOutCutoffs(scores)), targetMiss, calibrate.ObjectiveTokenSteps)
	if err != nil && !errors.Is(err, calibrate.ErrNoCutoff) {
		return Evaluation{}, err
	}
	// A cutoff that keeps nothing out is no cutoff: the share stays unset.
	if best := rec.Result; err == nil && best.TokenSteps > 0 && ev.Oracle > 0 {
		ev.CV.Cutoff, ev.CV.MissRate = best.Cutoff, best.MissRate
		ev.CV.TokenStepsShare = float64(best.TokenSteps) / float64(ev.Oracle)
	}
	return ev, nil
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
