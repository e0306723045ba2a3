package rules

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"bytes"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// canonArgsByTree is the definition canonArgs keeps to: decode into an `any`,
// encode again.
func canonArgsByTree(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	var v any
	if err := json.Unmarshal(t, &v); err != nil {
		return string(t)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(t)
	}
	return string(b)
}

// canonCases are arguments whose canonical forms take each route: plain and
// escaped strings, HTML characters, invalid UTF-8, repeated keys, numbers exact and
// not, out of range, nesting, and text that is not JSON.
var canonCases = []string{
	``, `  `, `{}`, `[]`, `null`, `true`, ` false `, `"x"`, `0`, `-0`, `-0.0`, `12`, `-12`,
	`123456789012345`, `1234567890123456`, `12345678901234567890`, `1.0`, `1.50`, `1e3`,
	`1E+2`, `-1e-7`, `0.000001`, `1e21`, `1e400`, `-1e400`, `1e-400`, `007`, `01`,
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":{"x":1},"a":{"y":2}}`, `{"a":1,"b":2,"a":3}`,
	`{ "command" : "ls -la" , "description": "List" }`,
	`{"file_path":"/w/a.go","offset":10,"limit":2000}`,
	`{"s":"<b> & </b>"}`, `{"s":"tab\there"}`, `{"s":"\u00e9t\u00E9"}`, `{"s":"été"}`,
	`{"s":"\u2028 \u2029"}`, "{\"s\":\"\xff\xfe\"}", "{\"\xff\":1,\"\xfe\":2}",
	`{"s":"\/ \" \\ \b\f\n\r\t"}`, `{"\u0061":1,"a":2}`, `{"é":1,"e":2,"z":3}`,
	`{"a":[1,{"d":[],"c":{}}, "x" ,null,true,false,[[]]]}`, `[1,2,3,]`, `{"a":1`,
	`{"a":1} x`, `not json`, `{"a":1e400,"b":2}`, `{"a":"\ud800"}`, "\x7f", `"\u007f"`,
	"\"\x7f\"", `{"a":-}`, `[1e999]`,
}

// TestCanonArgs compares canonArgs with the tree route on cases of every kind and
// on the arguments of every call of the shared sessions.
func TestCanonArgs(t *testing.T) {
	for _, c := range canonCases {
		if got, want := canonArgs(json.RawMessage(c)), canonArgsByTree(json.RawMessage(c)); got != want {
			t.Errorf("canonArgs(%q) = %q; want %q", c, got, want)
		}
	}
	// independent values for a few, as encoding/json gives them
	for in, want := range map[string]string{
		`{ "b" : 1.50, "a":[ "x<" ,1e3] }`: `{"a":["x\u003c",1000],"b":1.5}`,
		`{"a":1,"a":2}`:                    `{"a":2}`,
		`not json `:                        `not json`,
		`{"a":1e400}`:                      `{"a":1e400}`,
	} {
		if got := canonArgs(json.RawMessage(in)); got != want {
			t.Errorf("canonArgs(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestFastRoutesOnSharedSessions compares canonArgs with the tree route on the
// arguments of every call of ../shared/sessions, and StripAnnotations with the
// regexps alone on every output.
func TestFastRoutesOnSharedSessions(t *testing.T) {
	var files []string
	err := filepath.WalkDir(filepath.Join("..", "..", "shared", "sessions"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		sessionfiles.Missing(t, "no ../shared/sessions: %v", err)
	}
	calls, outputs := 0, 0
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{})
		if err != nil {
			continue
		}
		for _, m := range s.Messages {
			for _, c := range m.Calls {
				calls++
				if got, want := canonArgs(c.Args), canonArgsByTree(c.Args); got != want {
					t.Fatalf("%s: call %s: canonArgs(%q) = %q; want %q", f, c.ID, c.Args, got, want)
				}
			}
			for _, o := range m.Outputs {
				if StripAnnotations(o.Text) != o.Text {
					outputs++
				}
				if StripAnnotations(o.Text) != stripByRegexps(o.Text) {
					t.Fatalf("%s: output %s: StripAnnotations and the regexps differ", f, o.Key)
				}
			}
		}
	}
	if calls < 1000 || outputs < 20 {
		t.Errorf("compared %d calls and %d annotated outputs; want the sessions' 1,800 and 40", calls, outputs)
	}
	t.Logf("%d calls, %d annotated outputs", calls, outputs)
}

// FuzzCanonArgs checks that the one-walk canonical form is the tree route's.
func FuzzCanonArgs(f *testing.F) {
	for _, c := range canonCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if got, want := canonArgs(json.RawMessage(in)), canonArgsByTree(json.RawMessage(in)); got != want {
			t.Fatalf("canonArgs(%q) = %q; want %q", in, got, want)
		}
	})
}
