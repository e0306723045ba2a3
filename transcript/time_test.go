package transcript

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// mustTime parses an RFC 3339 time for expectations.
func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

// TestMessageTimesRealSessions checks Message.Time on real sessions against the
// files' own timestamps, read independently with python3's json module: the first
// and last message of the session (Claude Code, whose c10f5964 file has one cut line
// that lenient mode skips; pi, whose session.jsonl ends in a compaction entry and
// before-compaction.jsonl in a user !command; Gemini CLI; OpenHands, whose last event
// is a finish action and whose times carry no zone and are read as UTC; Codex, whose
// last message is the run of lines 43-44), an assistant message merged from several
// lines (Claude Code lines 9-12 share message.id msg_016qGNxM52eK88Y92YbX4w9c,
// written 02:04:13.851 to 02:04:16.618; the Codex run of a reasoning item and two
// function calls at lines 11-13), and that every message got a time.
func TestMessageTimesRealSessions(t *testing.T) {
	sessions := filepath.Join("..", "..", "shared", "sessions")
	tests := []struct {
		file        string
		format      Format
		first, last string
		// line, lineTime: a message starting at that line and its time ("" for none).
		line     int
		lineTime string
	}{
		{filepath.Join(sessions, "claude-code", "c10f5964-20bd-4783-aa1a-30b06c8a702a.jsonl"), FormatClaudeCode,
			"2026-01-16T02:02:52.742Z", "2026-01-16T02:32:00.459Z", 9, "2026-01-16T02:04:13.851Z"},
		{filepath.Join(sessions, "pi", "session.jsonl"), FormatPi,
			"2025-12-17T19:39:17.548Z", "2025-12-17T21:23:29.721Z", 0, ""},
		{filepath.Join(sessions, "pi", "before-compaction.jsonl"), FormatPi,
			"2025-12-08T22:41:05.306Z", "2025-12-09T00:42:59.633Z", 0, ""},
		{filepath.Join(sessions, "gemini-cli", "session-2025-12-24T06-40-c330aea9.json"), FormatGemini,
			"2025-12-24T06:43:29.453Z", "2025-12-24T07:10:08.357Z", 0, ""},
		{filepath.Join(sessions, "openhands", "basic.json"), FormatOpenHands,
			"2025-01-27T22:44:56.900854Z", "2025-01-27T22:45:18.405685Z", 0, ""},
		{filepath.Join("..", "testdata", "codex", "rollout-2025-11-04T10-12-33-019a4e2c-7d1b-7c30-9f4e-2b8d6c1a9e57.jsonl"), FormatCodex,
			"2025-11-04T10:12:37.274Z", "2025-11-04T10:13:59.891Z", 11, "2025-11-04T10:12:55.507Z"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			s, err := ReadFile(tt.file, Options{Lenient: true})
			if err != nil {
				t.Fatal(err)
			}
			if s.Format != tt.format {
				t.Fatalf("format %s, want %s", s.Format, tt.format)
			}
			msgs := s.Messages
			if got, want := msgs[0].Time, mustTime(t, tt.first); !got.Equal(want) || got.Location() != time.UTC {
				t.Errorf("first message time %v, want %v (UTC)", got, want)
			}
			if got, want := msgs[len(msgs)-1].Time, mustTime(t, tt.last); !got.Equal(want) {
				t.Errorf("last message time %v, want %v", got, want)
			}
			for _, m := range msgs {
				if m.Time.IsZero() {
					t.Errorf("message %d (line %d, %s) has no time", m.Index, m.Line, m.Role)
				}
				if tt.line > 0 && m.Line == tt.line {
					if want := mustTime(t, tt.lineTime); !m.Time.Equal(want) {
						t.Errorf("message at line %d: time %v, want %v (its first line's)", tt.line, m.Time, want)
					}
					tt.line = -1
				}
			}
			if tt.line > 0 {
				t.Errorf("no message starts at line %d", tt.line)
			}
			for _, w := range s.Warnings {
				if strings.Contains(w, "timestamp") {
					t.Errorf("warning %q", w)
				}
			}
		})
	}
}

// TestMessageTimesNone checks that formats recording no times give zero times
// without warnings.
func TestMessageTimesNone(t *testing.T) {
	files := []string{
		filepath.Join("..", "..", "shared", "sessions", "mini-swe-agent", "github_issue.traj.json"),
		filepath.Join("..", "..", "shared", "sessions", "swe-agent", "marshmallow-1867.default.traj"),
		filepath.Join("..", "testdata", "openai", "chat-completions.json"),
		filepath.Join("..", "testdata", "bad", "anthropic-healthy.json"),
		// The legacy Codex form writes no timestamp on its items.
		filepath.Join("..", "testdata", "codex", "rollout-2025-08-14T16-05-41-5b1e0c2a-93f4-4d8e-a1c7-2f6b8d0e4a39.jsonl"),
	}
	for _, f := range files {
		s, err := ReadFile(f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range s.Messages {
			if !m.Time.IsZero() {
				t.Errorf("%s: message %d has time %v", f, m.Index, m.Time)
			}
		}
		if len(s.Messages) == 0 {
			t.Errorf("%s: no messages", f)
		}
	}
}

// TestMessageTimesBad checks that a timestamp that does not parse leaves the time zero
// with one warning naming file, line and field, and that absent and null timestamps
// are zero without a warning.
func TestMessageTimesBad(t *testing.T) {
	const msg = " is not an RFC 3339 date and time; the message's time is left unknown"
	tests := []struct {
		name, file, data string
		want             []string // each message's time, "" for zero
		warnings         []string
	}{
		{"claude", "bad.jsonl", strings.Join([]string{
			`{"parentUuid":null,"uuid":"u1","sessionId":"s","type":"user","timestamp":"2026-01-16T02:02:52.742Z","message":{"role":"user","content":"hi"}}`,
			`{"parentUuid":"u1","uuid":"a1","sessionId":"s","type":"assistant","timestamp":"yesterday","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"x"}]}}`,
			`{"parentUuid":"a1","uuid":"u2","sessionId":"s","type":"user","timestamp":1763681581544,"message":{"role":"user","content":"again"}}`,
			`{"parentUuid":"u2","uuid":"a2","sessionId":"s","type":"assistant","timestamp":null,"message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"y"}]}}`,
			`{"parentUuid":"a2","uuid":"u3","sessionId":"s","type":"user","message":{"role":"user","content":"end"}}`,
		}, "\n"),
			[]string{"2026-01-16T02:02:52.742Z", "", "", "", ""},
			[]string{`bad.jsonl:2: field timestamp: "yesterday"` + msg, `bad.jsonl:3: field timestamp: 1763681581544` + msg}},
		{"pi", "bad-pi.jsonl", strings.Join([]string{
			`{"type":"session","id":"s","timestamp":"2026-01-01T00:00:00Z","cwd":"/w"}`,
			`{"type":"message","timestamp":"2026-01-01T00:00:01+01:00","message":{"role":"user","content":"hi"}}`,
			`{"type":"message","timestamp":"2026-13-01T00:00:00Z","message":{"role":"assistant","content":[{"type":"text","text":"x"}]}}`,
		}, "\n"),
			[]string{"2025-12-31T23:00:01Z", ""},
			[]string{`bad-pi.jsonl:3: field timestamp: "2026-13-01T00:00:00Z"` + msg}},
		{"gemini", "bad-gemini.json", `{"sessionId":"s","projectHash":"h","messages":[
  {"id":"1","timestamp":"2025-12-24T06:43:29.453Z","type":"user","content":"hi"},
  {"id":"2","timestamp":"soon","type":"gemini","content":"x"}
]}`,
			[]string{"2025-12-24T06:43:29.453Z", ""},
			[]string{`bad-gemini.json:3: field messages.1.timestamp: "soon"` + msg}},
		{"openhands", "bad-oh.json", `[
  {"id":0,"timestamp":"2025-01-27T22:44:56.900854","source":"user","message":"m","action":"message","args":{"content":"hi"}},
  {"id":1,"timestamp":"27/01/2025","source":"agent","message":"m","action":"message","args":{"content":"ok"}}
]`,
			[]string{"2025-01-27T22:44:56.900854Z", ""},
			[]string{`bad-oh.json:3: field 1.timestamp: "27/01/2025"` + msg}},
		{"codex", "bad-codex.jsonl", strings.Join([]string{
			`{"timestamp":"2025-11-04T10:12:37.274Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}}`,
			`{"timestamp":"","type":"response_item","payload":{"type":"reasoning","summary":[]}}`,
			`{"timestamp":"2025-11-04T10:12:39Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}}`,
		}, "\n"),
			[]string{"2025-11-04T10:12:37.274Z", ""},
			[]string{`bad-codex.jsonl:2: field timestamp: ""` + msg}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Read(tt.file, []byte(tt.data), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range s.Messages {
				if m.Time.IsZero() {
					got = append(got, "")
				} else {
					got = append(got, m.Time.Format(time.RFC3339Nano))
				}
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("times (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.warnings, s.Warnings); d != "" {
				t.Errorf("warnings (-want +got):\n%s", d)
			}
		})
	}
}
