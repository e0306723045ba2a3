package planner

import "math"

// SizeReferenceTokens is the candidate size, in tokens, at which CutoffAt is the
// configured cutoff itself: a round figure between the median candidate of
// ../shared/corpus (457 tokens) and the size that splits the candidates' tokens in
// half (2,345 tokens: half the tokens a pruner can remove sit in outputs larger),
// so that a configured cutoff still reads as the keep-probability under which an
// ordinary output is pruned.
const SizeReferenceTokens = 1000

// CutoffAt returns the cutoff a candidate of tokens tokens is pruned under:
// cutoff x (min(tokens, capTokens) / SizeReferenceTokens)^exponent, the size
// taken up to capTokens (0: no cap; advisor.Config.SizeCapTokens). A prune removes tokens in
// proportion to the output's size while a miss costs one recall whatever the
// size, so at one miss rate more is kept out by pruning large outputs at higher
// keep-probabilities and small ones only at lower (docs/EVALUATION.md, "Live
// names and a cutoff that grows with the output"). Past capTokens the premise
// fails: a stub's digest holds a shrinking share of a larger output's names, and
// the largest outputs (whole source files) are the ones an agent comes back to,
// so the cutoff stops growing there (docs/EVALUATION.md, "A cutoff that stops
// growing"). exponent 0 (or tokens <= 0) gives cutoff
// unchanged. The result may pass 1: an output that large is pruned whatever its
// score. Every place that compares a score with a cutoff calls this (the live
// advisor and calibrate alike), so ties are decided one way everywhere.
func CutoffAt(cutoff float64, tokens int, exponent float64, capTokens int) float64 {
	if exponent == 0 || tokens <= 0 {
		return cutoff
	}
	if capTokens > 0 {
		tokens = min(tokens, capTokens)
	}
	return cutoff * math.Pow(float64(tokens)/SizeReferenceTokens, exponent)
}
