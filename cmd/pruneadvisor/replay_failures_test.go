package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReplayScorerFailures (issue 12.2): `replay --scorer ollama` with the server
// gone counts every ask as failed by kind in the JSON summary, warns once (not
// once per session), exits 3 because no ask of a session got a score, and leaves
// the sessions not done; the next run, with the server answering, replays them
// and exits 0; the one after finds them stored. Before, the run said failed 0 and
// exited 0, and the next found nothing to replay.
func TestReplayScorerFailures(t *testing.T) {
	t.Parallel()
	var files []string
	for _, f := range []string{"replay/port.json", "sessions/fix-port.jsonl", "codex/rollout-2025-11-04T10-12-33-019a4e2c-7d1b-7c30-9f4e-2b8d6c1a9e57.jsonl"} {
		abs, err := filepath.Abs(filepath.Join("..", "..", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, abs)
	}
	db := filepath.Join(t.TempDir(), "r.db")
	replayArgs := func(extra ...string) []string {
		args := append([]string{"replay", "--scorer", "ollama", "--scorer-timeout", scorerTimeout.String(), "--db", db, "--progress", "log"}, extra...)
		return append(args, files...)
	}

	p := startPA(t, "", testEnv(t, "OLLAMA_HOST="+closedPort(t)), replayArgs("--json")...)
	code := p.wait(lightBound)
	var sum struct {
		Replayed       int            `json:"replayed"`
		Asks           int            `json:"asks"`
		FailedAsks     int            `json:"failed_asks"`
		ScorerFailures map[string]int `json:"scorer_failures"`
		Incomplete     []string       `json:"incomplete"`
		AllAsksFailed  []string       `json:"all_asks_failed"`
		Sessions       []struct {
			Asks       int `json:"asks"`
			FailedAsks int `json:"failed_asks"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(p.stdout.String()), &sum); err != nil {
		t.Fatalf("replay --json: %v\n%s", err, cutOut(p.output(), 3000))
	}
	stderr := p.stderr.String()
	if code != exitNoScores {
		t.Errorf("exit %d, want %d (no ask of a session got a score):\n%s", code, exitNoScores, cutOut(stderr, 2000))
	}
	if sum.Replayed != 3 || sum.Asks == 0 || sum.FailedAsks != sum.Asks {
		t.Errorf("replayed %d, %d of %d asks failed; want 3 sessions, every ask failed", sum.Replayed, sum.FailedAsks, sum.Asks)
	}
	if diff := cmp.Diff(map[string]int{"unreachable": sum.Asks}, sum.ScorerFailures); diff != "" {
		t.Errorf("scorer_failures (-want +got):\n%s", diff)
	}
	if len(sum.Incomplete) != 3 || len(sum.AllAsksFailed) != 3 {
		t.Errorf("incomplete %v, all_asks_failed %v; want the 3 sessions in both", sum.Incomplete, sum.AllAsksFailed)
	}
	for _, s := range sum.Sessions {
		if s.FailedAsks != s.Asks {
			t.Errorf("session: %d of %d asks failed; want all", s.FailedAsks, s.Asks)
		}
	}
	if n := strings.Count(stderr, "scorer failed; nothing pruned on its account"); n != 1 {
		t.Errorf("the failure is warned %d times over 3 sessions; want once:\n%s", n, cutOut(stderr, 3000))
	}
	for _, want := range []string{"kind=unreachable", "connection refused", "no ask of 3 of 3 sessions got a score (scorer failures: unreachable "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, cutOut(stderr, 3000))
		}
	}

	_, host := newFakeOllama(t, "ok")
	code, out := runPA(t, lightBound, testEnv(t, "OLLAMA_HOST="+host), replayArgs()...)
	if code != 0 || !regexp.MustCompile(`replayed +3 sessions`).MatchString(out) ||
		!regexp.MustCompile(`scorer failures +0 of \d+ asks`).MatchString(out) || strings.Contains(out, "not marked done") {
		t.Errorf("second run, server back: exit %d:\n%s\nwant exit 0, the 3 sessions replayed, no failures", code, cutOut(out, 3000))
	}
	code, out = runPA(t, lightBound, testEnv(t, "OLLAMA_HOST="+host), replayArgs()...)
	if code != 0 || !regexp.MustCompile(`replayed +0 sessions`).MatchString(out) || !regexp.MustCompile(`already stored +3`).MatchString(out) {
		t.Errorf("third run: exit %d:\n%s\nwant the 3 sessions already stored", code, cutOut(out, 3000))
	}
}
