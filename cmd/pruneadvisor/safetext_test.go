package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

func TestSafe(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ls -l src", "ls -l src"},
		{`grep -n "TODO" \*.go`, `grep -n "TODO" \*.go`}, // nothing to escape: quotes and backslashes stay
		{"Résumé €", "Résumé €"},
		{"printf '\x1b]0;pwned\x07'", `"printf '\x1b]0;pwned\a'"`},
		{"a\x00b", `"a\x00b"`},
		{"clear\x1b[2J", `"clear\x1b[2J"`},
		{"evil\u202egnp.go", `"evil\u202egnp.go"`},
		{"zero\u200bwidth", `"zero\u200bwidth"`},
		{"tab\there", `"tab\there"`},
		{"two\nlines", `"two\nlines"`},
		{"c1 \u009b31m", `"c1 \u009b31m"`},
		{"del\x7f", `"del\x7f"`},
		{"bad \xff utf8", `"bad \xff utf8"`},
		{"replacement \ufffd stays", "replacement \ufffd stays"},
		{"quote \" and \\ inside \"x\x1b\"", `"quote \" and \\ inside \"x\x1b\""`},
	}
	for _, tt := range tests {
		if got := safe(tt.in); got != tt.want {
			t.Errorf("safe(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// --json keeps the file's text: its encoder escapes control characters as \u00XX,
// and a reader gets the raw characters back.
func TestInspectJSONKeepsControls(t *testing.T) {
	path, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "bad", "claude-terminal-escapes.jsonl"))
	p := startPA(t, "", testEnv(t), "inspect", "--json", path)
	if code := p.wait(lightBound); code != 0 {
		t.Fatalf("exit %d: %s", code, p.output())
	}
	var reports []struct {
		Duplicates []struct{ Target string } `json:"duplicates"`
		Unanswered []string                  `json:"unanswered"`
	}
	if err := json.Unmarshal([]byte(p.stdout.String()), &reports); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || len(reports[0].Duplicates) != 1 ||
		reports[0].Duplicates[0].Target != "printf '\x1b]0;pwned\x07\x1b[2J\x1b[8mhidden\x1b[0m'" ||
		len(reports[0].Unanswered) != 1 || reports[0].Unanswered[0] != "toolu_\x1b[2Jclr" {
		t.Errorf("--json: %+v", reports)
	}
}
