package main

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

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
		sessionfiles.Missing(t, "no corpus: %v", err)
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
	if d := cmp.Diff(want.Words, got.Words); d != "" {
		t.Errorf("refit word statistics differ from the embedded ones (-embedded +refit):\n%s", d)
	}
	gt, wt := got.Training, want.Training
	gt.Source, wt.Source = "", "" // the corpus's path as given, from another folder here
	if want.Boost == nil {
		t.Error("the embedded default has no trees: regenerate it with fit's default --trees")
	}
	if d := cmp.Diff(want.Boost, got.Boost, cmpopts.EquateApprox(1e-9, 1e-12)); d != "" {
		t.Errorf("refit trees differ from the embedded ones (-embedded +refit):\n%s", d)
	}
	if !near(got.Bias, want.Bias) || gt != wt || got.CV == nil || !near(got.CV.AUC, want.CV.AUC) {
		t.Errorf("refit bias %v, training %+v, CV %+v; embedded %v, %+v, %+v", got.Bias, got.Training, got.CV, want.Bias, want.Training, want.CV)
	}
}

// TestFitDumpRows: fit --dump-rows on the real Gemini CLI sessions writes one
// rows.csv line per training row (as many as --json reports, as many used) with the
// feature table's columns, and outputs.csv with every output's uses; each row's
// label is what outputs.csv's uses say (a use at or after the ask step), the miss
// label the model is trained on what their held column adds (such a use the stub's
// digest does not hold), and its
// log_tokens column is ln(1 + s_tokens), both worked out here from the files alone.
func TestFitDumpRows(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared", "sessions", "gemini-cli")
	if _, err := os.Stat(shared); err != nil {
		sessionfiles.Missing(t, "no shared sessions: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "dump")
	code, stdout, stderr := runCLI(t, "fit", "--db", filepath.Join(t.TempDir(), "fit.db"), "--json", "--dump-rows", dir, shared)
	if code != 0 {
		t.Fatalf("fit: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Model fitted.Model `json:"model"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	read := func(name string) ([]string, []map[string]string) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		if err != nil || len(recs) < 2 {
			t.Fatalf("%s: %d records, %v", name, len(recs), err)
		}
		var rows []map[string]string
		for _, r := range recs[1:] {
			m := map[string]string{}
			for i, h := range recs[0] {
				m[h] = r[i]
			}
			rows = append(rows, m)
		}
		return recs[0], rows
	}
	head, rows := read("rows.csv")
	_, outs := read("outputs.csv")
	if d := cmp.Diff(fitted.FeatureNames(), head[4:4+len(fitted.Features)]); d != "" {
		t.Errorf("rows.csv feature columns (-want +got):\n%s", d)
	}
	// The model is trained on the miss label (a use at or after the ask that
	// its stub's digest does not hold: outputs.csv's held column) and blended
	// with one trained on rows.csv's use label.
	tr := rep.Model.Training
	if rep.Model.Blend == nil {
		t.Fatal("the fitted model has no use-label blend")
	}
	trUse := rep.Model.Blend.Training
	used, missed := 0, 0
	for i, r := range rows {
		o, err := strconv.Atoi(r["out"])
		if err != nil || o < 0 || o >= len(outs) {
			t.Fatalf("row %d: out %q of %d outputs", i, r["out"], len(outs))
		}
		step, _ := strconv.Atoi(r["ask_step"])
		want, miss := "0", false
		held := strings.Fields(outs[o]["held"])
		for k, u := range strings.Fields(outs[o]["uses"]) {
			if n, _ := strconv.Atoi(u); n >= step {
				want = "1"
				miss = miss || k >= len(held) || held[k] == "0"
			}
		}
		if miss {
			missed++
		}
		if r["used"] != want || outs[o]["session"] != r["session"] {
			t.Errorf("row %d: used %s, session %s; outputs.csv says uses %q from step %d (want %s), session %s", i, r["used"], r["session"], outs[o]["uses"], step, want, outs[o]["session"])
		}
		if r["used"] == "1" {
			used++
		}
		tok, _ := strconv.ParseFloat(r["s_tokens"], 64)
		if lt, _ := strconv.ParseFloat(r["log_tokens"], 64); math.Abs(lt-math.Log1p(tok)) > 1e-12 || tok < 200 {
			t.Errorf("row %d: log_tokens %v for %v tokens", i, lt, tok)
		}
	}
	if len(rows) != trUse.Rows || used != trUse.Positives || trUse.Rows < 50 || used == 0 || used == len(rows) {
		t.Errorf("rows.csv: %d rows, %d used; the use-label blend trained on %d rows, %d positive", len(rows), used, trUse.Rows, trUse.Positives)
	}
	if len(rows) != tr.Rows || missed != tr.Positives || missed == 0 || missed > used {
		t.Errorf("rows.csv with outputs.csv's held: %d rows, %d missed by their digest; fit trained on %d rows, %d positive", len(rows), missed, tr.Rows, tr.Positives)
	}
}

// TestModelFileWithoutWords: a model file written before word statistics existed
// still loads, and the command says which statistics the later-use evidence uses
// instead; one whose statistics are malformed is refused, naming file and field.
func TestModelFileWithoutWords(t *testing.T) {
	m, err := fitted.Default()
	if err != nil {
		t.Fatal(err)
	}
	old := *m
	old.Words = nil
	dir := t.TempDir()
	path := filepath.Join(dir, "old.json")
	if err := old.Save(path); err != nil {
		t.Fatal(err)
	}
	session := filepath.Join("..", "..", "testdata", "sessions", "fix-port.jsonl")
	code, _, stderr := runCLI(t, "advise", "--scorer", "fitted", "--model-file", path, "--db", filepath.Join(dir, "a.db"), session)
	want := "pruneadvisor: model " + path + ` has no word statistics (field "words"): later-use evidence uses the embedded default's (285 sessions of ../shared/corpus)`
	if code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant a line with %q", code, stderr, want)
	}
	// The embedded model of 3 December 2026 itself: no word statistics and none of
	// the recency features.
	v1 := filepath.Join("..", "..", "advisor", "fitted", "testdata", "model-v1-2026-12-03.json")
	code, _, stderr = runCLI(t, "advise", "--scorer", "fitted", "--model-file", v1, "--db", filepath.Join(dir, "c.db"), session)
	for _, w := range []string{
		"pruneadvisor: model " + v1 + " lacks the features log_outputs_since, log_tokens_after, never_x_log_outputs_since, log_live, no_live, log_live_undigested, no_live_undigested, log_live_plain, log_live_phrase, log_live_path, log_live_dotted, log_live_digits, log_live_code, log_live_other (written before they existed): they are weighted 0",
		"pruneadvisor: model " + v1 + ` has no word statistics (field "words")`,
	} {
		if code != 0 || !strings.Contains(stderr, w) {
			t.Errorf("old model file: exit %d, stderr:\n%s\nwant a line with %q", code, stderr, w)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	data, _ := m.Marshal()
	data = []byte(strings.Replace(string(data), `"sessions": 285`, `"sessions": -1`, 1))
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "advise", "--scorer", "fitted", "--model-file", bad, "--db", filepath.Join(dir, "b.db"), session)
	if code != 1 || !strings.Contains(stderr, bad) || !strings.Contains(stderr, "words: evidence: invalid word statistics: sessions: -1") {
		t.Errorf("malformed words: exit %d, stderr:\n%s", code, stderr)
	}
}

// fitError gives a too-few-rows error the training set's totals and the way out
// (fewer folds only where there are sessions to fold); other errors pass as they are.
func TestFitErrorSaysTheTotals(t *testing.T) {
	rows := []fitted.Row{
		{Session: "a", Used: true, Miss: true}, {Session: "a"}, {Session: "b", Used: true}, {Session: "c"},
	}
	tooFew := fmt.Errorf("fold 4: %w: 0 positive and 12 negative rows, want at least 10 of each", fitted.ErrTooFew)
	tests := []struct {
		name string
		err  error
		rows []fitted.Row
		want string
	}{
		{"three sessions", tooFew, rows, "fit: fold 4: too few rows to fit: 0 positive and 12 negative rows, want at least 10 of each; the training replay holds 4 rows from 3 sessions, 2 of them used later (1 missed by the stub's digest): every fold fits on the sessions outside it, which need at least 10 rows used later and 10 not: fit on more sessions, or with fewer --folds"},
		{"one session", tooFew, rows[:2], "fit: fold 4: too few rows to fit: 0 positive and 12 negative rows, want at least 10 of each; the training replay holds 2 rows from 1 sessions, 1 of them used later (1 missed by the stub's digest): fit on more sessions"},
		{"other error", errors.New("disk full"), rows, "disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fitError(tt.err, tt.rows)
			if err.Error() != tt.want {
				t.Errorf("fitError = %q\nwant       %q", err, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("fitError does not wrap %v", tt.err)
			}
		})
	}
}
