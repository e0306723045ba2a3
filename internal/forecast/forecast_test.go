package forecast

import (
	"math"
	"testing"
)

func approx(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestBrierAUC(t *testing.T) {
	tests := []struct {
		name         string
		scores       []float64
		labels       []bool
		brier, auc   float64
		nanB, nanAUC bool
	}{
		// (0.1² + 0.2²)/2 = 0.025; the positive outranks the negative: AUC 1.
		{"two", []float64{0.9, 0.2}, []bool{true, false}, 0.025, 1, false, false},
		// Pairs (pos, neg): (0.8,0.4)=1 (0.8,0.1)=1 (0.4,0.4)=½ (0.4,0.1)=1 -> 3.5/4.
		// Brier (0.04 + 0.36 + 0.16 + 0.01)/4 = 0.1425.
		{"tie", []float64{0.8, 0.4, 0.4, 0.1}, []bool{true, true, false, false}, 0.1425, 0.875, false, false},
		// Inverted: AUC 0; Brier (1 + 1)/2 = 1.
		{"inverted", []float64{0, 1}, []bool{true, false}, 1, 0, false, false},
		{"one class", []float64{0.3, 0.7}, []bool{true, true}, (0.49 + 0.09) / 2, 0, false, true},
		{"empty", nil, nil, 0, 0, true, true},
	}
	for _, tt := range tests {
		b, a := Brier(tt.scores, tt.labels), AUC(tt.scores, tt.labels)
		if tt.nanB != math.IsNaN(b) || !tt.nanB && !approx(b, tt.brier) {
			t.Errorf("%s: Brier %v, want %v", tt.name, b, tt.brier)
		}
		if tt.nanAUC != math.IsNaN(a) || !tt.nanAUC && !approx(a, tt.auc) {
			t.Errorf("%s: AUC %v, want %v", tt.name, a, tt.auc)
		}
	}
}

// Brier and AUC by hand, the cases advisor/fitted checked its own copy with
// (the two implementations are one now: this package's).
func TestBrierAUCHand(t *testing.T) {
	if b := Brier([]float64{0.9, 0.2}, []bool{true, false}); math.Abs(b-0.025) > 1e-12 {
		t.Errorf("Brier %v, want 0.025", b)
	}
	if a := AUC([]float64{0.8, 0.4, 0.4, 0.1}, []bool{true, true, false, false}); math.Abs(a-0.875) > 1e-12 {
		t.Errorf("AUC with a tie %v, want 0.875", a)
	}
	if a := AUC([]float64{0, 1}, []bool{true, false}); a != 0 {
		t.Errorf("inverted AUC %v, want 0", a)
	}
	if !math.IsNaN(AUC([]float64{0.3}, []bool{true})) || !math.IsNaN(Brier(nil, nil)) {
		t.Error("one class or no rows: want NaN")
	}
}

// TestNullNaN: NaN becomes nil (JSON's null), any other figure a pointer to itself.
func TestNullNaN(t *testing.T) {
	if p := NullNaN(math.NaN()); p != nil {
		t.Errorf("NullNaN(NaN) = %v, want nil", *p)
	}
	for _, f := range []float64{0, 0.5, -1, math.Inf(1)} {
		if p := NullNaN(f); p == nil || *p != f {
			t.Errorf("NullNaN(%v) = %v, want a pointer to it", f, p)
		}
	}
}
