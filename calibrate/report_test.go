package calibrate

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func handReport(t *testing.T) Report {
	t.Helper()
	outs, sessions := handOutputs()
	rep, err := NewReport(outs, sessions, []ScorerInput{{Name: "x", Outputs: outs}}, ReportConfig{TargetMiss: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestReportJSON: a report with undefined AUC (one class only) still encodes, with
// null in place of NaN.
func TestReportJSON(t *testing.T) {
	rep := handReport(t)
	rep.Scorers[0].Reliability.AUC = math.NaN()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"auc":null`) || !strings.Contains(string(b), `"brier":0.`) {
		t.Errorf("JSON lacks auc null or brier: %.400s", b)
	}
}

// TestCutoffText: a cutoff prints with two decimals unless they would round it;
// the expected strings are the values as written in a config.
func TestCutoffText(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
	}{
		{0, "0.00"}, {0.04, "0.04"}, {0.1, "0.10"}, {0.25, "0.25"}, {1, "1.00"},
		{0.045, "0.045"}, {0.005, "0.005"}, {0.0563, "0.0563"}, {0.05634, "0.0563"},
	} {
		if got := CutoffText(tt.in); got != tt.want {
			t.Errorf("CutoffText(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
