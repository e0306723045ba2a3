// Package forecast measures how well keep-probabilities forecast later use: the
// Brier score and the AUC of a set of scores against their labels. It is the one
// implementation of both, used by calibrate (a scorer's reliability over its
// replayed asks) and by advisor/fitted (the cross-validated figures of a fit), so
// the figures a fit reports and the ones calibrate measures on a replay of the
// fitted scorer are computed alike. It imports nothing but the standard library,
// so the per-step scorer may link it.
package forecast

import (
	"math"
	"sort"
)

// Brier returns the Brier score, the mean of (score - label)² with label 1 for true
// and 0 for false (Brier 1950): 0 is perfect, 0.25 is what a constant 0.5 scores.
// NaN for no examples; scores and labels must have equal length (extra entries of
// the longer one are ignored).
func Brier(scores []float64, labels []bool) float64 {
	n := min(len(scores), len(labels))
	if n == 0 {
		return math.NaN()
	}
	var sum float64
	for i := range n {
		y := 0.0
		if labels[i] {
			y = 1
		}
		d := scores[i] - y
		sum += d * d
	}
	return sum / float64(n)
}

// AUC returns the area under the ROC curve of scores against labels: the
// probability that a random positive scores above a random negative, ties counted
// half, computed as the Mann-Whitney U statistic over the positives' rank sum
// (Hanley and McNeil 1982). 1 means every positive (a used output) scored above
// every negative, 0.5 is chance. NaN when either class is empty. It runs in
// O(n log n) by ranking with midranks for ties; extra entries of the longer of
// scores and labels are ignored.
func AUC(scores []float64, labels []bool) float64 {
	n := min(len(scores), len(labels))
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
	var pos, neg int
	var rankSum float64 // sum of the positives' midranks (1-based)
	for i := 0; i < n; {
		j := i
		for j < n && scores[idx[j]] == scores[idx[i]] {
			j++
		}
		mid := float64(i+1+j) / 2 // mean of ranks i+1..j
		for k := i; k < j; k++ {
			if labels[idx[k]] {
				pos++
				rankSum += mid
			} else {
				neg++
			}
		}
		i = j
	}
	if pos == 0 || neg == 0 {
		return math.NaN()
	}
	u := rankSum - float64(pos)*float64(pos+1)/2
	return u / (float64(pos) * float64(neg))
}

// NullNaN returns nil for NaN, else a pointer to f: a figure as JSON can carry it
// (null for the NaN that Brier and AUC give for no examples or one class only).
func NullNaN(f float64) *float64 {
	if math.IsNaN(f) {
		return nil
	}
	return &f
}
