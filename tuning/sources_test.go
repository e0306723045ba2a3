package tuning

import (
	"context"
	"errors"
	"maps"
	"math"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/internal/forecast"
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// TestSetSources: each session goes to the first root holding it (a relative
// root matches the absolute path a walk stores), a file outside every root to its
// own folder; one source in all leaves Sources nil.
func TestSetSources(t *testing.T) {
	abs, err := filepath.Abs("../../shared/sessions/pi/session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	set := &TrainingSet{Paths: map[string]string{
		"a": "../../shared/sessions/gemini-cli/x.json",
		"b": abs,
		"c": "/elsewhere/y.jsonl",
		"d": "../../shared/sessions/pi-extra/z.jsonl", // a sibling sharing the prefix "pi"
	}}
	set.SetSources([]string{"../../shared/sessions/gemini-cli", "../../shared/sessions/pi"})
	want := map[string]string{
		"a": "../../shared/sessions/gemini-cli",
		"b": "../../shared/sessions/pi",
		"c": "/elsewhere",
		"d": "../../shared/sessions/pi-extra",
	}
	if d := cmp.Diff(want, set.Sources); d != "" {
		t.Errorf("sources (-want +got):\n%s", d)
	}
	set.Paths = map[string]string{"a": "../../shared/sessions/gemini-cli/x.json", "b": abs}
	set.SetSources([]string{"../../shared/sessions"})
	if set.Sources != nil {
		t.Errorf("one source: Sources = %v, want nil", set.Sources)
	}
}

// TestEvaluateBySource: a training set of two real folders (Gemini CLI's three
// sessions and pi's three, whose contexts pass Anthropic's trigger, replayed as
// fit replays them) cross-validated once; each source's figures are the pooled
// held-out scores over its own rows and outputs. Checked by another route: the
// rows and sessions add up to the pooled ones, so do the oracles (an output's
// oracle token-steps are its own), each source's AUC is forecast.AUC of its
// rows' held-out scores, and a set made of one source's sessions alone has that
// source's oracle and anchor points.
func TestEvaluateBySource(t *testing.T) {
	roots := []string{filepath.Join(sharedDir, "gemini-cli"), filepath.Join(sharedDir, "pi")}
	found, _, _, fails := replay.Discover(roots)
	if len(fails) > 0 {
		sessionfiles.Missing(t, "real sessions not available: %v", fails[0])
	}
	rp := &replay.Replayer{Config: TrainingConfig(), Scorer: fitted.KeepScorer{}, Lenient: true, Sizer: fixedSizer{}, Background: fitted.DefaultBackground()}
	set := &TrainingSet{Group: &Group{Settings: rp.Settings()}}
	alone := map[string]*TrainingSet{}
	for _, f := range found {
		src, err := replay.Load(f.Path, true)
		if errors.Is(err, replay.ErrNotSession) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		rec, err := rp.Replay(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		set.add(rec)
		dir := filepath.Dir(f.Path)
		if alone[dir] == nil {
			alone[dir] = &TrainingSet{Group: set.Group}
		}
		alone[dir].add(rec)
	}
	set.SetSources(roots)
	ev, err := set.Evaluate(5, fitted.Options{Lambda: fitted.DefaultLambda}, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.BySource) != 2 || ev.BySource[0].Source != roots[0] || ev.BySource[1].Source != roots[1] {
		t.Fatalf("BySource = %+v, want the two roots in order", ev.BySource)
	}
	pred, _, err := fitted.CrossValidate(set.Rows, 5, fitted.Options{Lambda: fitted.DefaultLambda})
	if err != nil {
		t.Fatal(err)
	}
	var rows, sessions int
	var oracle int64
	for _, s := range ev.BySource {
		rows, sessions, oracle = rows+s.Rows, sessions+s.Sessions, oracle+s.Oracle
		var scores []float64
		var labels []bool
		for i, r := range set.Rows {
			if set.Sources[r.Session] == s.Source {
				scores, labels = append(scores, pred[i]), append(labels, r.Used)
			}
		}
		if want := forecast.AUC(scores, labels); math.Abs(s.AUC-want) > 1e-12 || len(scores) != s.Rows {
			t.Errorf("%s: AUC %v over %d rows, want %v over %d", s.Source, s.AUC, s.Rows, want, len(scores))
		}
		one := alone[filepath.Clean(s.Source)]
		var h SourceCV
		if err := one.price(&h, one.Outs, one.Calls, nil, 0.02); err != nil {
			t.Fatal(err)
		}
		if h.Oracle != s.Oracle || s.Oracle == 0 {
			t.Errorf("%s: oracle %d, want %d (the source replayed alone), not 0", s.Source, s.Oracle, h.Oracle)
		}
		// The anchors prune by their own rules, whatever the scores: their points
		// are those of the source alone; a dominating point is no worse on both.
		if len(s.Anchors) != len(calibrate.AnchorNames(1)) || len(h.Anchors) != len(s.Anchors) {
			t.Fatalf("%s: %d anchors, alone %d, want %d", s.Source, len(s.Anchors), len(h.Anchors), len(calibrate.AnchorNames(1)))
		}
		for k, d := range s.Anchors {
			a := h.Anchors[k]
			if d.Anchor != calibrate.AnchorNames(1)[k] || d.Anchor != a.Anchor || d.MissRate != a.MissRate || d.TokenSteps != a.TokenSteps {
				t.Errorf("%s: anchor %+v, alone %+v", s.Source, d, a)
			}
			if d.Cutoff >= 0 && (d.PointMissRate > d.MissRate || d.PointTokenSteps < d.TokenSteps) {
				t.Errorf("%s: %s dominated by a worse point: %+v", s.Source, d.Anchor, d)
			}
			t.Logf("%s: %+v", s.Source, d)
		}
		t.Logf("%s: %d sessions, %d rows, AUC %.4f, cutoff %.4f, miss %.3f, share %.3f", s.Source, s.Sessions, s.Rows, s.AUC, s.Cutoff, s.MissRate, s.TokenStepsShare)
	}
	if rows != len(set.Rows) || sessions != 6 || oracle != ev.Oracle {
		t.Errorf("sources add to %d rows, %d sessions, oracle %d; want %d, 6, %d", rows, sessions, oracle, len(set.Rows), ev.Oracle)
	}
}

// TestBaselineConfig: beside an asks-only replay (its scorer's cutoff positive and
// under calibrate.MinReplayCutoffNote), an in-process baseline asks only too, also
// when the tiny cutoff is the config's Cutoff for every scorer and no scorer has
// one by name; beside any other replay it keeps the base config's cutoffs.
func TestBaselineConfig(t *testing.T) {
	lex := lexical.New()
	for _, tc := range []struct {
		name    string
		cutoff  float64
		byName  map[string]float64
		scorer  string
		wantLex float64
	}{
		{"asks only, by name", 0.25, map[string]float64{"fitted": math.SmallestNonzeroFloat64}, "fitted", math.SmallestNonzeroFloat64},
		{"asks only, for every scorer", 1e-12, nil, "fitted", 1e-12},
		{"a replay that prunes", 0.25, map[string]float64{"fitted": 0.05}, "fitted", 0.25},
		{"rules only", 0, nil, "none", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Group{Scorer: tc.scorer}
			g.Settings.Config = advisor.DefaultConfig()
			g.Settings.Config.Cutoff, g.Settings.Config.ScorerCutoffs = tc.cutoff, tc.byName
			before := maps.Clone(tc.byName)
			if got := baselineConfig(g, lex).CutoffFor(lex.Name()); got != tc.wantLex {
				t.Errorf("lexical baseline's cutoff %v, want %v", got, tc.wantLex)
			}
			if !maps.Equal(before, g.Settings.Config.ScorerCutoffs) {
				t.Errorf("the base group's cutoffs changed: %v, were %v", g.Settings.Config.ScorerCutoffs, before)
			}
		})
	}
}
