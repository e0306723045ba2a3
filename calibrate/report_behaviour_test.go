package calibrate

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// An anchor is dominated by the front point with no higher miss rate and no fewer
// token-steps that has the most token-steps, the lower cutoff on a tie, a point
// at cutoff 0 included; an anchor that saves nothing is dominated by a point that
// saves nothing without missing.
func TestDominanceTakesTheMostTokenSteps(t *testing.T) {
	pt := func(c, miss float64, ts int64) Result { return Result{Cutoff: c, MissRate: miss, TokenSteps: ts} }
	for _, tt := range []struct {
		name   string
		front  []Result
		anchor Result
		want   Dominance
	}{
		{"cutoff 0 has the most", []Result{pt(0, 0, 500), pt(0.1, 0, 300)}, Result{Name: "a", MissRate: 0.05, TokenSteps: 200},
			Dominance{Anchor: "a", MissRate: 0.05, TokenSteps: 200, Cutoff: 0, PointMissRate: 0, PointTokenSteps: 500}},
		{"a later point has more", []Result{pt(0.1, 0, 300), pt(0.2, 0.01, 500)}, Result{Name: "a", MissRate: 0.02, TokenSteps: 200},
			Dominance{Anchor: "a", MissRate: 0.02, TokenSteps: 200, Cutoff: 0.2, PointMissRate: 0.01, PointTokenSteps: 500}},
		{"equal token-steps: the lower cutoff", []Result{pt(0.1, 0, 300), pt(0.2, 0.01, 300)}, Result{Name: "a", MissRate: 0.02, TokenSteps: 300},
			Dominance{Anchor: "a", MissRate: 0.02, TokenSteps: 300, Cutoff: 0.1, PointMissRate: 0, PointTokenSteps: 300}},
		{"an anchor that saves nothing", []Result{pt(0, 0, 0), pt(0.1, 0.5, 100)}, Result{Name: "a"},
			Dominance{Anchor: "a", Cutoff: 0}},
	} {
		if d := cmp.Diff([]Dominance{tt.want}, dominance(tt.front, []Result{tt.anchor})); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}
}

// textRows returns the report's lines as their space-separated words, the
// tabwriter's alignment dropped.
func textRows(t *testing.T, r Report) []string {
	t.Helper()
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return out
}

// rowsNamed returns the name and cutoff columns of the result rows among lines
// (those whose first word is one of names).
func rowsNamed(lines []string, names ...string) []string {
	var out []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 1 && strings.Contains(" "+strings.Join(names, " ")+" ", " "+f[0]+" ") {
			out = append(out, f[0]+" "+f[1])
		}
	}
	return out
}

// The plain-text report: the regime's fractions as percentages of the budget; a
// baseline's cutoff as "-", a scorer's (0 included) with two decimals, each sweep
// row followed by its random row at the same prune rate (a sweep with fewer
// random rows prints the rest alone); each anchor beside the front, dominated at
// its point's cutoff (0 included) or not dominated, the front's gap in points of
// miss rate.
func TestReportTextRowsAndDominance(t *testing.T) {
	opts := DefaultOptions()
	opts.LowWaterFraction, opts.RewriteFraction = 0.75, 0.1
	sweep := ScorerSweep{
		Scorer:         "x",
		Sweep:          []Result{{Name: "scorer:x", Cutoff: 0}, {Name: "scorer:x", Cutoff: 0.25}},
		Random:         []Result{{Name: "random", Cutoff: 0}, {Name: "random", Cutoff: 0.25}},
		Recommendation: Recommendation{None: true, Cutoff: -1, Reason: "no cutoff of 2 has miss rate <= 0.000"},
		Front:          []Result{{Cutoff: 0}, {Cutoff: 0.125}, {Cutoff: 0.25}},
		Dominance: []Dominance{
			{Anchor: "anthropic-clearing", Cutoff: 0, PointTokenSteps: 4000},
			{Anchor: "opencode-prune", MissRate: 0.1, TokenSteps: 90_000, Cutoff: -1},
		},
	}
	rep := Report{Options: opts, Outputs: 3, Sessions: 1, Budgets: []BudgetReport{{Window: 200_000, Budget: 100_000,
		Baselines: []Result{{Name: "keep-all", Cutoff: -1}, {Name: "rules", Cutoff: -1}}, Scorers: []ScorerSweep{sweep}}}}
	lines := textRows(t, rep)
	if !strings.Contains(lines[0], "low-water 75% and least rewrite 10% of the budget") {
		t.Errorf("first line %q: want the low-water mark and least rewrite as 75%% and 10%%", lines[0])
	}
	want := []string{"keep-all -", "rules -", "scorer:x 0.00", "random 0.00", "scorer:x 0.25", "random 0.25"}
	if d := cmp.Diff(want, rowsNamed(lines, "keep-all", "rules", "scorer:x", "random")); d != "" {
		t.Errorf("result rows (-want +got):\n%s", d)
	}
	for _, w := range []string{
		"anchors beside scorer x's front (3 cutoffs, neighbours within 1 point of miss rate where the scores allow):",
		"anthropic-clearing miss rate 0.000, 0 token-steps: dominated at cutoff 0.0000 (miss rate 0.000, 4000 token-steps)",
		"opencode-prune miss rate 0.100, 90000 token-steps: not dominated",
	} {
		if !strings.Contains(strings.Join(lines, "\n"), w) {
			t.Errorf("report lacks %q:\n%s", w, strings.Join(lines, "\n"))
		}
	}

	rep.Budgets[0].Scorers[0].Random = sweep.Random[:1]
	want = []string{"scorer:x 0.00", "random 0.00", "scorer:x 0.25"}
	if d := cmp.Diff(want, rowsNamed(textRows(t, rep), "scorer:x", "random")); d != "" {
		t.Errorf("one random row for two cutoffs (-want +got):\n%s", d)
	}
	rep.Budgets[0].Scorers[0].Dominance = nil
	if got := strings.Join(textRows(t, rep), "\n"); strings.Contains(got, "anchors beside") {
		t.Errorf("no anchors, yet the report sets them beside the front:\n%s", got)
	}
}

// The report's "at least" anchor is Anthropic's clearing with clear_at_least at
// 5% of each budget. Worked by hand: a 100,000-token prompt and 5 outputs of 1,000
// tokens, one per call from call 1; every call from 2 is past the 100,000 trigger,
// and clearing all but the newest 3 frees output 1 (1,000 tokens) at call 5 and
// outputs 1-2 (2,000) at call 6. At a 40,000 budget clear_at_least is 2,000: it
// clears 2 outputs at call 6; at 100,000 it is 5,000: it clears nothing (the
// plain anchor clears both either way).
func TestReportAnchorClearsAtLeastFivePercentOfTheBudget(t *testing.T) {
	var outs []Output
	c := make([]int, 8)
	for s := 1; s <= 8; s++ {
		c[s-1] = 100_000 + 1000*min(s-1, 5)
	}
	for k := 1; k <= 5; k++ {
		outs = append(outs, Output{Session: "p", Key: string(rune('0' + k)), Tokens: 1000, StubTokens: 40,
			Offset: 100_000 + 1000*(k-1), Step: k, EndStep: 8})
	}
	rep, err := NewReport(outs, []Calls{{Name: "p", Context: c}}, nil, ReportConfig{TargetMiss: 0.1, Budgets: []int{40_000, 100_000}})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Budget         int
		Plain, AtLeast int
	}
	var got []row
	for _, b := range rep.Budgets {
		r := row{Budget: b.Budget}
		for _, a := range b.Anchors {
			switch a.Name {
			case "anthropic-clearing":
				r.Plain = a.Pruned
			case "anthropic-clearing-at-least":
				r.AtLeast = a.Pruned
			}
		}
		got = append(got, r)
	}
	if d := cmp.Diff([]row{{40_000, 2, 2}, {100_000, 2, 0}}, got); d != "" {
		t.Errorf("outputs cleared (-want +got):\n%s", d)
	}
}

// A window of 0 tokens is refused; with no window in the options (0, possible
// when nothing compacts) the windows given scale nothing: the budget stays the
// options' 100,000.
func TestReportWindowsEdges(t *testing.T) {
	outs, sessions := handOutputs()
	_, err := NewReport(outs, sessions, nil, ReportConfig{TargetMiss: 0.1, Windows: []int{0}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "window 0: want a positive number of tokens") {
		t.Errorf("window 0: error %v, want ErrInvalid naming it", err)
	}
	opts := DefaultOptions()
	opts.Window = 0
	rep, err := NewReport(outs, sessions, nil, ReportConfig{Options: opts, TargetMiss: 0.1, Windows: []int{50_000}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Budgets) != 1 || rep.Budgets[0].Window != 50_000 || rep.Budgets[0].Budget != 100_000 {
		t.Errorf("budgets %+v, want one at window 50,000 with the options' budget 100,000", rep.Budgets)
	}
}
