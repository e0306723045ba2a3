package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Exit codes as docs/COMMANDS.md gives them, for the cases a new user meets first:
// a bad flag value is 2, a --db that names no database is 1 and creates nothing
// (recall, ledger, calibrate, report, backoff and fit only read what others stored),
// and so is a replay of a folder without sessions.
// mcp's --tool-name is in TestServeRefusesExposedAddr.
func TestExitCodesOfFirstMistakes(t *testing.T) {
	session := filepath.Join("..", "..", "testdata", "sessions", "fix-port.jsonl")
	missing := filepath.Join(t.TempDir(), "nosuch", "pa.db")
	noSessions := t.TempDir() // a mistyped sessions folder: notes, no session
	if err := os.WriteFile(filepath.Join(noSessions, "notes.txt"), []byte("not a session"), 0o644); err != nil {
		t.Fatal(err)
	}
	nowhere := filepath.Join(t.TempDir(), "projectz") // a mistyped ~/.claude/projects
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"advise --format unknown", []string{"advise", "--format", "claude", "--db", missing, session}, exitUsage,
			`--format "claude": want one of anthropic, claude-code, codex,`},
		{"inspect --format unknown", []string{"inspect", "--format", "claude", session}, exitUsage, `--format "claude": want one of`},
		{"recall, no database", []string{"recall", "--db", missing, "o_0000000000"}, exitError, "no database at " + missing + ": advise, replay, serve and wrap create it"},
		{"ledger, no database", []string{"ledger", "--db", missing}, exitError, "no database at " + missing + ": serve and wrap create it"},
		{"ledger --session ''", []string{"ledger", "--db", missing, "--session", ""}, exitUsage, "--session needs a session id"},
		{"calibrate, no database", []string{"calibrate", "--db", missing}, exitError, "no database at " + missing + ": run `pruneadvisor replay --db " + missing + " PATH...` first"},
		{"report, no database", []string{"report", "--db", missing, "--out", filepath.Join(t.TempDir(), "r.html")}, exitError, "no database at " + missing + ": run `pruneadvisor replay --db " + missing + " PATH...` first"},
		{"report --objective unknown", []string{"report", "--db", missing, "--objective", "best"}, exitUsage, `--objective "best": want token-steps or net`},
		{"report --out empty", []string{"report", "--db", missing, "--out", ""}, exitUsage, "--out: want a file name"},
		{"backoff, no database", []string{"backoff", "--db", missing}, exitError, "no database at " + missing},
		{"fit, no database", []string{"fit", "--db", missing}, exitError, "no database at " + missing},
		{"replay, no sessions", []string{"replay", "--db", missing, noSessions}, exitError, "replay: no session files under " + noSessions + ": a folder's sessions end in .jsonl, .json, .traj (other files passed over: 1)"},
		{"replay, no such folder", []string{"replay", "--db", missing, nowhere}, exitError, "replay: no session files under " + nowhere + ": a folder's sessions end in .jsonl, .json, .traj (other files passed over: 0); no such file or folder: " + nowhere},
		{"replay, an empty folder and no such file", []string{"replay", "--db", missing, noSessions, nowhere}, exitError, "(other files passed over: 1); no such file or folder: " + nowhere},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, strings.NewReader(""), &out, &errb)
			if code != tt.code || !strings.Contains(errb.String(), tt.err) {
				t.Errorf("exit %d, stderr %q; want %d with %q", code, errb.String(), tt.code, tt.err)
			}
			if _, err := os.Stat(filepath.Dir(missing)); err == nil {
				t.Errorf("%s was created", filepath.Dir(missing))
			}
		})
	}
}

// A --db naming a folder or an empty file is no database either: every command that
// reads what others stored says which (exit 1), and the empty file stays empty
// (SQLite would make a new database in it). mcp, which makes a missing store, says
// the same of these two.
func TestDBNotADatabase(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"recall", "o_000000000000"}, {"ledger"}, {"calibrate"}, {"backoff"}, {"fit"}, {"mcp"}} {
		for db, want := range map[string]string{
			dir:   "no database at " + dir + ": it is a folder, and --db names the database file",
			empty: "no database at " + empty + ": the file is empty, and not a database to open or make",
		} {
			t.Run(cmd[0]+" "+filepath.Base(db), func(t *testing.T) {
				var out, errb bytes.Buffer
				code := run(append(append([]string(nil), cmd...), "--db", db), strings.NewReader(""), &out, &errb)
				if code != exitError || !strings.Contains(errb.String(), want) {
					t.Errorf("exit %d, stderr %q; want %d with %q", code, errb.String(), exitError, want)
				}
				if st, err := os.Stat(empty); err != nil || st.Size() != 0 {
					t.Errorf("%s was written (%v)", empty, err)
				}
			})
		}
	}
}

// A --model-file that is not a model is the command's error (exit 1, naming the
// file), not a warning over a run with the embedded model; the same file named by
// a config's model_file is a warning and the run goes on with the embedded model.
func TestBadModelFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "m.json")
	if err := os.WriteFile(bad, []byte(`{"format":"something else"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.json")
	if err := os.WriteFile(cfg, []byte(`{"model_file":`+strconv.Quote(bad)+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	session := filepath.Join("..", "..", "testdata", "sessions", "fix-port.jsonl")
	var out, errb bytes.Buffer
	code := run([]string{"advise", "--scorer", "fitted", "--model-file", bad, "--db", filepath.Join(dir, "a.db"), "--plan=false", session}, strings.NewReader(""), &out, &errb)
	if code != exitError || !strings.Contains(errb.String(), "--model-file") || !strings.Contains(errb.String(), bad) {
		t.Errorf("--model-file: exit %d, stderr %q; want %d naming --model-file and %s", code, errb.String(), exitError, bad)
	}
	out.Reset()
	errb.Reset()
	code = run([]string{"advise", "--scorer", "fitted", "--config", cfg, "--db", filepath.Join(dir, "b.db"), "--plan=false", session}, strings.NewReader(""), &out, &errb)
	if code != exitOK || !strings.Contains(errb.String(), "cannot use the config's model_file") || !regexp.MustCompile(`(?m)^scorer +fitted$`).MatchString(out.String()) {
		t.Errorf("config's model_file: exit %d, stdout %q, stderr %q; want 0, the embedded fitted scorer and a warning", code, out.String(), errb.String())
	}
}

// mcp makes a missing store (the proxy may not have stored a stub yet) and says so
// on stderr, so that a mistyped --db is seen before every recall answers "no
// pruned output".
func TestMCPSaysItMakesTheStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "later.db")
	var out, errb bytes.Buffer
	code := run([]string{"mcp", "--db", db}, strings.NewReader(""), &out, &errb)
	want := "pruneadvisor: mcp: no database at " + db + " yet: making it"
	if code != exitOK || !strings.Contains(errb.String(), want) {
		t.Errorf("exit %d, stderr %q; want %d with %q", code, errb.String(), exitOK, want)
	}
	if _, err := os.Stat(db); err != nil {
		t.Errorf("the store was not made: %v", err)
	}
}
