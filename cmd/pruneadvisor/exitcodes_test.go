package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Exit codes as docs/COMMANDS.md gives them, for the cases a new user meets first:
// a bad flag value is 2, a --db that names no database is 1 and creates nothing
// (recall, ledger, calibrate, backoff and fit only read what others stored).
// mcp's --tool-name is in TestServeRefusesExposedAddr.
func TestExitCodesOfFirstMistakes(t *testing.T) {
	session := filepath.Join("..", "..", "testdata", "sessions", "fix-port.jsonl")
	missing := filepath.Join(t.TempDir(), "nosuch", "pa.db")
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
		{"calibrate, no database", []string{"calibrate", "--db", missing}, exitError, "no database at " + missing + ": run `pruneadvisor replay --db " + missing + " PATH...` first"},
		{"backoff, no database", []string{"backoff", "--db", missing}, exitError, "no database at " + missing},
		{"fit, no database", []string{"fit", "--db", missing}, exitError, "no database at " + missing},
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
