package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
)

// TestDefaultModelIsReproducible refits the embedded model with the one command
// docs/SCORERS.md gives, on ../shared/corpus, and compares it with
// advisor/fitted/default_model.json: same features, weights, means and scales to
// 1e-9, the same training summary and cross-validated figures. After changing a
// feature, the replay or the trainer, regenerate the file with that command.
func TestDefaultModelIsReproducible(t *testing.T) {
	corpus := filepath.Join("..", "..", "..", "shared", "corpus")
	if _, err := os.Stat(corpus); err != nil {
		t.Skipf("no corpus: %v", err)
	}
	out := filepath.Join(t.TempDir(), "model.json")
	code, stdout, stderr := runCLI(t, "fit", "--db", filepath.Join(t.TempDir(), "fit.db"), "--out", out, corpus)
	if code != 0 {
		t.Fatalf("fit: exit %d\n%s\n%s", code, stdout, stderr)
	}
	got, err := fitted.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := fitted.Default()
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	for i := range want.Weights {
		if !near(got.Weights[i], want.Weights[i]) || !near(got.Mean[i], want.Mean[i]) || !near(got.Scale[i], want.Scale[i]) {
			t.Errorf("feature %s: refit weight %v mean %v scale %v; embedded %v %v %v — regenerate default_model.json (docs/SCORERS.md)",
				want.Features[i], got.Weights[i], got.Mean[i], got.Scale[i], want.Weights[i], want.Mean[i], want.Scale[i])
		}
	}
	gt, wt := got.Training, want.Training
	gt.Source, wt.Source = "", "" // the corpus's path as given, from another folder here
	if !near(got.Bias, want.Bias) || gt != wt || got.CV == nil || !near(got.CV.AUC, want.CV.AUC) {
		t.Errorf("refit bias %v, training %+v, CV %+v; embedded %v, %+v, %+v", got.Bias, got.Training, got.CV, want.Bias, want.Training, want.CV)
	}
}
