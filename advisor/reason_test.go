package advisor

import "testing"

// TestScoreAndCutoff: two places, unless the score and its cutoff would read the
// same; then as many more as tell them apart, four at most.
func TestScoreAndCutoff(t *testing.T) {
	for _, tt := range []struct {
		score, cutoff float64
		s, c          string
	}{
		{0.08, 0.05, "0.08", "0.05"},
		{0.054, 0.0532, "0.054", "0.053"},
		{0.0451, 0.0449, "0.05", "0.04"}, // apart at two places already
		{0.04512, 0.04508, "0.0451", "0.0451"},
		{0.01, 0.043, "0.01", "0.04"},
	} {
		s, c := scoreAndCutoff(tt.score, tt.cutoff)
		if s != tt.s || c != tt.c {
			t.Errorf("scoreAndCutoff(%v, %v) = %q, %q; want %q, %q", tt.score, tt.cutoff, s, c, tt.s, tt.c)
		}
	}
}
