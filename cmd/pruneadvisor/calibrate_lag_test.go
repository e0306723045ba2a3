package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/tuning"
)

// TestCalibrateLagCost replays fix-port.jsonl with the fitted scorer at no lag
// and at a lag of 2 steps into one store (two settings, side by side) and reads
// calibrate's lag table: the no-lag replay first, the token-steps lost to the
// lag its token-steps less the lagged one's; the rest of the report is made of
// the no-lag replay alone.
func TestCalibrateLagCost(t *testing.T) {
	session := filepath.Join("..", "..", "testdata", "sessions", "fix-port.jsonl")
	db := filepath.Join(t.TempDir(), "lag.db")
	for _, lag := range []string{"0", "2"} {
		if code, _, stderr := runCLI(t, "replay", "--scorer", "fitted", "--budget", "4000", "--ask-lag", lag,
			"--db", db, "--progress", "none", session); code != 0 {
			t.Fatalf("replay --ask-lag %s: exit %d\n%s", lag, code, stderr)
		}
	}
	code, stdout, stderr := runCLI(t, "calibrate", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", code, stderr)
	}
	var got struct {
		Replays []string        `json:"replays"`
		LagCost []tuning.LagRow `json:"lag_cost"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.LagCost) != 2 || len(got.Replays) != 1 {
		t.Fatalf("lag table %+v over replays %v; want 2 rows, the report over 1 replay", got.LagCost, got.Replays)
	}
	none, lagged := got.LagCost[0], got.LagCost[1]
	if d := cmp.Diff([]string{"none", "2 steps"}, []string{none.Lag, lagged.Lag}); d != "" {
		t.Errorf("lags (-want +got):\n%s", d)
	}
	if none.Pruned == 0 || none.TokenSteps == 0 || none.LostTokenSteps != 0 {
		t.Errorf("no-lag row %+v: want outputs pruned, token-steps saved, none lost", none)
	}
	if lagged.LostTokenSteps != none.TokenSteps-lagged.TokenSteps {
		t.Errorf("lost %d token-steps; want %d - %d", lagged.LostTokenSteps, none.TokenSteps, lagged.TokenSteps)
	}
	if code, _, stderr := runCLI(t, "replay", "--ask-latency", "soon", "--db", db, session); code != 2 {
		t.Errorf("--ask-latency soon: exit %d, want 2\n%s", code, stderr)
	}
}

// namedScorer is a scorer that has only a name.
func namedScorer(name string) testkit.Func { return testkit.Func{Label: name} }

// TestBackgroundAsksFlag: --background-asks auto is on for a scorer that asks
// a server (Ollama, alone or fused) and off for the in-process ones, and replay's
// --ask-latency auto is "measured" exactly then.
func TestBackgroundAsksFlag(t *testing.T) {
	tests := []struct {
		flag, scorer string
		bg           bool
		latency      string
	}{
		{"auto", "ollama:qwen2.5:0.5b:p2", true, "measured"},
		{"auto", "fused(ollama:qwen2.5:0.5b:p2+fitted)", true, "measured"},
		{"auto", "fitted", false, ""},
		{"auto", "lexical", false, ""},
		{"on", "lexical", true, ""},
		{"off", "ollama:qwen2.5:0.5b:p2", false, ""},
	}
	for _, tt := range tests {
		bg, err := backgroundAsks(tt.flag, namedScorer(tt.scorer))
		if err != nil {
			t.Fatal(err)
		}
		lat, err := askLatency("auto", namedScorer(tt.scorer))
		if err != nil {
			t.Fatal(err)
		}
		if tt.flag != "auto" {
			lat = tt.latency
		}
		if d := cmp.Diff([2]any{tt.bg, tt.latency}, [2]any{bg, lat}); d != "" {
			t.Errorf("%s %s (-want +got):\n%s", tt.flag, tt.scorer, d)
		}
	}
	if _, err := backgroundAsks("sometimes", nil); err == nil {
		t.Error("--background-asks sometimes: no error")
	}
}
