package calibrate

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// NewReport refuses a config it cannot honour, naming what is wrong, and takes the
// edges of each range (targets 0 and 1, cutoffs 0 and 1).
func TestReportConfigRefuses(t *testing.T) {
	outs, sessions := handOutputs()
	scorers := []ScorerInput{{Name: "x", Outputs: outs}}
	for _, tt := range []struct {
		name string
		cfg  ReportConfig
		want string // "" for valid
	}{
		{"no misses at all", ReportConfig{TargetMiss: 0}, ""},
		{"any miss rate", ReportConfig{TargetMiss: 1, Cutoffs: []float64{0, 1}, Objective: ObjectiveTokenSteps}, ""},
		{"target NaN", ReportConfig{TargetMiss: math.NaN()}, "target miss rate NaN outside [0,1]"},
		{"target negative", ReportConfig{TargetMiss: -0.01}, "target miss rate -0.01 outside [0,1]"},
		{"target over 1", ReportConfig{TargetMiss: 1.5}, "target miss rate 1.5 outside [0,1]"},
		{"unknown objective", ReportConfig{TargetMiss: 0.1, Objective: "dollars"}, `objective "dollars"`},
		{"cutoff over 1", ReportConfig{TargetMiss: 0.1, Cutoffs: []float64{0.5, 1.01}}, "cutoff 1.01 outside [0,1]"},
		{"cutoff negative", ReportConfig{TargetMiss: 0.1, Cutoffs: []float64{-0.1}}, "cutoff -0.1 outside [0,1]"},
		{"cutoff NaN", ReportConfig{TargetMiss: 0.1, Cutoffs: []float64{math.NaN()}}, "cutoff NaN outside [0,1]"},
		{"budget 0", ReportConfig{TargetMiss: 0.1, Budgets: []int{50_000, 0}}, "budget 0: want a positive number of tokens"},
		{"window negative", ReportConfig{TargetMiss: 0.1, Windows: []int{-1}}, "window -1: want a positive number of tokens"},
		{"advisor's scorer not given", ReportConfig{TargetMiss: 0.1, Budgets: []int{45_000}, Advisor: &AdvisorInput{Scorer: "y", Cutoff: 0.25, Budget: 100_000}}, `advisor: no sweep of scorer "y" at cutoff 0.25`},
	} {
		_, err := NewReport(outs, sessions, scorers, tt.cfg)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: NewReport error = %v, want nil", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewReport error = %v, want an ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
	// The caller's cutoffs are not reordered in place.
	cutoffs := []float64{0.5, 0}
	if _, err := NewReport(outs, sessions, scorers, ReportConfig{TargetMiss: 0.1, Cutoffs: cutoffs}); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(cutoffs, []float64{0.5, 0}) {
		t.Errorf("NewReport sorted the caller's cutoffs: %v", cutoffs)
	}
}

// A window other than the options' scales the budget (and the hard limit) by the
// window's share of the default 200,000: window 80,000 gives a 40,000-token budget,
// which the hand session's 50,000-token calls exceed at all 10 calls; window
// 100,000 gives 50,000, which they do not exceed. Budgets given stay as they are in
// every window.
func TestReportWindowsScaleTheBudget(t *testing.T) {
	outs, sessions := handOutputs()
	rep, err := NewReport(outs, sessions, nil, ReportConfig{TargetMiss: 0.1, Windows: []int{80_000, 100_000, 200_000}})
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Window, Budget, OverBudget int }
	var got []row
	for _, b := range rep.Budgets {
		got = append(got, row{b.Window, b.Budget, b.Baselines[0].Applied.StepsOverBudget})
	}
	want := []row{{80_000, 40_000, 10}, {100_000, 50_000, 0}, {200_000, 100_000, 0}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("budgets per window (-want +got):\n%s", d)
	}
	rep, err = NewReport(outs, sessions, nil, ReportConfig{TargetMiss: 0.1, Windows: []int{80_000}, Budgets: []int{45_000, 60_000}})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, b := range rep.Budgets {
		got = append(got, row{b.Window, b.Budget, b.Baselines[0].Applied.StepsOverBudget})
	}
	if d := cmp.Diff([]row{{80_000, 45_000, 10}, {80_000, 60_000, 0}}, got); d != "" {
		t.Errorf("given budgets (-want +got):\n%s", d)
	}
}

// The hard limit scales with the window too (180,000 of 200,000 is 45,000 of
// 50,000): at a 25,000-token budget the hand session's 50,000-token calls are past
// it in a 50,000-token window, so the scorer's pending prunes are applied whatever
// they cost; in the default window the same budget only forces rewrites that pay
// (price_forced), and none does.
func TestReportWindowsScaleTheHardLimit(t *testing.T) {
	outs, sessions := handOutputs()
	scorers := []ScorerInput{{Name: "x", Outputs: outs}}
	rep, err := NewReport(outs, sessions, scorers, ReportConfig{TargetMiss: 1, Cutoffs: []float64{0.25}, Windows: []int{50_000, 200_000}, Budgets: []int{25_000}})
	if err != nil {
		t.Fatal(err)
	}
	small, dflt := rep.Budgets[0].Scorers[0].Sweep[0].Applied, rep.Budgets[1].Scorers[0].Sweep[0].Applied
	if small.Rewrites == 0 || dflt.Rewrites != 0 {
		t.Errorf("rewrites at a 25,000 budget: %d in a 50,000 window, %d in 200,000; want some, then none", small.Rewrites, dflt.Rewrites)
	}
}

// The advisor's row is its own rewrites at the budget it ran under (TestApplied's
// figures, with its cutoff), and its scorer's sweep entry at its cutoff, renamed, at
// any other; its cutoff joins the sweep.
func TestReportAdvisorRow(t *testing.T) {
	outs, sessions := handOutputs()
	rep, err := NewReport(outs, sessions, []ScorerInput{{Name: "x", Outputs: outs}}, ReportConfig{
		TargetMiss: 0.1, Cutoffs: []float64{0, 0.5}, Budgets: []int{100_000, 45_000},
		Advisor: &AdvisorInput{Scorer: "x", Cutoff: 0.25, Budget: 100_000, AppliedAt: []int{4, 5, 7}},
	})
	if err != nil {
		t.Fatal(err)
	}
	own := rep.Budgets[0].Advisor
	if own == nil || own.Name != "advisor" || own.Cutoff != 0.25 || own.Applied.Rewrites != 3 || !approx(own.Applied.PaidUSD, 0.782082) {
		t.Errorf("advisor at its own budget = %+v, want its 3 rewrites at $0.782082, cutoff 0.25", own)
	}
	var cutoffs []float64
	for _, r := range rep.Budgets[1].Scorers[0].Sweep {
		cutoffs = append(cutoffs, r.Cutoff)
	}
	if !cmp.Equal(cutoffs, []float64{0, 0.25, 0.5}) {
		t.Errorf("sweep cutoffs %v, want the advisor's 0.25 among them", cutoffs)
	}
	other := rep.Budgets[1].Advisor
	entry := rep.Budgets[1].Scorers[0].Sweep[1]
	entry.Name = "advisor"
	if other == nil {
		t.Fatal("no advisor row at the other budget")
	}
	if d := cmp.Diff(entry, *other, cmp.Comparer(approx)); d != "" {
		t.Errorf("advisor at another budget is not its scorer's sweep entry (-sweep +advisor):\n%s", d)
	}
	// A replay in another window than the report's: its own rewrites apply only in
	// that window.
	rep, err = NewReport(outs, sessions, []ScorerInput{{Name: "x", Outputs: outs}}, ReportConfig{
		TargetMiss: 0.1, Cutoffs: []float64{0.25},
		Advisor: &AdvisorInput{Scorer: "x", Cutoff: 0.25, Budget: 100_000, Window: 150_000, AppliedAt: []int{0, 0, 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if a := rep.Budgets[0].Advisor; a == nil || a.Pruned != 3 {
		t.Errorf("advisor of another window = %+v, want the sweep entry (3 pruned), not the replay's (none)", a)
	}
}
