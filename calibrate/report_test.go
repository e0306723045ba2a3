package calibrate

import (
	"encoding/json"
	"errors"
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

// TestRecommendFront: a target met only between two swept cutoffs is met by the
// front's cutoff between them; where a swept cutoff does as well, it stays.
func TestRecommendFront(t *testing.T) {
	r := func(cut, miss float64, ts int64) Result {
		return Result{Cutoff: cut, MissRate: miss, TokenSteps: ts}
	}
	sweep := []Result{r(0, 0, 100), r(0.05, 0.03, 900), r(0.10, 0.05, 1000)}
	for _, tt := range []struct {
		name  string
		front []Result
		want  float64
	}{
		{"between", []Result{sweep[0], r(0.025, 0.01, 500), r(0.0375, 0.019, 700), sweep[1], sweep[2]}, 0.0375},
		{"no better", []Result{sweep[0], r(0.0125, 0, 100), sweep[1], sweep[2]}, 0},
		{"none between", sweep, 0},
	} {
		rec, err := recommendFront(ScorerSweep{Sweep: sweep, Front: tt.front}, 0.02, ObjectiveTokenSteps)
		if err != nil || rec.None || rec.Cutoff != tt.want {
			t.Errorf("%s: recommended %v (none %v), %v; want %v", tt.name, rec.Cutoff, rec.None, err, tt.want)
		}
	}
	if rec, err := recommendFront(ScorerSweep{Sweep: sweep[1:], Front: sweep[1:]}, 0.02, ObjectiveTokenSteps); !rec.None || !errors.Is(err, ErrNoCutoff) {
		t.Errorf("no cutoff meets the target: %+v, %v; want none, ErrNoCutoff", rec, err)
	}
}
