package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestRecallPartFlags runs `pruneadvisor recall` with --lines, --grep and --context
// on a real SQLite store: the numbered lines (written out by hand), exit 0; a bad
// range or pattern, exit 2 with the flag named, and a bad one is said before the
// database is looked for; the answered recalls are recorded, the refused not.
func TestRecallPartFlags(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "pa.db")
	db, err := storage.Open(t.Context(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	text := "=== RUN   TestParse\n--- PASS: TestParse (0.00s)\n=== RUN   TestServe\n    serve_test.go:42: Timeout after 5s\n--- FAIL: TestServe (5.01s)\nFAIL\nexit status 1" // no final newline
	id := advisor.RecallID("sess-c", "toolu_t")
	if err := db.SaveOriginal(t.Context(), advisor.Original{RecallID: id, SessionID: "sess-c", OutputKey: "toolu_t", Tool: "Bash",
		Summary: "go test", Text: text, Hash: transcript.TextHash(text), Tokens: tokencount.Count(text), Step: 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	missing := filepath.Join(dir, "nosuch", "pa.db")
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrPart string
	}{
		{"lines", []string{"--lines", "3-4"}, exitOK, "3:=== RUN   TestServe\n4:    serve_test.go:42: Timeout after 5s\n[lines 3-4 of 7]\n", ""},
		{"last line", []string{"--lines", "7-"}, exitOK, "7:exit status 1\n[lines 7-7 of 7]\n", ""},
		{"grep with context", []string{"--grep", "^--- FAIL", "-C", "1"}, exitOK,
			"4-    serve_test.go:42: Timeout after 5s\n5:--- FAIL: TestServe (5.01s)\n6-FAIL\n[1 line matches \"^--- FAIL\" in all 7 lines]\n", ""},
		{"grep no match", []string{"--grep", "panic"}, exitOK, "[no line matches \"panic\" in all 7 lines]\n", ""},
		{"json", []string{"--lines", "6", "--json"}, exitOK, `{"id":"` + id + `","lines":"6","text":"6:FAIL\n[lines 6-6 of 7]\n"}` + "\n", ""},
		{"bad range", []string{"--lines", "4-2"}, exitUsage, "",
			`pruneadvisor: bad line range: --lines "4-2": the end 2 is before the start 4; want "N", "N-M" or "N-" with line numbers from 1, e.g. "200-250"`},
		{"range past the end", []string{"--lines", "8-9"}, exitUsage, "",
			`pruneadvisor: recall "` + id + `": bad line range: --lines "8-9": the original has 7 lines, so it starts past the end; want a start from 1 to 7`},
		{"bad pattern", []string{"--grep", "(?P<x"}, exitUsage, "",
			`pruneadvisor: bad pattern: --grep "(?P<x": invalid named capture: "(?P<x"; want a Go (RE2) regular expression`},
		{"bad context", []string{"--grep", "x", "--context", "-1"}, exitUsage, "", `pruneadvisor: bad context: --context -1: want 0 to 20 lines`},
		{"context not a number", []string{"--grep", "x", "--context", "many"}, exitUsage, "", `invalid argument "many" for "-C, --context" flag`},
		{"bad range, no database", []string{"--lines", "x", "--db", missing}, exitUsage, "", `pruneadvisor: bad line range: --lines "x": "x" is not a line number`},
		{"empty lines", []string{"--lines", ""}, exitUsage, "", `pruneadvisor: --lines "": empty; leave --lines out for every line`},
		{"empty grep", []string{"--grep="}, exitUsage, "", `pruneadvisor: --grep "": empty; leave --grep out for no search`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"recall", id, "--db", dbPath}, tt.args...)
			var out, errb bytes.Buffer
			code := run(args, strings.NewReader(""), &out, &errb)
			if code != tt.code {
				t.Errorf("exit %d, stderr %q; want %d", code, errb.String(), tt.code)
			}
			if d := cmp.Diff(tt.stdout, out.String()); d != "" {
				t.Errorf("stdout (-want +got):\n%s", d)
			}
			if tt.stderrPart == "" && errb.Len() > 0 || !strings.Contains(errb.String(), tt.stderrPart) {
				t.Errorf("stderr %q; want %q", errb.String(), tt.stderrPart)
			}
		})
	}
	// An id not shaped like a recall id is a bad argument (2), said before the
	// database is asked.
	for _, bad := range []string{"o_x", "", "not-an-id"} {
		var out, errb bytes.Buffer
		code := run([]string{"recall", bad, "--db", missing}, strings.NewReader(""), &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), "invalid recall id") {
			t.Errorf("recall %q: exit %d, stderr %q; want %d with \"invalid recall id\"", bad, code, errb.String(), exitUsage)
		}
	}
	db, err = storage.Open(t.Context(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if evs, err := db.SessionRecalls(t.Context(), "sess-c"); err != nil || len(evs) != 5 {
		t.Errorf("recall events: %d, %v; want 5 (the answered ones)", len(evs), err)
	}
}
