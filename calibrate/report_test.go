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
