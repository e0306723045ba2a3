package planner

import (
	"math"
	"testing"
)

// The cutoff a candidate is pruned under grows with its size: at the reference
// size (1,000 tokens) it is the configured cutoff; with exponent 0.5 an output four
// times as large is pruned under twice the cutoff and one a quarter as large under
// half; exponent 1 scales it in proportion; exponent 0, or no size known, leaves it
// as configured; and it may pass 1. Past the cap the size counts as the cap's: a
// cap of 4,000 prunes a 16,000-token output under 0.2 x (4000/1000)^0.5 = 0.4, a
// cap above the size or 0 changes nothing. Each expected value is worked by hand:
// 0.2 x (4000/1000)^0.5 = 0.2 x 2, 0.2 x (250/1000)^0.5 = 0.2 x 0.5,
// 0.2 x 3000/1000 = 0.6, 0.5 x (16000/1000)^0.5 = 0.5 x 4.
func TestCutoffGrowsWithTheOutput(t *testing.T) {
	for _, tt := range []struct {
		name     string
		cutoff   float64
		tokens   int
		exponent float64
		cap      int
		want     float64
	}{
		{"reference size", 0.2, 1000, 0.5, 0, 0.2},
		{"four times as large", 0.2, 4000, 0.5, 0, 0.4},
		{"a quarter as large", 0.2, 250, 0.5, 0, 0.1},
		{"in proportion at exponent 1", 0.2, 3000, 1, 0, 0.6},
		{"exponent 0", 0.2, 4000, 0, 0, 0.2},
		{"no tokens", 0.2, 0, 0.5, 0, 0.2},
		{"negative tokens", 0.2, -5, 0.5, 0, 0.2},
		{"past 1", 0.5, 16000, 0.5, 0, 2},
		{"past the cap", 0.2, 16000, 0.5, 4000, 0.4},
		{"at the cap", 0.2, 4000, 0.5, 4000, 0.4},
		{"under the cap", 0.2, 250, 0.5, 4000, 0.1},
		{"cap at exponent 0", 0.2, 16000, 0, 4000, 0.2},
	} {
		if got := CutoffAt(tt.cutoff, tt.tokens, tt.exponent, tt.cap); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: CutoffAt(%v, %d, %v, %d) = %v; want %v", tt.name, tt.cutoff, tt.tokens, tt.exponent, tt.cap, got, tt.want)
		}
	}
}
