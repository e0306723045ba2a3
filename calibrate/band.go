package calibrate

import (
	"math/rand/v2"
	"slices"
)

// BandSamples is how many resamples of the sessions a ShareBand is drawn from: 1,000. On
// the final asks-only replays of ../shared/sessions (23 sessions) the 128-token
// row's median moved by under a point and its 10th and 90th percentiles by under
// 2.5 points between seeds 1, 2 and 3; with 200 draws the 90th percentile moved
// by 5 (docs/EVALUATION.md, "A cutoff that stops growing").
const BandSamples = 1000

// bandStream is the second word of the resampling generator's PCG seed (the first
// is Options.Seed), so that the band's draws are not the random baseline's.
const bandStream = 0x62616e64 // "band"

// ShareBand is how far a front's share of the oracle at a target miss rate moves
// when the sessions are resampled (the bootstrap: Samples draws of as many
// sessions as there are, with replacement; in each, the front's point with the
// most net token-steps within the target, over the oracle's net token-steps of the
// same draw): its 10th percentile, median and 90th percentile, as fractions. A
// set of a few long sessions swings far; docs/EVALUATION.md, "A cutoff that stops
// growing", reads it.
type ShareBand struct {
	// Samples is the number of resamples drawn (BandSamples).
	Samples int `json:"samples"`
	// P10, Median and P90 are the 10th, 50th and 90th percentiles of the draws'
	// shares, each a fraction of the oracle's net token-steps (0.6 = 60%; a draw
	// without a point within the target counts 0), nearest-rank.
	P10    float64 `json:"p10"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
}

// shareBand resamples the sessions (BandSamples draws, seeded by Options.Seed) and
// returns the band of the share of the oracle that front (Results of one scorer by
// cutoff, decision level, the advisor's stubs) keeps out at a miss rate of at most
// target; nil without sessions or front points. A draw with no point within the target, or an
// oracle that keeps nothing out, counts as a share of 0.
func (e *Evaluator) shareBand(front []Result, target float64) *ShareBand {
	if len(e.sessions) == 0 || len(front) == 0 {
		return nil
	}
	per := make([][]tally, len(front))
	for i, r := range front {
		per[i] = e.tallies(ScorerPrunes(e.outs, r.Cutoff, e.opts.SizeExponent, e.opts.SizeCapTokens), holdDigest)
	}
	oracle := e.tallies(OraclePrunes(e.outs), holdDigest)
	rng := rand.New(rand.NewPCG(e.opts.Seed, bandStream))
	draw := make([]int, len(e.sessions))
	shares := make([]float64, BandSamples)
	for b := range shares {
		for j := range draw {
			draw[j] = rng.IntN(len(e.sessions))
		}
		shares[b] = drawShare(per, oracle, draw, target)
	}
	slices.Sort(shares)
	at := func(q float64) float64 { return shares[int(q*float64(len(shares)-1)+0.5)] }
	return &ShareBand{Samples: BandSamples, P10: at(0.1), Median: at(0.5), P90: at(0.9)}
}

// drawShare is one draw's share: over the sessions draw names (indexes, repeats
// counted), the most net token-steps of a front point whose miss rate is at most
// target, over the oracle's net token-steps.
func drawShare(per [][]tally, oracle []tally, draw []int, target float64) float64 {
	var orc int64
	for _, j := range draw {
		orc += oracle[j].tokenSteps - oracle[j].stubSteps
	}
	if orc <= 0 {
		return 0
	}
	best := int64(0)
	for _, ts := range per {
		var pruned, misses int
		var net int64
		for _, j := range draw {
			pruned += ts[j].pruned
			misses += ts[j].misses
			net += ts[j].tokenSteps - ts[j].stubSteps
		}
		if pruned > 0 && float64(misses)/float64(pruned) <= target && net > best {
			best = net
		}
	}
	return float64(best) / float64(orc)
}
