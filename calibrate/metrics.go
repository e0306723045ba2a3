package calibrate

import "github.com/pruneadvisor/pruneadvisor/internal/forecast"

// Bin is one row of a reliability table: the OK asks whose keep-probability falls in
// [Lo, Hi) (the last bin includes 1).
type Bin struct {
	Lo        float64 `json:"lo"`
	Hi        float64 `json:"hi"`
	N         int     `json:"n"`          // asks in the bin
	Used      int     `json:"used"`       // of them, asks whose output was used at or after the ask step
	Rate      float64 `json:"rate"`       // Used / N; 0 for an empty bin
	MeanScore float64 `json:"mean_score"` // mean keep-probability of the bin's asks; 0 for an empty bin
}

// Reliability is a scorer's calibration over a set of asks: each OK ask is an
// example with score Keep and label "the output was used at a step >= the ask
// step" (a prune at that ask would have missed; see the package comment on steps).
// Asks that returned no score are left out and counted in Failed.
type Reliability struct {
	Bins   []Bin   `json:"bins"`
	N      int     `json:"n"`      // OK asks
	Used   int     `json:"used"`   // OK asks with a positive label
	Failed int     `json:"failed"` // asks without a score
	Brier  float64 `json:"brier"`  // Brier score of the asks (forecast.Brier); NaN with no asks
	AUC    float64 `json:"auc"`    // AUC of the asks (forecast.AUC); NaN without both labels
}

// ReliabilityOf builds the reliability table of the asks in outs with bins
// equal-width bins over [0,1] (bins < 1 is treated as 1), plus Brier and AUC.
func ReliabilityOf(outs []Output, bins int) Reliability {
	bins = max(bins, 1)
	r := Reliability{Bins: make([]Bin, bins)}
	for i := range r.Bins {
		r.Bins[i].Lo = float64(i) / float64(bins)
		r.Bins[i].Hi = float64(i+1) / float64(bins)
	}
	var scores []float64
	var labels []bool
	sums := make([]float64, bins)
	for i := range outs {
		o := &outs[i]
		for _, a := range o.Asks {
			if !a.OK {
				r.Failed++
				continue
			}
			used := o.UsedFrom(a.Step) != 0
			scores = append(scores, a.Keep)
			labels = append(labels, used)
			b := min(int(a.Keep*float64(bins)), bins-1)
			b = max(b, 0)
			r.Bins[b].N++
			sums[b] += a.Keep
			if used {
				r.Bins[b].Used++
				r.Used++
			}
		}
	}
	r.N = len(scores)
	for i := range r.Bins {
		if b := &r.Bins[i]; b.N > 0 {
			b.Rate = float64(b.Used) / float64(b.N)
			b.MeanScore = sums[i] / float64(b.N)
		}
	}
	r.Brier = forecast.Brier(scores, labels)
	r.AUC = forecast.AUC(scores, labels)
	return r
}
