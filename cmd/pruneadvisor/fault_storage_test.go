package main

// Storage faults under a running serve: the database deleted, made read-only, on a
// full disk, or locked by another process past the busy timeout. The advisor must
// prune nothing new, keep sending the stubs it already applied, keep answering
// recalls where the file can still be read, and say why (plan.storage_error, the
// log, pruneadvisor_storage_errors_total).

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
)

// lockEnv names the database a helper process holds locked (see init).
const lockEnv = "PRUNEADVISOR_TEST_HOLD_LOCK"

// init turns this test binary into the lock-holding helper when lockEnv is set: it
// takes SQLite's exclusive write lock on the database, prints "locked", and holds it
// until its standard input closes.
func init() {
	path := os.Getenv(lockEnv)
	if path == "" {
		return
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err == nil {
		var conn *sql.Conn
		if conn, err = db.Conn(context.Background()); err == nil {
			if _, err = conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err == nil {
				fmt.Println("locked")
				_, _ = io.Copy(io.Discard, os.Stdin)
				_, err = conn.ExecContext(context.Background(), "ROLLBACK")
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lock helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// holdLock starts the helper on db and returns the function that releases the lock.
func holdLock(t *testing.T, db string) func() {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), lockEnv+"="+db)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testkit.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("lock helper: %q, %v: %s", line, err, stderr.String())
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("lock helper: %v: %s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("lock helper did not let go")
		}
	}
	t.Cleanup(release)
	return release
}

// chattr sets or clears (flag "+i" / "-i") the immutable attribute: even root cannot
// write an immutable file, through handles opened before too.
func chattr(t *testing.T, flag string, paths ...string) error {
	out, err := exec.Command("chattr", append([]string{flag}, paths...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chattr %s: %v: %s", flag, err, out)
	}
	return nil
}

// mountTmpfs mounts a tmpfs of size bytes on dir; it is unmounted at cleanup, after
// whatever the test starts later has been stopped.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("a full disk needs a small tmpfs, and mounting one failed here (not root?): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fillDisk writes a file in dir until the file system is full and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
	}
}

// storageFault is one way the database fails under a running serve.
type storageFault struct {
	name string
	// setup prepares dir before serve opens dir/s.db in it.
	setup func(t *testing.T, dir string)
	// inject breaks the database and returns what lifts the fault (nil: it stays).
	inject func(t *testing.T, dir, db string) (lift func())
	// storageError is in the plan of a new session while the fault lasts; log is in
	// serve's stderr.
	storageError, log string
	// recallStatus is what GET /v1/recall/{id} answers for an applied stub meanwhile.
	recallStatus int
}

// advisedPlan is what the storage tests read from POST /v1/advise.
// adviseOpenAI posts msgs (an OpenAI messages array) to srv's /v1/advise as
// session with a 1,000-token budget and returns the plan; any status but 200 or an
// unreadable answer fails the test.
func adviseOpenAI(t *testing.T, srv *served, session, msgs string) advisedPlan {
	t.Helper()
	body := fmt.Sprintf(`{"session_id":%q,"format":"openai","budget":1000,"messages":%s}`, session, msgs)
	code, resp := srv.post(t, "/v1/advise", []byte(body))
	if code != http.StatusOK {
		t.Fatalf("advise %s: %d %s", session, code, cutOut(resp, 1000))
	}
	var p advisedPlan
	if err := json.Unmarshal([]byte(resp), &p); err != nil {
		t.Fatalf("advise %s: %v", session, err)
	}
	return p
}

type advisedPlan struct {
	Messages json.RawMessage `json:"messages"`
	Plan     struct {
		Pruned       int    `json:"pruned"`
		StorageError string `json:"storage_error"`
		Items        []struct {
			Key      string `json:"key"`
			Decision string `json:"decision"`
			RecallID string `json:"recall_id"`
			Stub     string `json:"stub"`
		} `json:"items"`
	} `json:"plan"`
}

// stubs returns the pruned items' stubs by recall id.
func (a advisedPlan) stubs() map[string]string {
	m := map[string]string{}
	for _, it := range a.Plan.Items {
		if it.Decision == "pruned" || it.Decision == "recalled" { // a recalled output keeps its stub
			m[it.RecallID] = it.Stub
		}
	}
	return m
}

var storageErrorsMetric = regexp.MustCompile(`(?m)^pruneadvisor_storage_errors_total (\d+)$`)

// TestStorageFaults breaks the database under a running serve in four ways. Session
// s1 is advised before the fault (5 outputs pruned), s2 during it.
func TestStorageFaults(t *testing.T) {
	t.Parallel() // mostly waiting (timeouts, busy locks, processes): overlap with the rest
	msgs := faultMessages()
	faults := []storageFault{
		{
			name: "deleted",
			inject: func(t *testing.T, dir, db string) func() {
				for _, suffix := range []string{"", "-wal", "-shm"} {
					if err := os.Remove(db + suffix); err != nil {
						t.Fatal(err)
					}
				}
				return nil
			},
			storageError: "originals and stubs not stored, pruning stopped: storage: save 5 prunes",
			log:          "database file was deleted or replaced while open",
			recallStatus: http.StatusOK,
		},
		{
			name: "read-only",
			inject: func(t *testing.T, dir, db string) func() {
				if _, err := exec.LookPath("chattr"); err != nil {
					t.Skip("chattr is not installed: cannot make the database read-only for root")
				}
				paths := []string{db, db + "-wal", dir}
				t.Cleanup(func() { _ = chattr(t, "-i", paths...) }) // else TempDir cannot be removed
				if err := chattr(t, "+i", paths...); err != nil {
					t.Skipf("this file system has no immutable attribute: %v", err)
				}
				return func() {
					if err := chattr(t, "-i", paths...); err != nil {
						t.Fatal(err)
					}
				}
			},
			storageError: "originals and stubs not stored, pruning stopped: storage: save 5 prunes",
			log:          "disk I/O error (778)",
			recallStatus: http.StatusOK,
		},
		{
			name:  "disk-full",
			setup: func(t *testing.T, dir string) { mountTmpfs(t, dir, 1<<20) },
			inject: func(t *testing.T, dir, db string) func() {
				filler := fillDisk(t, dir)
				return func() {
					if err := os.Remove(filler); err != nil {
						t.Fatal(err)
					}
				}
			},
			storageError: "originals and stubs not stored, pruning stopped: storage: save 5 prunes",
			log:          "database or disk is full",
			recallStatus: http.StatusOK,
		},
		{
			// Each write waits for the busy timeout (5 s), within the advise timeout
			// (10 s): the plan names the lock, or the deadline when two writes waited.
			name: "locked",
			inject: func(t *testing.T, dir, db string) func() {
				return holdLock(t, db)
			},
			storageError: "originals and stubs not stored, pruning stopped: storage: save 5 prunes",
			log:          "database is locked (5) (SQLITE_BUSY)",
			recallStatus: http.StatusOK,
		},
	}
	for _, fc := range faults {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "store")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if fc.setup != nil {
				fc.setup(t, dir)
			}
			db := filepath.Join(dir, "s.db")
			up := upstream(t)
			srv := startServe(t, testEnv(t), "--db", db, "--scorer", "lexical", "--price-forced=false", "--openai-upstream", up.URL, "--anthropic-upstream", up.URL)
			advise := func(session string) advisedPlan { return adviseOpenAI(t, srv, session, msgs) }
			before := advise("s1")
			applied := before.stubs()
			if before.Plan.Pruned != 5 || len(applied) != 5 || before.Plan.StorageError != "" {
				t.Fatalf("before the fault: pruned %d (%d stubs), storage error %q; want 5 and none",
					before.Plan.Pruned, len(applied), before.Plan.StorageError)
			}
			var recallID, original string
			for id := range applied {
				recallID = id
			}
			code, original := srv.get(t, "/v1/recall/"+recallID)
			if code != http.StatusOK {
				t.Fatalf("recall before the fault: %d %s", code, original)
			}

			lift := fc.inject(t, dir, db)
			start := time.Now()
			during := advise("s2")
			t.Logf("new session during the fault, %.1fs: pruned %d, storage_error %q", time.Since(start).Seconds(), during.Plan.Pruned, during.Plan.StorageError)
			if during.Plan.Pruned != 0 || len(during.stubs()) != 0 {
				t.Errorf("during the fault a new session got %d stubs; want none", len(during.stubs()))
			}
			if !strings.Contains(during.Plan.StorageError, fc.storageError) {
				t.Errorf("storage_error %q; want it to hold %q", during.Plan.StorageError, fc.storageError)
			}
			if strings.Contains(string(during.Messages), "[pruned:") {
				t.Errorf("a stub was sent although its original was not stored")
			}
			// The session advised before the fault keeps every stub byte for byte, the
			// one recalled before the fault included (docs/DESIGN.md "Recall": the stub stays
			// frozen; the original reached the caller as the recall's result).
			again := advise("s1")
			if d := len(again.stubs()); d != len(applied) {
				t.Errorf("s1 during the fault: %d stubs; want its %d", d, len(applied))
			}
			for id, stub := range applied {
				if again.stubs()[id] != stub || !strings.Contains(string(again.Messages), jsonString(stub)) {
					t.Errorf("s1 during the fault: stub %s changed or left the messages", id)
				}
			}
			code, got := srv.get(t, "/v1/recall/"+recallID)
			if code != fc.recallStatus || code == http.StatusOK && got != original {
				t.Errorf("recall during the fault: %d (%d bytes); want %d with the original", code, len(got), fc.recallStatus)
			}
			if !strings.Contains(srv.stderr.String(), fc.log) {
				t.Errorf("serve's log does not say %q:\n%s", fc.log, srv.stderr.String())
			}
			if _, m := srv.get(t, "/metrics"); storageErrorsMetric.FindStringSubmatch(m) == nil || storageErrorsMetric.FindStringSubmatch(m)[1] == "0" {
				t.Errorf("pruneadvisor_storage_errors_total did not count the fault")
			}
			if lift == nil {
				// The file is gone for good: pruning stays off, and says why.
				if p := advise("s3"); p.Plan.Pruned != 0 || p.Plan.StorageError == "" {
					t.Errorf("after deletion: pruned %d, storage error %q; want 0 and a reason", p.Plan.Pruned, p.Plan.StorageError)
				}
				return
			}
			lift()
			after := advise("s2")
			if after.Plan.Pruned != 5 || after.Plan.StorageError != "" {
				t.Errorf("after the fault: pruned %d, storage error %q; want the 5 pending prunes applied", after.Plan.Pruned, after.Plan.StorageError)
			}
			for id := range after.stubs() {
				if code, _ := srv.get(t, "/v1/recall/"+id); code != http.StatusOK {
					t.Errorf("recall %s after the fault: %d", id, code)
				}
			}
		})
	}
}

// jsonString is s as a JSON string literal (how a stub appears in the messages).
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestStorageReadOnlyAtStart opens a database whose folder cannot be written (an
// immutable folder, then a read-only bind mount): recall reads it, saying the recall
// is not recorded; the commands that must write fail at once, naming the file and
// the cause.
func TestStorageReadOnlyAtStart(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr is not installed")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "s.db")
	session, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "sessions", "fix-port.jsonl"))
	env := testEnv(t)
	id := adviseRecallID(t, env, db, "toolu_05cEnv")
	t.Cleanup(func() { _ = chattr(t, "-i", db, dir) })
	if err := chattr(t, "+i", db, dir); err != nil {
		t.Skipf("no immutable attribute here: %v", err)
	}
	checkReadOnlyRecall(t, env, db, id)
	want := "storage: open " + db + ": unable to open database file (14) (the folder " + dir + " cannot be written: "
	for _, args := range [][]string{
		{"advise", session, "--db", db, "--scorer", "lexical"},
		{"replay", session, "--db", db, "--scorer", "lexical"},
		{"serve", "--addr", "127.0.0.1:0", "--db", db, "--scorer", "lexical"},
	} {
		code, out := runPA(t, lightBound, env, args...)
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d:\n%s\nwant 1 with %q", args[0], code, out, want)
		}
	}
	if err := chattr(t, "-i", db, dir); err != nil {
		t.Fatal(err)
	}

	// The same folder on a read-only bind mount (root only).
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", "-o", "ro", dir, mnt).CombinedOutput(); err != nil {
		t.Skipf("a read-only bind mount needs root: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	if f, err := os.Create(filepath.Join(mnt, "probe")); err == nil {
		f.Close()
		t.Skip("the bind mount is writable here")
	}
	checkReadOnlyRecall(t, env, filepath.Join(mnt, "s.db"), id)
}

// checkReadOnlyRecall recalls id from a database that cannot be written: the
// original comes back, with one note that the recall is not recorded; an unknown id
// is still "no pruned output".
func checkReadOnlyRecall(t *testing.T, env []string, db, id string) {
	t.Helper()
	p := startPA(t, "", env, "recall", id, "--db", db)
	code := p.wait(lightBound)
	note := "pruneadvisor: " + db + " cannot be written; opened read-only: recalls are served but not recorded as evidence\n"
	if code != 0 || !strings.Contains(p.stdout.String(), "AR='ar'") || p.stderr.String() != note {
		t.Errorf("recall %s on %s: exit %d, stdout %.80q, stderr %q; want 0, the original and %q", id, db, code, p.stdout.String(), p.stderr.String(), note)
	}
	code, out := runPA(t, lightBound, env, "recall", "o_0000000000", "--db", db)
	if code != 1 || !strings.Contains(out, `recall "o_0000000000": no pruned output with this id`) {
		t.Errorf("unknown id on %s: exit %d: %s", db, code, out)
	}
}
