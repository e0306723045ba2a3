package replay_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// runFiles are three small sessions of the repository's testdata, each with asks,
// replayed in this order by one worker.
var runFiles = []string{
	"../testdata/replay/port.json",
	"../testdata/sessions/fix-port.jsonl",
	"../testdata/codex/rollout-2025-11-04T10-12-33-019a4e2c-7d1b-7c30-9f4e-2b8d6c1a9e57.jsonl",
}

// Environment of the helper process of TestResumeAfterKill.
const (
	helperEnv   = "PRUNEADVISOR_REPLAY_KILL_HELPER"
	helperDBEnv = "PRUNEADVISOR_REPLAY_KILL_DB"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(killHelper())
	}
	os.Exit(m.Run())
}

// commitSink calls after once a commit succeeded.
type commitSink struct {
	replay.Sink
	after func(*replay.Record)
}

func (s commitSink) CommitReplay(ctx context.Context, rec *replay.Record) error {
	if err := s.Sink.CommitReplay(ctx, rec); err != nil {
		return err
	}
	s.after(rec)
	return nil
}

// hookScorer is the lexical scorer with a hook before every batch.
type hookScorer struct {
	advisor.Scorer
	hook func()
}

func (h *hookScorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	h.hook()
	return h.Scorer.Score(ctx, b)
}

// killHelper replays runFiles into the database named by helperDBEnv and, once the
// first session is committed, stops at the next scorer batch (in the second
// session) and says "blocked" on stdout, waiting to be killed.
func killHelper() int {
	ctx := context.Background()
	db, err := storage.Open(ctx, os.Getenv(helperDBEnv))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	var armed atomic.Bool
	sc := &hookScorer{Scorer: lexical.New(), hook: func() {
		if armed.Load() {
			fmt.Println("blocked")
			time.Sleep(time.Hour)
		}
	}}
	sink := commitSink{Sink: db, after: func(rec *replay.Record) {
		fmt.Println("committed", rec.Path)
		armed.Store(true)
	}}
	r := &replay.Runner{Replayer: &replay.Replayer{Config: advisor.DefaultConfig(), Scorer: sc, Lenient: true}, Sink: sink, Workers: 1}
	if _, err := r.Run(ctx, runFiles); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("finished without blocking")
	return 1
}

func openDB(t *testing.T, path string) *storage.DB {
	t.Helper()
	db, err := storage.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func lexicalRunner(db replay.Sink, workers int) *replay.Runner {
	return &replay.Runner{
		Replayer: &replay.Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New(), Lenient: true},
		Sink:     db, Workers: workers,
	}
}

// reference replays runFiles without interruption into a fresh database and
// returns its dump.
func reference(t *testing.T) []string {
	t.Helper()
	db := openDB(t, filepath.Join(t.TempDir(), "ref.db"))
	sum, err := lexicalRunner(db, 1).Run(t.Context(), runFiles)
	if err != nil || sum.Replayed != len(runFiles) || len(sum.Failures) > 0 {
		t.Fatalf("reference run: %+v, %v", sum, err)
	}
	d := dump(t, db.Path())
	kinds := map[string]int{}
	for _, row := range d {
		kinds[strings.Fields(row)[0]]++
	}
	for _, k := range []string{"session", "ask", "decision", "evidence", "output", "step", "run", "settings"} {
		if kinds[k] == 0 {
			t.Fatalf("reference database has no %s rows: %v", k, kinds)
		}
	}
	return d
}

// dump lists every stored row of the replay tables as text, ordered within each
// session, without row ids, wall times and latencies (the only columns two replays
// of the same files may differ in).
func dump(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	queries := []string{
		`SELECT 'session', id, format, name, path, content_hash, settings_hash FROM sessions ORDER BY id`,
		`SELECT 'ask', session_id, output_key, step, card_hash, scorer, score, ok, fail_kind, tokens FROM asks ORDER BY session_id, id`,
		`SELECT 'decision', session_id, output_key, step, decision, reason, score, superseder, tokens FROM decisions ORDER BY session_id, id`,
		`SELECT 'evidence', session_id, output_key, use_step, proof, weight FROM evidence ORDER BY session_id, id`,
		`SELECT 'output', * FROM replay_outputs ORDER BY session_id, seq`,
		`SELECT 'step', * FROM replay_steps ORDER BY session_id, step`,
		`SELECT 'run', session_id, content_hash, settings_hash, scorer, schedule, status FROM replay_runs ORDER BY session_id`,
		`SELECT 'settings', * FROM replay_settings ORDER BY hash`,
		`SELECT 'originals', count(*) FROM outputs`,
		`SELECT 'stubs', count(*) FROM stubs`,
	}
	var out []string
	for _, q := range queries {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				parts[i] = fmt.Sprintf("%v", v)
			}
			out = append(out, strings.Join(parts, " | "))
		}
		rows.Close()
	}
	return out
}

// count returns the number of finished runs in the database.
func doneRuns(t *testing.T, db *storage.DB) int {
	t.Helper()
	rs, err := db.ReplayedSessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

// TestResumeAfterCancel cancels a replay in the middle of its second session: the
// first session stays stored, nothing of the second is; running again replays the
// second and third only, and the database ends up with the same rows as an
// uninterrupted run.
func TestResumeAfterCancel(t *testing.T) {
	want := reference(t)
	db := openDB(t, filepath.Join(t.TempDir(), "r.db"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var armed atomic.Bool
	sc := &hookScorer{Scorer: lexical.New(), hook: func() {
		if armed.Load() {
			cancel()
		}
	}}
	r := &replay.Runner{
		Replayer: &replay.Replayer{Config: advisor.DefaultConfig(), Scorer: sc, Lenient: true},
		Sink:     commitSink{Sink: db, after: func(*replay.Record) { armed.Store(true) }},
		Workers:  1,
	}
	sum, err := r.Run(ctx, runFiles)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v, want context.Canceled", err)
	}
	if sum.Replayed != 1 || len(sum.Failures) != 0 || doneRuns(t, db) != 1 {
		t.Fatalf("interrupted run: %d replayed, %v failures, %d stored; want 1, none, 1", sum.Replayed, sum.Failures, doneRuns(t, db))
	}
	sum, err = lexicalRunner(db, 1).Run(t.Context(), runFiles)
	if err != nil || sum.AlreadyDone != 1 || sum.Replayed != 2 {
		t.Fatalf("resumed run: %+v, %v; want 1 already done and 2 replayed", sum, err)
	}
	if diff := cmp.Diff(want, dump(t, db.Path())); diff != "" {
		t.Errorf("resumed database differs from an uninterrupted run's (-want +got):\n%s", diff)
	}
	// A third run finds everything stored.
	sum, err = lexicalRunner(db, 2).Run(t.Context(), runFiles)
	if err != nil || sum.AlreadyDone != 3 || sum.Replayed != 0 {
		t.Errorf("third run: %+v, %v; want all 3 already done", sum, err)
	}
}

// TestResumeAfterKill runs the replay in a child process, kills it with SIGKILL
// while it is in the middle of its second session, then resumes in this process:
// the first session survives the kill, and the final database equals an
// uninterrupted run's. Bounded: the child is killed after 60 s whatever happens.
func TestResumeAfterKill(t *testing.T) {
	want := reference(t)
	path := filepath.Join(t.TempDir(), "k.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperDBEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var lines []string
	blocked := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "blocked" {
			blocked = true
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	werr := cmd.Wait()
	if !blocked {
		t.Fatalf("child never blocked in its second session (output %q, wait %v)", lines, werr)
	}
	if ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); ok && !ws.Signaled() {
		t.Errorf("child exited (%v) instead of being killed", werr)
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "committed ") {
		t.Errorf("child said %q, want one commit then blocked", lines)
	}
	db := openDB(t, path)
	if n := doneRuns(t, db); n != 1 {
		t.Fatalf("after the kill %d sessions are stored, want the 1 committed", n)
	}
	sum, err := lexicalRunner(db, 1).Run(t.Context(), runFiles)
	if err != nil || sum.AlreadyDone != 1 || sum.Replayed != 2 {
		t.Fatalf("resumed run: %+v, %v; want 1 already done and 2 replayed", sum, err)
	}
	if diff := cmp.Diff(want, dump(t, db.Path())); diff != "" {
		t.Errorf("database after kill and resume differs from an uninterrupted run's (-want +got):\n%s", diff)
	}
}

// TestWorkersSameRows replays with two workers: the rows are the same as with one.
func TestWorkersSameRows(t *testing.T) {
	want := reference(t)
	db := openDB(t, filepath.Join(t.TempDir(), "w.db"))
	sum, err := lexicalRunner(db, 2).Run(t.Context(), runFiles)
	if err != nil || sum.Replayed != 3 {
		t.Fatalf("%+v, %v", sum, err)
	}
	if diff := cmp.Diff(want, dump(t, db.Path())); diff != "" {
		t.Errorf("two workers (-want +got):\n%s", diff)
	}
}

// TestRunFailures walks a folder holding a good session, a copy of it, a session
// with a truncated line, a JSON file that is no session, and names a text file
// explicitly: the truncated session fails (strict reading) and so does the
// explicit text file; the rest is replayed or skipped, and the summary says so.
func TestRunFailures(t *testing.T) {
	dir := t.TempDir()
	port, err := os.ReadFile(runFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	claude, err := os.ReadFile(runFiles[1])
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitAfterN(string(claude), "\n", 3)
	files := map[string]string{
		"a/port.json":      string(port),
		"b/copy.json":      string(port),
		"c/broken.jsonl":   first[0] + first[1] + `{"type": "assistant", "message": {"role": "assist` + "\n",
		"d/settings.json":  `{"theme": "dark"}`,
		"e/readme.txt":     "not a session",
		"f/empty.jsonl":    "",
		"g/notes.md":       "# notes",
		"h/sub/more.jsonl": first[0],
	}
	for rel, text := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := openDB(t, filepath.Join(t.TempDir(), "f.db"))
	r := lexicalRunner(db, 2)
	r.Replayer.Lenient = false
	explicit := filepath.Join(dir, "e/readme.txt")
	sum, err := r.Run(t.Context(), []string{dir, explicit})
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range sum.Failures {
		failed = append(failed, strings.TrimPrefix(f.Path, dir+"/"))
	}
	// Folder order: a, b, c, d, f, h; then the explicit file.
	if diff := cmp.Diff([]string{"c/broken.jsonl", "e/readme.txt"}, sortedFails(failed)); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	for _, f := range sum.Failures {
		switch {
		case strings.HasSuffix(f.Path, "broken.jsonl") && !errors.Is(f.Err, transcript.ErrMalformed):
			t.Errorf("%s: %v, want ErrMalformed", f.Path, f.Err)
		case strings.HasSuffix(f.Path, "readme.txt") && !errors.Is(f.Err, replay.ErrNotSession):
			t.Errorf("%s: %v, want ErrNotSession", f.Path, f.Err)
		case strings.HasSuffix(f.Path, "readme.txt") && !strings.HasPrefix(f.Err.Error(), "not a session file: unknown session format: tried anthropic,"):
			t.Errorf("%s: %q; want the reader's error after \"not a session file\", without the path again", f.Path, f.Err)
		}
	}
	type counts struct{ Found, Replayed, Duplicates, NotSessions, AlreadyDone, Ignored, Failed int }
	got := counts{sum.Found, sum.Replayed, sum.Duplicates, sum.NotSessions, sum.AlreadyDone, sum.Ignored, len(sum.Failures)}
	// Found: the six session-named files plus the explicit one. Replayed: port.json
	// and the one-line more.jsonl. Not sessions: settings.json and empty.jsonl.
	// Ignored by name: readme.txt and notes.md.
	want := counts{Found: 7, Replayed: 2, Duplicates: 1, NotSessions: 2, Ignored: 2, Failed: 2}
	if got != want {
		t.Errorf("summary %+v, want %+v", got, want)
	}
	// An empty file given by name fails as inspect says it: an empty session.
	empty := filepath.Join(dir, "f/empty.jsonl")
	esum, err := r.Run(t.Context(), []string{empty})
	if err != nil {
		t.Fatal(err)
	}
	if len(esum.Failures) != 1 || esum.Failures[0].Err.Error() != "empty session: the file holds no data" ||
		!errors.Is(esum.Failures[0].Err, replay.ErrNotSession) || !errors.Is(esum.Failures[0].Err, transcript.ErrEmpty) {
		t.Errorf("an empty file by name: %+v; want one failure, \"empty session: the file holds no data\", wrapping ErrNotSession and ErrEmpty", esum.Failures)
	}
	sum, err = r.Run(t.Context(), []string{dir, explicit})
	if err != nil || sum.AlreadyDone != 2 || sum.Replayed != 0 || len(sum.Failures) != 2 {
		t.Errorf("second run: %+v, %v; want 2 already done, 0 replayed, the same 2 failures", sum, err)
	}
}

func sortedFails(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
