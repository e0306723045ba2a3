package auto

import (
	"context"
	"sort"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
)

// RRFK is the k of reciprocal rank fusion: a card's fused score is the sum over
// scorers of 1/(k + its rank), ranks from 1 (Cormack, Clarke and Buettcher 2009,
// "Reciprocal rank fusion outperforms Condorcet and individual rank learning
// methods", SIGIR, who found k = 60 near best across collections).
const RRFK = 60

// Fused is the fusion of a model scorer (Ollama) and the fitted scorer: within a
// batch, cards are ranked by each scorer's keep-probability (highest first) and
// reordered by reciprocal rank fusion; the fused order then takes the fitted
// scorer's keep-probabilities, in order (the card the fusion ranks first gets the
// batch's highest fitted score, and so on), so the cutoff keeps the fitted model's
// calibrated scale while the order uses both judgments. It is off by default (the
// CLI's --fuse): no replay with a real model has yet shown it beats both alone, and
// calibrate reports it as its own scorer ("fused(…)") beside them. When Model fails
// on a batch, that batch gets the fitted scores alone.
type Fused struct {
	Model, Fitted advisor.Scorer
}

// Name returns "fused(MODEL+FITTED)".
func (f *Fused) Name() string { return "fused(" + f.Model.Name() + "+" + f.Fitted.Name() + ")" }

// Score implements advisor.Scorer; it fails only when the fitted scorer does.
func (f *Fused) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	fs, err := f.Fitted.Score(ctx, b)
	if err != nil {
		return fs, err
	}
	ms, err := f.Model.Score(ctx, b)
	if err != nil || len(ms) != len(fs) {
		return fs, nil
	}
	return fuse(ms, fs), nil
}

// fuse reorders fitted's keep-probabilities by the reciprocal rank fusion of the two
// rankings; cards without an OK score from the model are ranked by fitted alone.
func fuse(model, fitted []cards.Score) []cards.Score {
	n := len(fitted)
	rank := func(s []cards.Score) []int {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return s[idx[a]].Keep > s[idx[b]].Keep })
		r := make([]int, n)
		for pos, i := range idx {
			r[i] = pos + 1
		}
		return r
	}
	rm, rf := rank(model), rank(fitted)
	score := make([]float64, n)
	for i := range score {
		score[i] = 1 / float64(RRFK+rf[i])
		if model[i].OK {
			score[i] += 1 / float64(RRFK+rm[i])
		} else {
			score[i] *= 2 // as if the model agreed
		}
	}
	byFused := make([]int, n)
	for i := range byFused {
		byFused[i] = i
	}
	sort.SliceStable(byFused, func(a, b int) bool { return score[byFused[a]] > score[byFused[b]] })
	values := make([]float64, n)
	for i := range values {
		values[i] = fitted[i].Keep
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(values)))
	out := make([]cards.Score, n)
	for pos, i := range byFused {
		out[i] = cards.Score{Keep: values[pos], OK: true}
	}
	return out
}
