package fitted

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"

	"gonum.org/v1/gonum/optimize"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/internal/forecast"
)

// Row is one training example: an ask's signals and whether the output was used at
// or after the ask's step (a prune at that step would have missed).
type Row struct {
	Session string // for cross-validation: rows of one session stay on one side
	Signals cards.Signals
	Used    bool // the use label: the output was used at or after the ask
	// Miss is the miss label: a use at or after the ask that the output's stub
	// digest would not hold (calibrate.Output.MissFrom); implies Used.
	Miss bool
}

// DefaultLambda is the L2 penalty of Train: small, so the weights are set by the
// data (hundreds of thousands of rows) while standardised collinear features (the
// idle bins, the logs) stay bounded.
const DefaultLambda = 1e-4

// MinRows is the fewest positive and the fewest negative rows Train accepts.
const MinRows = 10

// Options tune Train. The zero value is L2 penalty 0 and every feature; use
// DefaultOptions.
type Options struct {
	// Lambda is the L2 penalty: the loss is the mean log-loss plus Lambda/2 x the
	// squared norm of the weights (the bias is not penalised).
	Lambda float64
	// Drop names features the model must not use (an ablation): their standardised
	// columns are zero, so their weights stay 0, and no tree splits on them.
	Drop []string
	// Trees, when Trees.Trees > 0, adds gradient-boosted trees to the regression
	// (a version 2 model: Model.Boost); the zero value adds none.
	Trees TreeOptions
	// Blend, when > 0, trains the model on the miss label (Row.Miss) and a second
	// one, the same way, on the use label (Row.Used), blended at this weight
	// (Model.Blend); 0 trains on the use label alone. Below 1.
	Blend float64
}

// DefaultBlend is fit's default Options.Blend: the weight of the use-label model
// in the blend, 0.15 (docs/EVALUATION.md, "The miss label blended with the use
// label": on ../shared/sessions held out, 0.5 / 0.3 / 0.15 / 0.05 gave 39.3% /
// 47.9% / 50.5% / 51.0% of the oracle's token-steps at <= 2% miss, every anchor
// dominated; the miss label alone 51.7% with one anchor not dominated).
const DefaultBlend = 0.15

// DefaultOptions returns Lambda DefaultLambda and every feature.
func DefaultOptions() Options { return Options{Lambda: DefaultLambda} }

// Train fits the model on rows: the features are standardised (mean 0, scale the
// standard deviation, 1 for a constant feature), and the weights minimise the mean
// log-loss plus Lambda/2 x the squared norm of the weights (the bias is not
// penalised), by L-BFGS (gonum.org/v1/gonum/optimize) from zero; with
// Options.Trees.Trees > 0 gradient-boosted trees are grown on the raw features too
// (trees.go) and the model is version 2. The result depends only on the rows and
// their order. With Options.Blend > 0 it trains the model on Row.Miss and a
// second on Row.Used, the same way, and blends them (Model.Blend). Errors:
// ErrTooFew with the counts when there are fewer than MinRows positive or
// negative rows (of either label); a Blend out of [0, 1); an unknown feature in Drop; TreeOptions.Validate's; an
// optimizer failure.
func Train(rows []Row, opts Options) (*Model, error) {
	if opts.Blend == 0 {
		return trainOne(rows, opts)
	}
	if math.IsNaN(opts.Blend) || opts.Blend < 0 || opts.Blend >= 1 {
		return nil, fmt.Errorf("fit: blend %v: want 0 to below 1", opts.Blend)
	}
	use, err := trainOne(rows, opts)
	if err != nil {
		return nil, err
	}
	miss := make([]Row, len(rows))
	for i, r := range rows {
		miss[i] = r
		miss[i].Used = r.Miss
	}
	m, err := trainOne(miss, opts)
	if err != nil {
		return nil, fmt.Errorf("the miss label: %w", err)
	}
	m.Blend, m.BlendWeight = use, opts.Blend
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("fit: %w", err)
	}
	return m, nil
}

// trainOne is Train on rows' Used label, without a Blend.
func trainOne(rows []Row, opts Options) (*Model, error) {
	pos := 0
	for _, r := range rows {
		if r.Used {
			pos++
		}
	}
	if pos < MinRows || len(rows)-pos < MinRows {
		return nil, fmt.Errorf("%w: %d positive and %d negative rows, want at least %d of each", ErrTooFew, pos, len(rows)-pos, MinRows)
	}
	n := len(Features)
	drop, err := dropped(opts.Drop)
	if err != nil {
		return nil, err
	}
	if err := opts.Trees.Validate(); err != nil {
		return nil, err
	}
	X, y := design(rows)
	var boost *Boost
	if opts.Trees.Trees > 0 {
		boost = trainBoost(X, y, n, drop, opts.Trees) // on the raw features, before X is standardised
	}
	mean, scale := standardise(X, n)
	for j := range drop {
		for i := j; i < len(X); i += n {
			X[i] = 0
		}
	}
	p := &problem{X: X, y: y, n: n, lambda: opts.Lambda}
	res, err := optimize.Minimize(optimize.Problem{Func: p.loss, Grad: p.grad}, make([]float64, n+1), &optimize.Settings{
		GradientThreshold: 1e-8, MajorIterations: 2000,
	}, &optimize.LBFGS{})
	if err != nil && res == nil {
		return nil, fmt.Errorf("fit: %w", err)
	}
	w := res.X
	m := &Model{
		Format: Format, Version: Version, Features: FeatureNames(), Mean: mean, Scale: scale,
		Weights: append([]float64(nil), w[:n]...), Bias: w[n],
		Training: Training{Sessions: countSessions(rows), Rows: len(rows), Positives: pos, Negatives: len(rows) - pos, Lambda: opts.Lambda},
	}
	if boost != nil {
		m.Version, m.Boost = VersionBoost, boost
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("fit: %w", err)
	}
	return m, nil
}

// dropped returns the indexes of the named features.
func dropped(names []string) (map[int]bool, error) {
	out := map[int]bool{}
	for _, name := range names {
		found := false
		for j, f := range Features {
			if f.Name == name {
				out[j], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: no feature %q to drop", ErrModel, name)
		}
	}
	return out, nil
}

// design builds the feature matrix (row-major) and labels.
func design(rows []Row) ([]float64, []float64) {
	n := len(Features)
	X := make([]float64, 0, len(rows)*n)
	y := make([]float64, len(rows))
	var v []float64
	for i := range rows {
		v = Vector(v, &rows[i].Signals)
		X = append(X, v...)
		if rows[i].Used {
			y[i] = 1
		}
	}
	return X, y
}

// standardise centres and scales X's columns in place and returns the means and
// scales used.
func standardise(X []float64, n int) ([]float64, []float64) {
	m := len(X) / n
	mean, scale := make([]float64, n), make([]float64, n)
	for j := 0; j < n; j++ {
		var s, ss float64
		for i := 0; i < m; i++ {
			s += X[i*n+j]
		}
		mean[j] = s / float64(m)
		for i := 0; i < m; i++ {
			d := X[i*n+j] - mean[j]
			ss += d * d
		}
		scale[j] = math.Sqrt(ss / float64(m))
		if scale[j] < 1e-12 {
			scale[j] = 1
		}
		for i := 0; i < m; i++ {
			X[i*n+j] = (X[i*n+j] - mean[j]) / scale[j]
		}
	}
	return mean, scale
}

// problem is the penalised mean log-loss over standardised rows; w[n] is the bias.
type problem struct {
	X, y   []float64
	n      int
	lambda float64
}

func (p *problem) loss(w []float64) float64 {
	m := len(p.y)
	total := 0.0
	for i := 0; i < m; i++ {
		z := w[p.n]
		row := p.X[i*p.n : (i+1)*p.n]
		for j, x := range row {
			z += w[j] * x
		}
		// log(1 + e^z) - y z, computed stably.
		total += softplus(z) - p.y[i]*z
	}
	reg := 0.0
	for j := 0; j < p.n; j++ {
		reg += w[j] * w[j]
	}
	return total/float64(m) + p.lambda/2*reg
}

func (p *problem) grad(g, w []float64) {
	m := len(p.y)
	clear(g)
	for i := 0; i < m; i++ {
		z := w[p.n]
		row := p.X[i*p.n : (i+1)*p.n]
		for j, x := range row {
			z += w[j] * x
		}
		d := sigmoid(z) - p.y[i]
		for j, x := range row {
			g[j] += d * x
		}
		g[p.n] += d
	}
	for j := range g {
		g[j] /= float64(m)
	}
	for j := 0; j < p.n; j++ {
		g[j] += p.lambda * w[j]
	}
}

func softplus(z float64) float64 {
	if z > 0 {
		return z + math.Log1p(math.Exp(-z))
	}
	return math.Log1p(math.Exp(z))
}

func countSessions(rows []Row) int {
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Session] = true
	}
	return len(seen)
}

// Fold returns the cross-validation fold (0..folds-1) of a session: FNV-1a of its
// name modulo folds, so a session is always on the same side and folds do not
// depend on the order rows come in.
func Fold(session string, folds int) int {
	h := fnv.New32a()
	h.Write([]byte(session))
	return int(h.Sum32() % uint32(folds))
}

// CrossValidate fits folds models, each on the rows of the sessions outside one
// fold, and returns every row's held-out prediction (in rows' order) with each
// fold's figures. Folds without rows on both sides are left out of PerFold and their
// rows predicted by nothing (NaN); so is a fold whose held-out rows are all of one
// class (its AUC is undefined), though its rows are predicted, and so is a fold
// whose training rows lack positive or negative rows (Train's ErrTooFew: a few
// sessions, one of them holding most uses), whose rows stay NaN. Errors: ErrTooFew
// when the rows come from fewer than 2 sessions (no fold can hold a session out)
// or when no fold could be fitted; Train's other errors.
func CrossValidate(rows []Row, folds int, opts Options) ([]float64, []FoldFit, error) {
	if n := countSessions(rows); n < 2 {
		return nil, nil, fmt.Errorf("%w: the rows come from %d session(s); cross-validation by session needs at least 2", ErrTooFew, n)
	}
	pred := make([]float64, len(rows))
	for i := range pred {
		pred[i] = math.NaN()
	}
	var fits []FoldFit
	var tooFew error // the last fold left out for too few rows
	fitted := 0      // folds whose model was fitted
	fold := make([]int, len(rows))
	for i, r := range rows {
		fold[i] = Fold(r.Session, folds)
	}
	for k := 0; k < folds; k++ {
		var train []Row
		var test []int
		for i := range rows {
			if fold[i] == k {
				test = append(test, i)
			} else {
				train = append(train, rows[i])
			}
		}
		if len(test) == 0 || len(train) == 0 {
			continue
		}
		m, err := Train(train, opts)
		if errors.Is(err, ErrTooFew) {
			// The other folds lack positive or negative rows (a few sessions, one of
			// them holding most uses): this fold's rows stay unscored (NaN).
			tooFew = fmt.Errorf("fold %d: %w", k, err)
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("fold %d: %w", k, err)
		}
		fitted++
		scores := make([]float64, len(test))
		labels := make([]bool, len(test))
		sessions := map[string]bool{}
		for t, i := range test {
			pred[i] = m.Predict(&rows[i].Signals)
			scores[t], labels[t] = pred[i], rows[i].Used
			sessions[rows[i].Session] = true
		}
		if auc := forecast.AUC(scores, labels); !math.IsNaN(auc) {
			fits = append(fits, FoldFit{Sessions: len(sessions), Rows: len(test), AUC: auc, Brier: forecast.Brier(scores, labels)})
		}
	}
	if fitted == 0 && tooFew != nil {
		return nil, nil, tooFew
	}
	return pred, fits, nil
}

// KeepScorer keeps every card (keep-probability 1, OK): a replay with it asks every
// candidate at every step its schedule allows and records each ask's signals,
// without pruning on any score, which is what a training replay needs (`pruneadvisor
// fit PATH...` replays with it). Its name is "keep".
type KeepScorer struct{}

// Name returns "keep".
func (KeepScorer) Name() string { return "keep" }

// Score answers 1 for every card; it fails only on a done context.
func (KeepScorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	out := make([]cards.Score, len(b.Cards))
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("keep: %w", err)
	}
	for i := range out {
		out[i] = cards.Score{Keep: 1, OK: true}
	}
	return out, nil
}

// TrainingSchedule is the back-off of a training replay: asks at the candidate's
// first step and then 1, 1, 2, 2, 3, 4, 6, 8 and 12 steps apart (the last gap
// repeats), so every output is seen at ages spread over the session (with
// Config.ReaskUnderBudget, whatever the budget).
const TrainingSchedule = "1,1,2,2,3,4,6,8,12"
