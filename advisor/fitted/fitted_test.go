package fitted

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/gonum/mat"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/internal/forecast"
)

// handModel weighs log_age and never_used only, on unscaled inputs.
func handModel() *Model {
	n := len(Features)
	m := &Model{Format: Format, Version: Version, Features: FeatureNames(),
		Mean: make([]float64, n), Scale: make([]float64, n), Weights: make([]float64, n), Bias: 0.5}
	for i := range m.Scale {
		m.Scale[i] = 1
	}
	m.Weights[0] = -1 // log_age
	m.Weights[2] = -2 // never_used
	m.Mean[0] = 1     // log_age centred at 1
	return m
}

// Predict by hand: age 9 -> log_age ln(10) = 2.302585; never used -> 1.
// z = 0.5 - (2.302585 - 1) - 2 = -2.802585; σ(z) = 1/(1+e^2.802585) = 0.0571846
// (python3: 1/(1+math.exp(2.802585))).
func TestPredictHand(t *testing.T) {
	m := handModel()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	got := m.Predict(&cards.Signals{Age: 9, Uses: 0})
	if math.Abs(got-0.0571846) > 1e-7 {
		t.Errorf("Predict = %.7f, want 0.0571846", got)
	}
	// Used once: never_used 0: z = 0.5 - 1.302585 = -0.802585, σ = 0.3094728.
	if got := m.Predict(&cards.Signals{Age: 9, Uses: 1, LastUseAgo: 2}); math.Abs(got-0.3094728) > 1e-7 {
		t.Errorf("Predict (used) = %.7f, want 0.3094728", got)
	}
}

func TestParseErrors(t *testing.T) {
	good, err := handModel().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("good.json", good); err != nil {
		t.Fatalf("good model: %v", err)
	}
	edit := editOf(handModel)
	tests := []parseCase{
		{"not ours", []byte(`{"format":"xgboost","version":1}`), `format: "xgboost", want "pruneadvisor.fitted"`},
		{"unknown version", edit(func(m *Model) { m.Version = 7 }), "version: 7, this program reads versions 1 and 2"},
		{"missing feature", edit(func(m *Model) { m.Features = m.Features[1:] }), "missing log_age"},
		{"extra feature", edit(func(m *Model) { m.Features = append(m.Features, "moon_phase") }), "unknown moon_phase"},
		{"reordered", edit(func(m *Model) { m.Features[0], m.Features[1] = m.Features[1], m.Features[0] }), "same names, another order"},
		{"zero scale", edit(func(m *Model) { m.Scale[1] = 0 }), "scale[1] (log_tokens)"},
		{"short weights", edit(func(m *Model) { m.Weights = m.Weights[:2] }), "weights: 2 values for"},
		{"infinite bias", []byte(strings.Replace(string(good), `"bias": 0.5`, `"bias": 1e999`, 1)), "model bad.json"},
		{"unknown field", []byte(strings.Replace(string(good), `"bias"`, `"colour": 1, "bias"`, 1)), `unknown field "colour"`},
		{"trailing data", append(append([]byte(nil), good...), []byte("{}")...), "data after the JSON object"},
		{"not JSON", []byte("weights: 1, 2"), "invalid fitted model"},
		// Word statistics (the later-use evidence's plain words) must be well formed.
		{"words not an object", []byte(strings.Replace(string(good), `"bias"`, `"words": 5, "bias"`, 1)), "words"},
		{"words without sessions", edit(func(m *Model) {
			m.Words = &evidence.Background{MinShare: 0.01, Counts: map[string]int{"daemon": 1}}
		}), "words: evidence: invalid word statistics: sessions: 0"},
		{"words with a bad word", edit(func(m *Model) {
			m.Words = &evidence.Background{Sessions: 10, MinShare: 0.01, Counts: map[string]int{"Daemon": 1}}
		}), `words: evidence: invalid word statistics: counts["Daemon"]`},
		{"words with a bad count", edit(func(m *Model) {
			m.Words = &evidence.Background{Sessions: 10, MinShare: 0.01, Counts: map[string]int{"daemon": 11}}
		}), `counts["daemon"]: 11 sessions, want 1 to 10`},
	}
	// JSON has no NaN: a model built in memory is checked by Validate.
	nan := handModel()
	nan.Weights[3] = math.NaN()
	if err := nan.Validate(); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "weights[3] (log_uses)") {
		t.Errorf("NaN weight: %v", err)
	}
	wantParseErrors(t, tests)
}

// parseCase is a model file Parse must refuse, with what its error must say.
type parseCase struct {
	name string
	data []byte
	want string
}

// editOf returns a function that marshals base() changed by f.
func editOf(base func() *Model) func(f func(m *Model)) []byte {
	return func(f func(m *Model)) []byte {
		m := base()
		f(m)
		b, _ := m.Marshal()
		return b
	}
}

// wantParseErrors checks that Parse refuses each case with ErrModel, naming the
// file (bad.json) and saying the case's want.
func wantParseErrors(t *testing.T, tests []parseCase) {
	t.Helper()
	for _, tt := range tests {
		_, err := Parse("bad.json", tt.data)
		if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "bad.json") {
			t.Errorf("%s: err %v; want ErrModel naming bad.json and %q", tt.name, err, tt.want)
		}
	}
}

// TestModelWords: a model file with word statistics carries them; one without
// (written before they existed) still loads, and BackgroundOr says it falls back.
func TestModelWords(t *testing.T) {
	old := handModel()
	data, err := old.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"words"`) {
		t.Fatal("a model without statistics writes a words field")
	}
	m, err := Parse("old.json", data)
	if err != nil {
		t.Fatalf("a model file without words: %v", err)
	}
	def := DefaultBackground()
	if bg, fell := m.BackgroundOr(def); bg != def || !fell {
		t.Errorf("BackgroundOr = %p, %v; want the fallback and true", bg, fell)
	}
	own := &evidence.Background{Sessions: 4, MinShare: 0.25, Counts: map[string]int{"daemon": 2}}
	m.Words = own
	data, _ = m.Marshal()
	back, err := Parse("new.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if bg, fell := back.BackgroundOr(def); fell || bg.Digest() != own.Digest() || !bg.Common("Daemon") {
		t.Errorf("statistics did not round-trip: %+v, fell back %v", bg, fell)
	}
}

// synthetic rows: used later with probability 0.85 when used recently, 0.1 when
// never used, else 0.4; 30 sessions.
func synthetic(n int, seed uint64) []Row {
	rng := rand.New(rand.NewPCG(seed, 3))
	rows := make([]Row, n)
	for i := range rows {
		s := cards.Signals{Step: 20 + rng.IntN(80), Age: 4 + rng.IntN(60), Tokens: 200 + rng.IntN(5000), Action: []string{"read", "shell", "search"}[rng.IntN(3)]}
		p := 0.1
		switch rng.IntN(3) {
		case 0:
			s.Uses, s.LastUseAgo, s.RecentUses = 1+rng.IntN(4), 1+rng.IntN(3), 1
			p = 0.85
		case 1:
			s.Uses, s.LastUseAgo = 1, 15+rng.IntN(30)
			p = 0.4
		}
		rows[i] = Row{Session: string(rune('a' + i%30)), Signals: s, Used: rng.Float64() < p}
	}
	return rows
}

func TestTrainLearns(t *testing.T) {
	rows := synthetic(3000, 1)
	m, err := Train(rows, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if m.Training.Rows != 3000 || m.Training.Sessions != 30 || m.Training.Positives+m.Training.Negatives != 3000 {
		t.Errorf("training summary %+v", m.Training)
	}
	// The truth: recent use 0.85, never used 0.1.
	recent := m.Predict(&cards.Signals{Step: 50, Age: 20, Tokens: 1000, Action: "read", Uses: 2, LastUseAgo: 2, RecentUses: 1})
	never := m.Predict(&cards.Signals{Step: 50, Age: 20, Tokens: 1000, Action: "read"})
	if math.Abs(recent-0.85) > 0.08 || math.Abs(never-0.1) > 0.05 {
		t.Errorf("recently used %.3f (want about 0.85), never used %.3f (want about 0.10)", recent, never)
	}
	pred, folds, err := CrossValidate(rows, 5, DefaultOptions())
	if err != nil || len(folds) != 5 {
		t.Fatalf("CrossValidate: %d folds, %v", len(folds), err)
	}
	labels := make([]bool, len(rows))
	for i, r := range rows {
		labels[i] = r.Used
	}
	// Three groups with rates 0.85, 0.4 and 0.1: a model that ranks them right is
	// well above chance, and cannot reach 1.
	if a := forecast.AUC(pred, labels); a < 0.75 || a > 0.9 {
		t.Errorf("held-out AUC %.3f, want 0.75..0.9", a)
	}
	again, _ := Train(rows, DefaultOptions())
	for i := range m.Weights {
		if m.Weights[i] != again.Weights[i] {
			t.Fatalf("Train is not deterministic: weight %d %v vs %v", i, m.Weights[i], again.Weights[i])
		}
	}
	one := append([]Row(nil), rows[:200]...)
	for i := range one {
		one[i].Session = "only"
	}
	if _, _, err := CrossValidate(one, 5, DefaultOptions()); !errors.Is(err, ErrTooFew) || !strings.Contains(err.Error(), "1 session") {
		t.Errorf("CrossValidate over one session: err %v, want ErrTooFew naming 1 session", err)
	}
	if _, err := Train(rows[:15], DefaultOptions()); !errors.Is(err, ErrTooFew) {
		t.Errorf("15 rows: err %v, want ErrTooFew", err)
	}
	drop, err := Train(rows, Options{Lambda: DefaultLambda, Drop: []string{"never_used", "log_uses"}})
	if err != nil || drop.Weights[2] != 0 || drop.Weights[3] != 0 {
		t.Errorf("dropped features have weights %v, %v (%v); want 0", drop.Weights[2], drop.Weights[3], err)
	}
	if _, err := Train(rows, Options{Drop: []string{"moon_phase"}}); err == nil {
		t.Error("dropping an unknown feature: no error")
	}
}

func TestDefaultModel(t *testing.T) {
	s, err := NewDefault()
	if err != nil {
		t.Fatalf("embedded model: %v", err)
	}
	if s.Name() != "fitted" || New(s.Model, "mine.json").Name() != "fitted:mine.json" {
		t.Errorf("names %q, %q", s.Name(), New(s.Model, "mine.json").Name())
	}
	m := s.Model
	if m.Words == nil || m.Words.Sessions != 285 || !m.Words.Common("user") {
		t.Errorf("embedded model's word statistics: %+v; want the corpus's 285 sessions", m.Words)
	}
	if bg := DefaultBackground(); bg != m.Words || !bg.Common("User") || bg.Common("zorblax") {
		t.Error("DefaultBackground is not the embedded model's statistics (User common, zorblax not)")
	}
	if m.Training.Sessions < 200 || m.CV == nil || m.CV.AUC < 0.7 {
		t.Errorf("embedded model: %d sessions, CV %+v; want the corpus's 220 and its figures", m.Training.Sessions, m.CV)
	}
	// A card never used, 60 steps old scores low; one used 2 steps ago high.
	old := m.Predict(&cards.Signals{Step: 80, Age: 60, Tokens: 3000, Action: "read", PathIdle: 60, PathReads: 1, Runs: 1})
	hot := m.Predict(&cards.Signals{Step: 80, Age: 10, Tokens: 3000, Action: "read", Uses: 3, LastUseAgo: 2, RecentUses: 3, PathIdle: 2, PathReads: 2, Runs: 1})
	if old >= hot || old > 0.2 || hot < 2*old {
		t.Errorf("old unused %.3f, recently used %.3f", old, hot)
	}
}

// A card's score depends on that card alone, not on the batch it comes in.
func TestScoreBatchIndependent(t *testing.T) {
	s, _ := NewDefault()
	a := cards.Card{ID: "a", Age: 7, Step: 30, Tokens: 800, Action: "read", Uses: 1, LastUseAgo: 5}
	b := cards.Card{ID: "b", Age: 40, Step: 30, Tokens: 9000, Action: "shell"}
	one, _ := s.Score(context.Background(), cards.Batch{Cards: []cards.Card{a}})
	two, _ := s.Score(context.Background(), cards.Batch{Cards: []cards.Card{b, a}})
	if !one[0].OK || one[0] != two[1] {
		t.Errorf("alone %+v, in a batch %+v", one[0], two[1])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Score(ctx, cards.Batch{Cards: []cards.Card{a}}); err == nil {
		t.Error("cancelled context: no error")
	}
	k, _ := KeepScorer{}.Score(context.Background(), cards.Batch{Cards: []cards.Card{a, b}})
	if len(k) != 2 || k[0].Keep != 1 || !k[1].OK {
		t.Errorf("keep scorer %+v", k)
	}
}

func TestFold(t *testing.T) {
	seen := map[int]bool{}
	for i := 0; i < 200; i++ {
		name := string(rune('A'+i%26)) + string(rune('a'+i/26))
		f := Fold(name, 5)
		if f != Fold(name, 5) || f < 0 || f >= 5 {
			t.Fatalf("Fold(%q) = %d, not stable in [0,5)", name, f)
		}
		seen[f] = true
	}
	if len(seen) != 5 {
		t.Errorf("200 sessions land in %d of 5 folds", len(seen))
	}
}

// BenchmarkScore100 scores a batch of 100 cards with the embedded model (goal:
// <= 1 ms, docs/PERFORMANCE.md).
//
//	go test ./advisor/fitted -run '^$' -bench BenchmarkScore100
func BenchmarkScore100(b *testing.B) {
	s, _ := NewDefault()
	benchScore100(b, s)
}

// benchScore100 times s scoring a batch of 100 cards of ages 4 to 103.
func benchScore100(b *testing.B, s *Scorer) {
	batch := cards.Batch{Cards: make([]cards.Card, 100)}
	for i := range batch.Cards {
		batch.Cards[i] = cards.Card{ID: "c", Age: 4 + i, Step: 120, Tokens: 300 + 40*i, Action: "read", Uses: i % 3, LastUseAgo: i % 7, PathIdle: i % 9, Runs: 1}
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Score(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTrainMatchesNewton checks Train (gonum's L-BFGS) against the same penalised
// loss minimised another way: Newton-Raphson written out here, each step solving
// (XᵀWX/m + λI') Δ = -(Xᵀ(p - y)/m + λw') with a Cholesky factorisation (I' and w'
// leave the bias unpenalised), from zero, until the step is below 1e-12. The
// two optimisers share only the standardised design matrix.
func TestTrainMatchesNewton(t *testing.T) {
	rows := synthetic(2000, 7)
	m, err := Train(rows, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	X, y := design(rows)
	n := len(Features)
	standardise(X, n)
	k := n + 1 // weights and the bias
	w := make([]float64, k)
	xi := func(i, j int) float64 {
		if j == n {
			return 1
		}
		return X[i*n+j]
	}
	for iter := 0; iter < 50; iter++ {
		H := mat.NewSymDense(k, nil)
		g := mat.NewVecDense(k, nil)
		for i := range y {
			z := 0.0
			for j := 0; j < k; j++ {
				z += w[j] * xi(i, j)
			}
			p := 1 / (1 + math.Exp(-z))
			for a := 0; a < k; a++ {
				g.SetVec(a, g.AtVec(a)+(p-y[i])*xi(i, a)/float64(len(y)))
				for b := a; b < k; b++ {
					H.SetSym(a, b, H.At(a, b)+p*(1-p)*xi(i, a)*xi(i, b)/float64(len(y)))
				}
			}
		}
		for j := 0; j < n; j++ {
			H.SetSym(j, j, H.At(j, j)+DefaultLambda)
			g.SetVec(j, g.AtVec(j)+DefaultLambda*w[j])
		}
		var ch mat.Cholesky
		if !ch.Factorize(H) {
			t.Fatal("Hessian not positive definite")
		}
		var step mat.VecDense
		if err := ch.SolveVecTo(&step, g); err != nil {
			t.Fatal(err)
		}
		for j := range w {
			w[j] -= step.AtVec(j)
		}
		if mat.Norm(&step, 2) < 1e-12 {
			break
		}
	}
	for j := 0; j < n; j++ {
		if math.Abs(m.Weights[j]-w[j]) > 1e-5 {
			t.Errorf("weight %d (%s): L-BFGS %.6f, Newton %.6f", j, Features[j].Name, m.Weights[j], w[j])
		}
	}
	if math.Abs(m.Bias-w[n]) > 1e-5 {
		t.Errorf("bias: L-BFGS %.6f, Newton %.6f", m.Bias, w[n])
	}
}

// TestCrossValidateSkipsThinFold: with all positives in one session, the fold
// that holds that session out trains on no positive row; it is left out (its rows
// unscored, NaN) instead of failing the whole cross-validation, and the other
// folds are fitted. With no positive row at all, no fold fits: ErrTooFew.
func TestCrossValidateSkipsThinFold(t *testing.T) {
	var rows []Row
	rng := rand.New(rand.NewPCG(7, 9))
	sessions := []string{"s-pos", "s-neg-1", "s-neg-2", "s-neg-4"} // folds 1, 3, 2, 0 (FNV-1a mod 4)
	for _, s := range sessions {
		for i := 0; i < 60; i++ {
			used := s == "s-pos" && i%2 == 0
			rows = append(rows, Row{Session: s, Used: used, Signals: cards.Signals{Step: 10 + i, Age: 1 + rng.IntN(40), Tokens: 300 + rng.IntN(900), Action: "read"}})
		}
	}
	folds := 4
	thin := Fold("s-pos", folds)
	for _, s := range sessions[1:] {
		if Fold(s, folds) == thin {
			t.Fatalf("session %s shares the positive session's fold %d", s, thin)
		}
	}
	pred, fits, err := CrossValidate(rows, folds, DefaultOptions())
	if err != nil {
		t.Fatalf("CrossValidate: %v", err)
	}
	for i, r := range rows {
		if isNaN := math.IsNaN(pred[i]); isNaN != (r.Session == "s-pos") {
			t.Fatalf("row %d of %s: prediction %v", i, r.Session, pred[i])
		}
	}
	if len(fits) != 0 { // the other folds' held-out rows are all negative: AUC undefined
		t.Errorf("fold figures %+v, want none", fits)
	}
	for i := range rows {
		rows[i].Used = false
	}
	if _, _, err := CrossValidate(rows, folds, DefaultOptions()); !errors.Is(err, ErrTooFew) {
		t.Errorf("no positive row: err %v, want ErrTooFew", err)
	}
}

// TestOldModelFile loads the embedded model of 3 December 2026 (before word
// statistics and the recency features existed): it loads, lacks the three
// features, which get weight 0, so it predicts what its own weights say
// (computed here from the file's arrays), and it has no word statistics.
func TestOldModelFile(t *testing.T) {
	path := filepath.Join("testdata", "model-v1-2026-12-03.json")
	m, err := Load(path)
	if err != nil {
		t.Fatalf("old model: %v", err)
	}
	if d := cmp.Diff([]string{"log_outputs_since", "log_tokens_after", "never_x_log_outputs_since", "log_live", "no_live", "log_live_undigested", "no_live_undigested",
		"log_live_plain", "log_live_phrase", "log_live_path", "log_live_dotted", "log_live_digits", "log_live_code", "log_live_other"}, m.Filled()); d != "" {
		t.Errorf("filled (-want +got):\n%s", d)
	}
	if m.Words != nil {
		t.Error("the old file has word statistics")
	}
	var raw struct {
		Features             []string
		Mean, Scale, Weights []float64
		Bias                 float64
	}
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	s := cards.Signals{Step: 40, Age: 12, Tokens: 1500, Action: "read", Uses: 1, LastUseAgo: 5, PathIdle: 5, PathReads: 1, Runs: 1, OutputsSince: 9, TokensAfter: 12000}
	z := raw.Bias
	for i, name := range raw.Features {
		for _, f := range Features {
			if f.Name == name {
				z += raw.Weights[i] * (f.f(&s) - raw.Mean[i]) / raw.Scale[i]
			}
		}
	}
	if got, want := m.Predict(&s), 1/(1+math.Exp(-z)); math.Abs(got-want) > 1e-12 {
		t.Errorf("Predict = %v, want %v (the file's own weights)", got, want)
	}
}
