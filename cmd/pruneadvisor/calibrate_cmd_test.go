package main

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// runCLI runs the command line and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// handStore writes the small store of TestCalibrateHandStore: one session of 10
// steps (context 1,000 tokens at every step) whose four outputs, all produced at
// step 1 and candidates from step 5, were each asked once at step 5 by the lexical
// scorer:
//
//	output  tokens  keep  used at
//	o1      1,000   0.10  -
//	o2      2,000   0.30  8
//	o3        500   0.50  -
//	o4        400   0.70  6
//
// With ruleDead, a rule also makes o4 dead at step 5.
func handStore(t *testing.T, ruleDead bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hand.db")
	db, err := storage.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := advisor.DefaultConfig()
	cfg.SizeExponent = 0  // the hand-set scores against the cutoff itself
	cfg.SizeCapTokens = 0 // written back as the replay's, not the default 3,000
	st := replay.Settings{Version: replay.Version, Config: cfg, Scorer: "lexical"}
	rec := &replay.Record{Path: "hand.json", Name: "hand.json", ContentHash: "hand", Settings: st, SettingsHash: st.Hash(), Steps: 10}
	rec.ID = replay.SessionID(rec.ContentHash, rec.SettingsHash)
	outs := []struct {
		key    string
		tokens int
		keep   float64
		use    int
	}{{"o1", 1000, 0.10, 0}, {"o2", 2000, 0.30, 8}, {"o3", 500, 0.50, 0}, {"o4", 400, 0.70, 6}}
	for _, o := range outs {
		f := replay.OutputFacts{Key: o.key, Tokens: o.tokens, Step: 1, CandidateFrom: 5, EndStep: 10}
		if ruleDead && o.key == "o4" {
			f.RuleDeadAt, f.PendingAt = 5, 5
		}
		rec.Outputs = append(rec.Outputs, f)
		rec.Asks = append(rec.Asks, advisor.AskRecord{SessionID: rec.ID, OutputKey: o.key, Step: 5, Scorer: "lexical", Score: o.keep, OK: true})
		if o.use > 0 {
			rec.Evidence = append(rec.Evidence, evidence.Use{Key: o.key, Step: o.use, Kind: evidence.UseName, Proof: "name", Weight: 1})
		}
	}
	for s := 1; s <= 10; s++ {
		rec.StepFacts = append(rec.StepFacts, replay.StepFacts{Step: s, ContextTokens: 1000, AppliedTokens: 1000})
	}
	if err := db.CommitReplay(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCalibrateHandStore checks the cutoff chosen on handStore against the answer
// worked out by hand. An output pruned at step 5 saves tokens x (first use at or
// after 5, else 11) - 5 token-steps, and misses when it has such a use:
//
//	cutoffs        pruned        misses  miss rate  token-steps
//	0.00-0.10      -             0       0          0
//	0.15-0.30      o1            0       0          6,000
//	0.35-0.50      o1 o2         1       1/2        6,000 + 2,000x3 = 12,000
//	0.55-0.70      o1 o2 o3      1       1/3        12,000 + 500x6 = 15,000
//	0.75-0.95      all           2       1/2        15,000 + 400x1 = 15,400
//
// Target 0.02: the best token-steps with no miss is 6,000, first at 0.15 (on a tie
// the lower cutoff wins). Target 0.40: 15,000 at 0.55. Target 0.60: 15,400 at
// 0.75. The oracle prunes o1 and o3 at 5, o2 at 9 and o4 at 7: 6,000 + 3,000 +
// 2,000x2 + 400x4 = 14,600 token-steps, no miss.
func TestCalibrateHandStore(t *testing.T) {
	path := handStore(t, false)
	for _, tt := range []struct {
		target string
		cutoff float64
		ts     int64
	}{{"0.02", 0.15, 6000}, {"0.40", 0.55, 15000}, {"0.60", 0.75, 15400}} {
		code, stdout, stderr := runCLI(t, "calibrate", "--db", path, "--json", "--budget", "100000", "--target-miss", tt.target)
		if code != 0 {
			t.Fatalf("calibrate --target-miss %s: exit %d: %s", tt.target, code, stderr)
		}
		var got calibrateJSON
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Report.Scorers) != 1 || len(got.Report.Budgets) != 1 {
			t.Fatalf("%d scorers at %d budgets, want the stored lexical only at one", len(got.Report.Scorers), len(got.Report.Budgets))
		}
		rec := got.Report.Budgets[0].Scorers[0].Recommendation
		if rec.None || rec.Cutoff != tt.cutoff || rec.Result.TokenSteps != tt.ts {
			t.Errorf("target %s: recommended %+v, want cutoff %.2f saving %d token-steps", tt.target, rec, tt.cutoff, tt.ts)
		}
	}
	code, stdout, _ := runCLI(t, "calibrate", "--db", path, "--json", "--budget", "100000")
	if code != 0 {
		t.Fatal(stdout)
	}
	var got calibrateJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Cutoff         float64
		Pruned, Misses int
		TokenSteps     int64
	}
	var sweep []row
	for _, r := range got.Report.Budgets[0].Scorers[0].Sweep {
		sweep = append(sweep, row{r.Cutoff, r.Pruned, r.Misses, r.TokenSteps})
	}
	var want []row
	for i := range 20 {
		c := float64(i) / 20
		switch {
		case c <= 0.10:
			want = append(want, row{c, 0, 0, 0})
		case c <= 0.30:
			want = append(want, row{c, 1, 0, 6000})
		case c <= 0.50:
			want = append(want, row{c, 2, 1, 12000})
		case c <= 0.70:
			want = append(want, row{c, 3, 1, 15000})
		default:
			want = append(want, row{c, 4, 2, 15400})
		}
	}
	if diff := cmp.Diff(want, sweep); diff != "" {
		t.Errorf("sweep (-want +got):\n%s", diff)
	}
	bl := got.Report.Budgets[0].Baselines
	oracle := bl[len(bl)-1]
	if oracle.Name != "oracle" || oracle.TokenSteps != 14600 || oracle.Misses != 0 || oracle.Pruned != 4 {
		t.Errorf("oracle = %+v, want 4 pruned, 14,600 token-steps, no miss", oracle)
	}

	// --write-config keeps the file's other fields.
	cfgPath := filepath.Join(t.TempDir(), "advisor.json")
	if err := os.WriteFile(cfgPath, []byte(`{"budget": 50000, "schedule": "1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "calibrate", "--db", path, "--write-config", cfgPath); code != 0 {
		t.Fatalf("write-config: exit %d: %s", code, stderr)
	}
	cfg, err := advisor.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cutoff != 0.15 || cfg.Budget != 50000 || cfg.Schedule != "1" {
		t.Errorf("written config: cutoff %v, budget %d, schedule %q; want 0.15, 50000, \"1\"", cfg.Cutoff, cfg.Budget, cfg.Schedule)
	}
	if cfg.SizeExponent != 0 {
		t.Errorf("written config: size_exponent %v; want the replay's 0, under which the cutoff was chosen (not the default %v)", cfg.SizeExponent, advisor.DefaultConfig().SizeExponent)
	}
	if cfg.SizeCapTokens != 0 {
		t.Errorf("written config: size_cap_tokens %d; want the replay's 0 (not the default %d)", cfg.SizeCapTokens, advisor.DefaultConfig().SizeCapTokens)
	}
	// Calibrated at another window, the file gets that window too (the cutoff was
	// priced there); a budget over it goes back to the window's fraction, one under
	// it stays.
	for _, tt := range []struct {
		file   string
		budget int
	}{{`{"budget": 50000}`, 50000}, {`{"budget": 100000}`, 0}} {
		if err := os.WriteFile(cfgPath, []byte(tt.file), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, "calibrate", "--db", path, "--window", "64000", "--write-config", cfgPath)
		if code != 0 || !strings.Contains(stdout, "and context_window 64000 to "+cfgPath) {
			t.Fatalf("write-config at --window 64000: exit %d: %s\n%s", code, stderr, stdout)
		}
		cfg, err := advisor.LoadConfig(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ContextWindow != 64000 || cfg.Budget != tt.budget {
			t.Errorf("%s written at --window 64000: context_window %d, budget %d; want 64000, %d", tt.file, cfg.ContextWindow, cfg.Budget, tt.budget)
		}
	}
	if code, _, stderr := runCLI(t, "calibrate", "--db", path, "--write-config", filepath.Join(t.TempDir(), "x", "c.json")); code == 0 || !strings.Contains(stderr, "no such file") {
		t.Errorf("write-config into a missing folder: exit %d, %q; want the file system's error", code, stderr)
	}

	// With o4 dead by a rule at step 5 (and used at 6), every cutoff prunes it and
	// misses: the lowest miss rate is 1/2 (o1 and o4, cutoffs 0.15-0.30; cutoff 0
	// prunes o4 alone, 1/1). Nothing qualifies at 0.02 and nothing is written.
	path = handStore(t, true)
	code, stdout, stderr := runCLI(t, "calibrate", "--db", path, "--write-config", cfgPath)
	if code != 1 || !strings.Contains(stderr, "no cutoff of scorer lexical meets --target-miss 0.020") || !strings.Contains(stdout, "(lowest 0.500)") {
		t.Errorf("no qualifying cutoff: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if cfg2, err := advisor.LoadConfig(cfgPath); err != nil || cfg2.Cutoff != 0.15 {
		t.Errorf("config after a failed write: cutoff %v, %v; want the earlier 0.15", cfg2.Cutoff, err)
	}
}

// TestCalibrateBaselines replays real sessions (the Claude Code and mini-swe-agent
// folders of ../shared/sessions) with the lexical scorer and checks the baseline
// properties end to end: keep-all prunes, saves and misses nothing; the oracle
// misses nothing and no pruner that misses nothing (any baseline, any cutoff, any
// random draw) saves more token-steps; random prunes as many outputs as the scorer
// at each cutoff.
func TestCalibrateBaselines(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared", "sessions")
	dirs := []string{filepath.Join(shared, "claude-code"), filepath.Join(shared, "mini-swe-agent")}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			sessionfiles.Missing(t, "real sessions not available: %v", err)
		}
	}
	db := filepath.Join(t.TempDir(), "r.db")
	args := append([]string{"replay", "--scorer", "lexical", "--db", db, "--progress", "none"}, dirs...)
	if code, stdout, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr := runCLI(t, "calibrate", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, stderr)
	}
	var got calibrateJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	rep := got.Report
	if rep.Sessions != 12 || rep.Outputs < 500 {
		t.Fatalf("report over %d sessions, %d outputs; want the 12 sessions of both folders", rep.Sessions, rep.Outputs)
	}
	br := rep.Budgets[0]
	byName := map[string]calibrate.Result{}
	for _, b := range br.Baselines {
		byName[b.Name] = b
	}
	keep, oracle := byName["keep-all"], byName["oracle"]
	if keep.Pruned != 0 || keep.TokenSteps != 0 || keep.Misses != 0 || keep.Applied.NetUSD != 0 || keep.Applied.Rewrites != 0 {
		t.Errorf("keep-all = %+v, want nothing pruned, saved, missed or rewritten", keep)
	}
	if oracle.Misses != 0 || oracle.TokenSteps <= 0 || oracle.Pruned == 0 {
		t.Errorf("oracle = %+v, want savings with no miss", oracle)
	}
	all := append([]calibrate.Result(nil), br.Baselines...)
	for _, s := range br.Scorers {
		all = append(all, s.Sweep...)
		all = append(all, s.Random...)
		if len(s.Random) != len(s.Sweep) {
			t.Fatalf("%d random results for %d cutoffs", len(s.Random), len(s.Sweep))
		}
		for i, r := range s.Random {
			if r.Pruned != s.Sweep[i].Pruned || r.PruneRate != s.Sweep[i].PruneRate || r.Cutoff != s.Sweep[i].Cutoff {
				t.Errorf("cutoff %.2f: random prunes %d (rate %.3f), the scorer %d (%.3f)", s.Sweep[i].Cutoff, r.Pruned, r.PruneRate, s.Sweep[i].Pruned, s.Sweep[i].PruneRate)
			}
		}
	}
	zero := 0
	for _, r := range all {
		if r.Misses == 0 {
			zero++
			if r.TokenSteps > oracle.TokenSteps {
				t.Errorf("%s (cutoff %.2f) misses nothing and saves %d token-steps, more than the oracle's %d", r.Name, r.Cutoff, r.TokenSteps, oracle.TokenSteps)
			}
		}
		if r.TokenSteps > r.TotalTokenSteps || r.TotalTokenSteps != keep.TotalTokenSteps {
			t.Errorf("%s: %d of %d token-steps saved (keep-all's total %d)", r.Name, r.TokenSteps, r.TotalTokenSteps, keep.TotalTokenSteps)
		}
	}
	if zero < 2 {
		t.Errorf("only %d results miss nothing; the bound is checked on keep-all and the oracle at least", zero)
	}
}

// calibrate --write-config warns when the cutoff it writes is the sweep's lowest (the
// config then never prunes by score), and only then.
func TestLowestCutoffWarning(t *testing.T) {
	sweep := []calibrate.Result{{Cutoff: 0, MissRate: 0}, {Cutoff: 0.05, MissRate: 0.04}, {Cutoff: 0.10, MissRate: 0.08}}
	tests := []struct {
		name string
		rec  calibrate.Recommendation
		want string
	}{
		{"lowest", calibrate.Recommendation{Cutoff: 0, TargetMiss: 0.02},
			"cutoff 0.00 for scorer fitted is the lowest swept: no output scores under it, so the config written prunes nothing by score (1 of 3 cutoffs meet --target-miss 0.020; replaying more sessions or a higher --target-miss may give one that does)"},
		{"higher", calibrate.Recommendation{Cutoff: 0.05, TargetMiss: 0.05}, ""},
		{"none", calibrate.Recommendation{None: true, Cutoff: -1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lowestCutoffWarning(&calibrate.ScorerSweep{Scorer: "fitted", Sweep: sweep, Recommendation: tt.rec})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("warning (-want +got):\n%s", diff)
			}
		})
	}
}
