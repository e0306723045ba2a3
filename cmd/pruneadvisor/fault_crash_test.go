package main

// Crashes: replay killed with SIGKILL at random points resumes to the database an
// uninterrupted run makes, and serve killed in the middle of requests leaves no stub
// without its original.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// replayRows are the stored rows a replay's result is made of, without ids,
// timestamps and latencies, each table sorted.
var replayRows = map[string]string{
	"sessions":        `SELECT id, format, name, content_hash, settings_hash, path FROM sessions ORDER BY 1`,
	"asks":            `SELECT session_id, output_key, step, card_hash, scorer, score, ok, fail_kind, tokens FROM asks ORDER BY 1, 2, 3, 4`,
	"decisions":       `SELECT session_id, output_key, step, decision, reason, score, superseder, tokens FROM decisions ORDER BY 1, 2, 3, 4, 5`,
	"evidence":        `SELECT session_id, output_key, use_step, proof, weight FROM evidence ORDER BY 1, 2, 3, 4`,
	"replay_outputs":  `SELECT * FROM replay_outputs ORDER BY session_id, seq`,
	"replay_steps":    `SELECT * FROM replay_steps ORDER BY session_id, step`,
	"replay_runs":     `SELECT session_id, content_hash, settings_hash, scorer, schedule, status FROM replay_runs ORDER BY 1`,
	"replay_settings": `SELECT hash, scorer, settings FROM replay_settings ORDER BY 1`,
	"stubs":           `SELECT recall_id, session_id, output_key, stub, step, reason, score FROM stubs ORDER BY 1`,
	"outputs":         `SELECT recall_id, session_id, output_key, hash, tokens, step FROM outputs ORDER BY 1`,
	"integrity":       `PRAGMA integrity_check`,
}

func dumpReplay(t *testing.T, db string) map[string][][]string {
	t.Helper()
	out := map[string][][]string{}
	for table, q := range replayRows {
		out[table] = querySQL(t, db, q)
	}
	return out
}

// crashSessions writes n variants of fix-port.jsonl (each with its own first prompt,
// so its own content) into a new folder.
func crashSessions(t *testing.T, n int) string {
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "sessions", "fix-port.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sessions")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		data := strings.Replace(string(src), "and add a test.", fmt.Sprintf("and add a test (variant %d).", i), 1)
		writeFile(t, filepath.Join(dir, fmt.Sprintf("s%02d.jsonl", i)), []byte(data))
	}
	return dir
}

// TestReplayKilledResumes kills replay with SIGKILL at 10 random points, runs the same
// command again, and compares every stored row that matters with an uninterrupted
// run's. A kill point is "after the k-th session was committed" (replay logs each
// commit) plus up to 20 ms, with k drawn from a logged seed (set CRASH_SEED to
// repeat a run), so kills land mid-run however fast the machine is.
func TestReplayKilledResumes(t *testing.T) {
	const sessions = 24
	dir := crashSessions(t, sessions)
	env := testEnv(t)
	replay := func(db string) *proc {
		return startPA(t, "", env, "replay", dir, "--db", db, "--scorer", "lexical", "--progress", "log")
	}
	refDB := filepath.Join(t.TempDir(), "ref.db")
	if code := replay(refDB).wait(heavyBound); code != 0 {
		t.Fatalf("uninterrupted replay: exit %d", code)
	}
	ref := dumpReplay(t, refDB)
	if n := len(ref["sessions"]); n != sessions {
		t.Fatalf("the uninterrupted replay stored %d sessions; want %d", n, sessions)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CRASH_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("kill points from seed %d (CRASH_SEED)", seed)
	rnd := rand.New(rand.NewPCG(seed, 6))
	killedMidway := 0
	for trial := range 10 {
		db := filepath.Join(t.TempDir(), fmt.Sprintf("trial%d.db", trial))
		k := rnd.IntN(sessions) // 0: after planning, before the first commit
		mark := fmt.Sprintf("[%d/%d]", k, sessions)
		if k == 0 {
			mark = "sessions to replay"
		}
		extra := time.Duration(rnd.Int64N(int64(20 * time.Millisecond)))
		p := replay(db)
		if !p.waitFor(mark, heavyBound) {
			t.Fatalf("trial %d: replay never logged %q:\n%s", trial, mark, cutOut(p.output(), 3000))
		}
		time.Sleep(extra)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		code := p.wait(heavyBound)
		stored := len(querySQL(t, db, `SELECT id FROM sessions`))
		if code == 128+int(syscall.SIGKILL) && stored < sessions {
			killedMidway++
		}
		if stored < k {
			t.Errorf("trial %d: %d sessions stored after replay logged %d commits", trial, stored, k)
		}
		if code := replay(db).wait(heavyBound); code != 0 {
			t.Fatalf("trial %d: the resumed replay exited %d", trial, code)
		}
		if d := cmp.Diff(ref, dumpReplay(t, db)); d != "" {
			t.Errorf("trial %d (killed %s after commit %d, exit %d, %d sessions stored): resumed database differs (-uninterrupted +resumed):\n%s",
				trial, extra.Round(time.Millisecond), k, code, stored, cutOut(d, 4000))
		}
		t.Logf("trial %d: killed %s after commit %d (exit %d) with %d of %d sessions stored; resumed to the same rows",
			trial, extra.Round(time.Millisecond), k, code, stored, sessions)
	}
	if killedMidway < 5 {
		t.Errorf("only %d of 10 kills came before the replay finished (seed %d)", killedMidway, seed)
	}
}

// TestServeKilledMidRequest kills serve with SIGKILL while 16 clients advise
// sessions that prune, three times over one database, restarting it in between. After
// each kill every stubs row must have its outputs row and blob, every blob must match
// its hash, and a restarted serve must recall every stub byte for byte.
func TestServeKilledMidRequest(t *testing.T) {
	t.Parallel() // mostly waiting (timeouts, busy locks, processes): overlap with the rest
	db := filepath.Join(t.TempDir(), "s.db")
	up := upstream(t)
	env := testEnv(t)
	msgs := faultMessages()
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	seen := 0
	for round := range 3 {
		srv := startServe(t, env, "--db", db, "--scorer", "lexical", "--price-forced=false", "--openai-upstream", up.URL, "--anthropic-upstream", up.URL)
		var wg sync.WaitGroup
		var answered atomic.Int64
		stop := make(chan struct{})
		for c := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					body := fmt.Sprintf(`{"session_id":"r%d-c%d-n%d","format":"openai","budget":1000,"messages":%s}`, round, c, n, msgs)
					if code, _ := srv.post(t, "/v1/advise", []byte(body)); code == 0 {
						return // serve is gone
					}
					answered.Add(1)
				}
			}()
		}
		// Kill once every client has had an answer (so stubs are being written),
		// at a random moment of the next 200 ms.
		for end := time.Now().Add(30 * time.Second); answered.Load() < 16 && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rnd.Int64N(int64(200 * time.Millisecond))))
		_ = srv.cmd.Process.Signal(syscall.SIGKILL)
		if code := srv.wait(10 * time.Second); code != 128+int(syscall.SIGKILL) {
			t.Fatalf("round %d: serve ended with %d, not by SIGKILL", round, code)
		}
		close(stop)
		wg.Wait()

		orphans := querySQL(t, db, `SELECT s.recall_id FROM stubs s LEFT JOIN outputs o
			ON o.recall_id = s.recall_id AND o.session_id = s.session_id AND o.output_key = s.output_key
			WHERE o.recall_id IS NULL`)
		if len(orphans) > 0 {
			t.Errorf("round %d: %d stubs without their original: %v", round, len(orphans), orphans)
		}
		if rows := querySQL(t, db, `SELECT o.recall_id FROM outputs o LEFT JOIN blobs b ON b.hash = o.hash WHERE b.hash IS NULL`); len(rows) > 0 {
			t.Errorf("round %d: %d outputs without their text: %v", round, len(rows), rows)
		}
		for _, r := range querySQL(t, db, `SELECT hash, text FROM blobs`) {
			if h := sha256.Sum256([]byte(r[1])); hex.EncodeToString(h[:]) != r[0] {
				t.Errorf("round %d: blob %s does not match its text", round, r[0])
			}
		}
		if got := querySQL(t, db, `PRAGMA integrity_check`); len(got) != 1 || got[0][0] != "ok" {
			t.Errorf("round %d: integrity_check %v", round, got)
		}
		if got := querySQL(t, db, `PRAGMA foreign_key_check`); len(got) != 0 {
			t.Errorf("round %d: foreign_key_check %v", round, got)
		}
		stubs := querySQL(t, db, `SELECT s.recall_id, o.hash FROM stubs s JOIN outputs o ON o.recall_id = s.recall_id`)
		t.Logf("round %d: killed with %d stubs stored", round, len(stubs))
		if len(stubs) <= seen {
			t.Errorf("round %d: no stub was applied before the kill (%d stored, %d before)", round, len(stubs), seen)
		}
		seen = len(stubs)
		// Every stub is recallable after a restart, byte for byte.
		after := startServe(t, env, "--db", db, "--scorer", "lexical", "--price-forced=false", "--openai-upstream", up.URL, "--anthropic-upstream", up.URL)
		for _, r := range stubs {
			code, text := after.get(t, "/v1/recall/"+r[0])
			h := sha256.Sum256([]byte(text))
			if code != http.StatusOK || hex.EncodeToString(h[:]) != r[1] {
				t.Errorf("round %d: recall %s after the crash: %d, hash %x; want 200 and %s", round, r[0], code, h[:6], r[1])
			}
		}
		_ = after.cmd.Process.Signal(syscall.SIGTERM)
		if code := after.wait(15 * time.Second); code != 0 {
			t.Errorf("round %d: restarted serve ended with %d:\n%s", round, code, after.stderr.String())
		}
	}
}
