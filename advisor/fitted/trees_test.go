package fitted

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/internal/forecast"
)

// handBoost is handModel with one tree: log_age (feature 0) <= 2 steps +0.5 in
// log-odds, above -0.25, from a base of -1.
func handBoost() *Model {
	m := handModel()
	m.Version = VersionBoost
	m.Boost = &Boost{Base: -1, Options: TreeOptions{Trees: 1, Depth: 3, Rate: 0.05, MinLeaf: 50, L2: 1, Bins: 64}, Trees: []Tree{{
		Feature: []int{0, -1, -1}, Threshold: []float64{2, 0, 0}, Left: []int{1, 0, 0}, Right: []int{2, 0, 0}, Value: []float64{0, 0.5, -0.25},
	}}}
	return m
}

// An ensemble's keep-probability is the mean of the regression's and the trees',
// by hand (python3: s = lambda z: 1/(1+math.exp(-z))):
//   - age 9: log_age ln 10 = 2.3026 > 2: trees s(-1.25) = 0.2227001, the
//     regression s(-2.802585) = 0.0571846 (TestPredictHand): mean 0.1399424;
//   - age 5: log_age ln 6 = 1.7918 <= 2: trees s(-0.5) = 0.3775407, the
//     regression s(0.5 - 0.791759 - 2) = 0.0918077: mean 0.2346742.
func TestPredictEnsembleByHand(t *testing.T) {
	m := handBoost()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		age  int
		want float64
	}{{9, 0.1399424}, {5, 0.2346742}} {
		if got := m.Predict(&cards.Signals{Age: tt.age}); math.Abs(got-tt.want) > 1e-7 {
			t.Errorf("age %d: Predict = %.7f, want %.7f", tt.age, got, tt.want)
		}
	}
	// The same file read back predicts the same.
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("hand.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Predict(&cards.Signals{Age: 9}); math.Abs(got-0.1399424) > 1e-7 {
		t.Errorf("read back: Predict = %.7f, want 0.1399424", got)
	}
}

// A model file whose trees could not be walked, or whose version and trees
// disagree, is refused with the field named.
func TestParseBoostErrors(t *testing.T) {
	edit := editOf(handBoost)
	tests := []parseCase{
		{"trees in a version 1 file", edit(func(m *Model) { m.Version = Version }), "boost: present in a version 1 file"},
		{"version 2 without trees", edit(func(m *Model) { m.Boost = nil }), "boost: missing"},
		{"a feature past the list", edit(func(m *Model) { m.Boost.Trees[0].Feature[0] = len(Features) }), "trees[0].feature[0]"},
		{"a child before its parent", edit(func(m *Model) { m.Boost.Trees[0].Right[0] = 0 }), "trees[0] node 0: children 1 and 0"},
		{"a child past the tree", edit(func(m *Model) { m.Boost.Trees[0].Left[0] = 3 }), "trees[0] node 0: children 3 and 2"},
		{"arrays of other lengths", edit(func(m *Model) { m.Boost.Trees[0].Value = m.Boost.Trees[0].Value[:2] }), "trees[0]: arrays of 3, 3, 3, 3 and 2 nodes"},
		{"an empty tree", edit(func(m *Model) { m.Boost.Trees[0] = Tree{} }), "trees[0]: arrays of 0"},
		{"a rate out of range", edit(func(m *Model) { m.Boost.Options.Rate = 2 }), "trees: rate 2, want in (0, 1]"},
		{"too many bins", edit(func(m *Model) { m.Boost.Options.Bins = 256 }), "trees: bins 256, want 2 to 255"},
		{"fewer trees than the options say", edit(func(m *Model) { m.Boost.Options.Trees = 2 }), "boost: 1 trees, options say 2"},
		{"no trees", edit(func(m *Model) { m.Boost.Options.Trees, m.Boost.Trees = 0, nil }), "boost: 0 trees, options say 0 (at least 1)"},
	}
	wantParseErrors(t, tests)
	// JSON has no NaN: a model built in memory is checked by Validate.
	nan := handBoost()
	nan.Boost.Trees[0].Value[1] = math.NaN()
	if err := nan.Validate(); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "trees[0] node 1") {
		t.Errorf("NaN leaf: %v", err)
	}
	if _, err := Train(synthetic(500, 3), Options{Trees: TreeOptions{Trees: 10, Depth: 0}}); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "depth 0") {
		t.Errorf("Train with depth 0: %v", err)
	}
}

// xorRows are rows whose output is used when exactly one of two things holds: it
// is older than 20 steps, or larger than 1,000 tokens (80% of the time; 20% the
// other way). No weighted sum of the features separates them; trees do.
func xorRows(n int, seed uint64) []Row {
	rng := rand.New(rand.NewPCG(seed, 0))
	rows := make([]Row, n)
	for i := range rows {
		s := cards.Signals{Step: 100, Age: 1 + rng.IntN(40), Tokens: 200 + rng.IntN(1600), Action: "read"}
		used := (s.Age > 20) != (s.Tokens > 1000)
		if rng.Float64() < 0.2 {
			used = !used
		}
		rows[i] = Row{Session: string(rune('a' + i%20)), Signals: s, Used: used}
	}
	return rows
}

// Trees add what the regression cannot weigh: on rows where use depends on two
// features together, the regression alone ranks no better than chance on rows it
// has not seen, and the ensemble ranks them close to the best a model can (the
// label flips 20% of the time: AUC 0.8 at most).
func TestTreesLearnWhatTheRegressionCannot(t *testing.T) {
	train, test := xorRows(4000, 1), xorRows(2000, 2)
	labels := make([]bool, len(test))
	for i, r := range test {
		labels[i] = r.Used
	}
	auc := func(m *Model) float64 {
		p := make([]float64, len(test))
		for i := range test {
			p[i] = m.Predict(&test[i].Signals)
		}
		return forecast.AUC(p, labels)
	}
	lr, err := Train(train, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Trees = DefaultTreeOptions()
	opts.Trees.Trees = 100
	ens, err := Train(train, opts)
	if err != nil {
		t.Fatal(err)
	}
	if ens.Version != VersionBoost || ens.Boost == nil || len(ens.Boost.Trees) != 100 {
		t.Fatalf("ensemble: version %d, %v", ens.Version, ens.Boost != nil)
	}
	if a := auc(lr); a > 0.6 {
		t.Errorf("the regression alone: held-out AUC %.3f, want at most 0.6 (no weighted sum separates these rows)", a)
	}
	if a := auc(ens); a < 0.75 {
		t.Errorf("the ensemble: held-out AUC %.3f, want at least 0.75", a)
	}
	// The same rows in the same order give the same trees.
	again, _ := Train(train, opts)
	a, _ := ens.Marshal()
	b, _ := again.Marshal()
	if string(a) != string(b) {
		t.Error("Train with trees is not deterministic")
	}
}

// A dropped feature (an ablation) is split on by no tree.
func TestTreesLeaveDroppedFeaturesOut(t *testing.T) {
	opts := DefaultOptions()
	opts.Trees = DefaultTreeOptions()
	opts.Trees.Trees = 30
	opts.Drop = []string{"log_age", "age_share", "never_x_log_age"}
	m, err := Train(xorRows(3000, 5), opts)
	if err != nil {
		t.Fatal(err)
	}
	var dropped []int
	for j, f := range Features {
		if slices.Contains(opts.Drop, f.Name) {
			dropped = append(dropped, j)
		}
	}
	splits := 0
	for k, tr := range m.Boost.Trees {
		for i, f := range tr.Feature {
			if slices.Contains(dropped, f) {
				t.Fatalf("tree %d node %d splits on dropped feature %s", k, i, Features[f].Name)
			}
			if f >= 0 {
				splits++
			}
		}
	}
	if splits == 0 {
		t.Error("no tree split at all: the test would pass for any Drop")
	}
}

// Every split keeps at least MinLeaf training rows on each side, and no tree is
// deeper than Depth.
func TestTreesKeepTheirShape(t *testing.T) {
	rows := xorRows(3000, 9)
	opts := TreeOptions{Trees: 20, Depth: 2, Rate: 0.1, MinLeaf: 400, L2: 1, Bins: 16}
	X, y := design(rows)
	b := trainBoost(X, y, len(Features), nil, opts)
	n := len(Features)
	for k, tr := range b.Trees {
		var walk func(i, depth int, idx []int)
		walk = func(i, depth int, idx []int) {
			if depth > opts.Depth {
				t.Fatalf("tree %d: node %d at depth %d > %d", k, i, depth, opts.Depth)
			}
			if len(idx) < opts.MinLeaf {
				t.Fatalf("tree %d: node %d holds %d rows < %d", k, i, len(idx), opts.MinLeaf)
			}
			if tr.Feature[i] < 0 {
				return
			}
			var l, r []int
			for _, row := range idx {
				if X[row*n+tr.Feature[i]] <= tr.Threshold[i] {
					l = append(l, row)
				} else {
					r = append(r, row)
				}
			}
			walk(tr.Left[i], depth+1, l)
			walk(tr.Right[i], depth+1, r)
		}
		all := make([]int, len(rows))
		for i := range all {
			all[i] = i
		}
		walk(0, 0, all)
	}
	// The base is the training rows' log-odds.
	pos := 0
	for _, r := range rows {
		if r.Used {
			pos++
		}
	}
	if want := math.Log(float64(pos) / float64(len(rows)-pos)); math.Abs(b.Base-want) > 1e-12 {
		t.Errorf("base %v, want ln(%d/%d) = %v", b.Base, pos, len(rows)-pos, want)
	}
}

// BenchmarkScore100Trees is BenchmarkScore100 with an ensemble of the default 100
// trees (fitted on xorRows): the cost a version 2 model adds to a step's batch.
func BenchmarkScore100Trees(b *testing.B) {
	opts := DefaultOptions()
	opts.Trees = DefaultTreeOptions()
	m, err := Train(xorRows(4000, 1), opts)
	if err != nil {
		b.Fatal(err)
	}
	benchScore100(b, New(m, "trees"))
}
