package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestJSONLMend checks how a line that does not parse splits into whole records
// and fragments.
func TestJSONLMend(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []string // pieces in order; a fragment is written "!" + its bytes
	}{
		{"torn, next appended", `{"type":"pr-link","sessionId":"s","prNu{"parentUuid":"a","x":{"y":1}}`,
			[]string{`!{"type":"pr-link","sessionId":"s","prNu`, `{"parentUuid":"a","x":{"y":1}}`}},
		{"cut inside a string", `{"a":"see {x} and {","b{"c":[1,{"d":2}]}`,
			[]string{`!{"a":"see {x} and {","b`, `{"c":[1,{"d":2}]}`}},
		{"cut inside a nested object", `{"m":{"content":[{"type":"text","te{"type":"user"}`,
			[]string{`!{"m":{"content":[{"type":"text","te`, `{"type":"user"}`}},
		{"two torn, one whole", `{"a":1,"b{"c":[{"d{"e":2}`,
			[]string{`!{"a":1,"b{"c":[{"d`, `{"e":2}`}},
		{"whole, whole", `{"a":1} {"b":2}`, []string{`{"a":1}`, `{"b":2}`}},
		{"whole, then cut short", `{"a":1}{"b":`, []string{`{"a":1}`, `!{"b":`}},
		{"blanks around the fragment", ` {"a  {"b":2} `, []string{`!{"a`, `{"b":2}`}},
		// Torn just after a colon, the next record looks like the fragment's own
		// value: the line is skipped whole, as before.
		{"torn after a colon", `{"a":{"b":2}`, nil},
		{"nothing whole", `{"a":1,"b`, nil},
		{"garbage after a value", `{"a":1} }`, nil},
		{"a scalar", `42`, nil},
		{"one whole object", `{"a":1}`, nil},
		{"an empty object resumes", `{"a{}`, []string{`!{"a`, `{}`}},
		{"torn after an object's comma", `{"a":1,{"b":2}`, []string{`!{"a":1,`, `{"b":2}`}},
		{"torn after a value", `{"a":1{"b":2}`, []string{`!{"a":1`, `{"b":2}`}},
		// A line cut just after one of its own objects (a redaction tool's cut) holds
		// no record: the object is the fragment's, a value or an array's element.
		{"cut after a member's object", `{"a":{"type":"assistant","b":1}`, nil},
		{"cut after an array's first object", `{"c":[{"type":"tool_result"}`, nil},
		{"cut after an array's later object", `{"c":[1, {"d":2}`, nil},
		{"cut after a nested object in a string's wake", `{"s":"x{","m":{"d":2}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := []byte(tt.line)
			var got []string
			for _, p := range jsonlMend(line) {
				s := string(line[p.Start:p.End])
				if !p.whole {
					s = "!" + s
				}
				got = append(got, s)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("pieces (-want +got):\n%s", d)
			}
		})
	}
}

// A line crafted with a candidate record start at every other byte costs a
// bounded number of scans (jsonlTries), not one per candidate: 200,000 of them on
// a 400 KB line would take minutes.
func TestJSONLMendBounded(t *testing.T) {
	line := []byte(`{"a":1` + strings.Repeat(`{"`, 200_000))
	start := time.Now()
	if got := jsonlMend(line); got != nil {
		t.Errorf("pieces %v; want none", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("jsonlMend took %v on a %d-byte line", d, len(line))
	}
}

// tornFigures is what a torn copy must read back as, beside its clean copy.
type tornFigures struct {
	Messages, Steps, Calls, Outputs, Unanswered int
	Task                                        string
	Digest                                      []string // per message: line, role, text hash, call ids, output hashes
}

func tornFiguresOf(s *Session) tornFigures {
	f := tornFigures{Messages: len(s.Messages), Steps: s.Steps(), Calls: len(s.Calls), Outputs: len(s.Outputs()), Unanswered: len(s.Unanswered()), Task: s.Task}
	for _, m := range s.Messages {
		d := fmt.Sprintf("%d %s %s", m.Line, m.Role, TextHash(m.Text))
		for _, c := range m.Calls {
			d += " call:" + c.ID
		}
		for _, o := range m.Outputs {
			d += fmt.Sprintf(" out:%s:%s", o.CallID, o.Hash)
		}
		f.Digest = append(f.Digest, d)
	}
	return f
}

// tear returns two copies of the lines of data: clean, without line cut (0-based),
// and torn, with the first half of that line and the next line joined on one line,
// as a process killed mid-write and the next writer leave it. Both have the same
// number of lines, so the lines after the cut keep their numbers.
func tear(data []byte, cut int) (clean, torn []byte) {
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	half := lines[cut][:len(lines[cut])/2]
	var c, tr [][]byte
	c = append(c, lines[:cut]...)
	c = append(c, lines[cut+1:]...)
	tr = append(tr, lines[:cut]...)
	tr = append(tr, append(bytes.Clone(half), lines[cut+1]...))
	tr = append(tr, lines[cut+2:]...)
	return append(bytes.Join(c, []byte("\n")), '\n'), append(bytes.Join(tr, []byte("\n")), '\n')
}

// firstLine returns the 0-based index of the first line at or after from that is
// a JSON object whose text (as decoded by encoding/json into a map, not by the
// readers) satisfies pred, or -1.
func firstLine(t *testing.T, data []byte, from int, pred func(obj map[string]any) bool) int {
	t.Helper()
	for i, l := range bytes.Split(data, []byte("\n")) {
		var obj map[string]any
		if i < from || json.Unmarshal(l, &obj) != nil {
			continue
		}
		if pred(obj) {
			return i
		}
	}
	t.Fatal("no line matches")
	return -1
}

// dig walks obj by keys and array indexes ("message", "content", 0, "type").
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// hasBlock reports whether the content list at path holds a block of type typ.
func hasBlock(obj map[string]any, typ string, path ...any) bool {
	blocks, _ := dig(obj, path...).([]any)
	return slices.ContainsFunc(blocks, func(b any) bool { return dig(b, "type") == typ })
}

// TestTornLines tears one record of a session (its first half, and the next record
// written on the same line) and reads the torn copy beside a clean copy without
// that record: every figure and message equal, one more line skipped, the fragment
// reported with its line, and a strict read failing there. The record after the
// tear is a real session's first prompt (the task) or a tool call, whose result
// would otherwise be orphaned; the readers are Claude Code's, pi's (whole and
// streamed) and Codex's.
func TestTornLines(t *testing.T) {
	prompt := func(obj map[string]any) bool { // Claude Code: the user's typed prompt
		_, isText := dig(obj, "message", "content").(string)
		return obj["type"] == "user" && isText && obj["isMeta"] == nil
	}
	ccCall := func(obj map[string]any) bool {
		return obj["type"] == "assistant" && hasBlock(obj, "tool_use", "message", "content")
	}
	piPrompt := func(obj map[string]any) bool {
		return obj["type"] == "message" && dig(obj, "message", "role") == "user"
	}
	piCall := func(obj map[string]any) bool {
		return obj["type"] == "message" && hasBlock(obj, "toolCall", "message", "content")
	}
	cxCall := func(obj map[string]any) bool {
		return obj["type"] == "response_item" && dig(obj, "payload", "type") == "function_call"
	}
	cxPrompt := func(obj map[string]any) bool {
		return obj["type"] == "event_msg" && dig(obj, "payload", "type") == "user_message"
	}
	// Both read through format detection; stream writes the copy to a file and
	// reads it with ReadFileStreamed (a pi file this long in two passes).
	type readFn func(t *testing.T, name string, data []byte, opts Options) (*Session, error)
	whole := func(_ *testing.T, name string, data []byte, opts Options) (*Session, error) {
		return Read(name, data, opts)
	}
	stream := func(t *testing.T, name string, data []byte, opts Options) (*Session, error) {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := ReadFileStreamed(path, opts)
		if pe := (*ParseError)(nil); errors.As(err, &pe) {
			pe.File = name
		}
		if s != nil {
			s.Name = name
		}
		return s, err
	}
	tests := []struct {
		name, file string
		format     Format
		read       readFn
		from       int                       // the first line (0-based) the record after the tear may be
		next       func(map[string]any) bool // the record written after the torn one
	}{
		// The torn record is the queue-operation line before the user's first prompt.
		{"claude-code first prompt", rdrSessions + "/claude-code/abc757d1-3da3-42fb-bb7b-ffa293a4ba29.jsonl", FormatClaudeCode, whole, 1, prompt},
		{"claude-code tool call", rdrSessions + "/claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", FormatClaudeCode, whole, 1, ccCall},
		{"claude-code damaged file", rdrSessions + "/claude-code/57bb5674-54b1-4ce6-9157-2d341cd9bfc1.jsonl", FormatClaudeCode, whole, 1, ccCall},
		{"pi prompt", rdrSessions + "/pi/large-session.jsonl", FormatPi, whole, 2, piPrompt},
		{"pi tool call", rdrSessions + "/pi/session.jsonl", FormatPi, whole, 2, piCall},
		{"pi streamed tool call", rdrSessions + "/pi/before-compaction.jsonl", FormatPi, stream, 2, piCall},
		{"codex tool call", "../testdata/codex/rollout-2025-11-04T10-12-33-019a4e2c-7d1b-7c30-9f4e-2b8d6c1a9e57.jsonl", FormatCodex, whole, 1, cxCall},
		{"codex prompt", "../testdata/codex/rollout-2025-11-04T10-12-33-019a4e2c-7d1b-7c30-9f4e-2b8d6c1a9e57.jsonl", FormatCodex, whole, 1, cxPrompt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(tt.file)
			if err != nil {
				t.Skipf("real session not available: %v", err)
			}
			next := firstLine(t, data, tt.from, tt.next)
			clean, torn := tear(data, next-1)
			cs, err := tt.read(t, "clean.jsonl", clean, Options{Lenient: true})
			if err != nil {
				t.Fatal(err)
			}
			ts, err := tt.read(t, "torn.jsonl", torn, Options{Lenient: true})
			if err != nil {
				t.Fatal(err)
			}
			if ts.Format != tt.format || cs.Format != tt.format {
				t.Errorf("formats %s (clean), %s (torn); want %s", cs.Format, ts.Format, tt.format)
			}
			if d := cmp.Diff(tornFiguresOf(cs), tornFiguresOf(ts)); d != "" {
				t.Errorf("torn copy differs from the clean one (-clean +torn):\n%s", d)
			}
			if ts.Skipped != cs.Skipped+1 {
				t.Errorf("skipped %d; want the clean copy's %d + 1", ts.Skipped, cs.Skipped)
			}
			line := next // 1-based number of the torn line
			if !slices.ContainsFunc(ts.Warnings, func(w string) bool {
				return strings.Contains(w, fmt.Sprintf("line %d: skipped: a record cut short", line)) ||
					strings.Contains(w, fmt.Sprintf("torn.jsonl:%d: a record cut short", line))
			}) {
				t.Errorf("no warning names line %d's torn record: %q", line, ts.Warnings)
			}
			_, err = tt.read(t, "torn.jsonl", torn, Options{})
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != line || pe.File != "torn.jsonl" {
				t.Errorf("strict read: %v; want a *ParseError at torn.jsonl:%d", err, line)
			}
		})
	}
}
