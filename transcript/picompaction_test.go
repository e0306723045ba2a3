package transcript

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
)

// A pi compaction says where the tail it kept starts; Message.CompactionKept counts
// the messages from there to the compaction. v1 files give firstKeptEntryIndex (an
// index into the entries, the header 0, two objects on one line two entries), v2 on
// firstKeptEntryId; a reference the reader cannot place, or none, keeps every
// message with a warning; a compactionSummary message records no boundary. Both
// readers agree.
func TestPiCompactionKept(t *testing.T) {
	const v1Header = `{"type":"session","id":"s1","timestamp":"2026-01-01T00:00:00Z","cwd":"/w"}`
	v1 := func(body string) string {
		return `{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":` + body + `}`
	}
	user := func(text string) string {
		return v1(`{"role":"user","content":[{"type":"text","text":"` + text + `"}]}`)
	}
	call := func(id string) string {
		return v1(`{"role":"assistant","content":[{"type":"toolCall","id":"` + id + `","name":"bash","arguments":{"command":"ls"}}],"stopReason":"toolUse"}`)
	}
	res := func(id string) string {
		return v1(`{"role":"toolResult","toolCallId":"` + id + `","toolName":"bash","content":[{"type":"text","text":"out"}],"isError":false}`)
	}
	comp := func(ref string) string {
		return `{"type":"compaction","timestamp":"2026-01-01T00:00:00Z","summary":"the work so far"` + ref + `,"tokensBefore":9}`
	}
	// Entries (index: message index): 0 header; 1 user (0); 2 call c1 (1); 3
	// result (2); 4 model_change (none: the next message's, 3); 5 user (3); 6 call
	// c2 (4); 7 result (5); then the compaction (message 6).
	v1Entries := []string{v1Header, user("go"), call("c1"), res("c1"),
		`{"type":"model_change","timestamp":"2026-01-01T00:00:00Z","provider":"p","modelId":"m"}`,
		user("more"), call("c2"), res("c2")}
	lines := func(extra ...string) []byte {
		return []byte(strings.Join(append(append([]string{}, v1Entries...), extra...), "\n") + "\n")
	}
	tests := []struct {
		name     string
		data     []byte
		kept     int // CompactionKept of the compaction message, the last one
		warnings []string
	}{
		{"v1 index of a user message", lines(comp(`,"firstKeptEntryIndex":5`)), 3, nil},
		{"v1 index of an entry without a message", lines(comp(`,"firstKeptEntryIndex":4`)), 3, nil},
		{"v1 index of the first result", lines(comp(`,"firstKeptEntryIndex":3`)), 4, nil},
		{"v1 two objects on a line are two entries",
			[]byte(strings.Join([]string{v1Header, user("go"), call("c1") + " " + res("c1"), user("more"), call("c2"), res("c2"),
				comp(`,"firstKeptEntryIndex":4`)}, "\n") + "\n"), 3, nil},
		{"v1 index past the compaction", lines(comp(`,"firstKeptEntryIndex":40`)), 6,
			[]string{"line 9: compaction keeps from entry 40, which is no entry before it; every earlier message is taken as kept"}},
		{"no reference", lines(comp(``)), 6,
			[]string{"line 9: compaction names no kept entry (firstKeptEntryId, firstKeptEntryIndex); every earlier message is taken as kept"}},
		{"v3 id", []byte(strings.Join([]string{piHeader, piUser("e1", "", "go"), piCall("e2", "e1", `c1:bash {"command":"a"}`),
			piRes("e3", "e2", "c1", "x"), piUser("e4", "e3", "more"), piCall("e5", "e4", `c2:bash {"command":"b"}`), piRes("e6", "e5", "c2", "y"),
			`{"type":"compaction","id":"e7","parentId":"e6","timestamp":"2026-01-01T00:00:00Z","summary":"s","firstKeptEntryId":"e4","tokensBefore":9}`}, "\n") + "\n"), 3, nil},
		{"v3 unknown id", []byte(strings.Join([]string{piHeader, piUser("e1", "", "go"), piCall("e2", "e1", `c1:bash {"command":"a"}`),
			piRes("e3", "e2", "c1", "x"),
			`{"type":"compaction","id":"e7","parentId":"e3","timestamp":"2026-01-01T00:00:00Z","summary":"s","firstKeptEntryId":"zz","tokensBefore":9}`}, "\n") + "\n"), 3,
			[]string{`line 5: compaction keeps from entry "zz", which is no entry before it; every earlier message is taken as kept`}},
		{"v3 id on an abandoned branch", []byte(strings.Join([]string{piHeader, piUser("e1", "", "go"), piCall("e2", "e1", `c1:bash {"command":"a"}`),
			piRes("e3", "e2", "c1", "x"), piUser("e4", "e3", "branch a"), piUser("e5", "e3", "branch b"),
			`{"type":"compaction","id":"e6","parentId":"e5","timestamp":"2026-01-01T00:00:00Z","summary":"s","firstKeptEntryId":"e4","tokensBefore":9}`}, "\n") + "\n"), 4,
			[]string{"1 entries on abandoned branches were left out",
				`line 7: compaction keeps from entry "e4", which is not on the session's branch; every earlier message is taken as kept`}},
		{"compactionSummary message", lines(v1(`{"role":"compactionSummary","summary":"earlier work","tokensBefore":5}`)), 6, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, read := range []struct {
				name string
				f    func() (*Session, error)
			}{
				{"whole", func() (*Session, error) { return readPi("c.jsonl", tt.data, Options{}) }},
				{"stream", func() (*Session, error) { return readPiStream("c.jsonl", bytes.NewReader(tt.data), Options{}) }},
			} {
				s, err := read.f()
				if err != nil {
					t.Fatalf("%s: %v", read.name, err)
				}
				last := s.Messages[len(s.Messages)-1]
				if !last.AgentCompaction || last.CompactionKept != tt.kept {
					t.Errorf("%s: last message compaction %v, kept %d; want true, %d", read.name, last.AgentCompaction, last.CompactionKept, tt.kept)
				}
				if d := cmp.Diff(tt.warnings, s.Warnings); d != "" {
					t.Errorf("%s: warnings (-want +got):\n%s", read.name, d)
				}
			}
		})
	}
}

// TestCompactionKeptRealSessions checks CompactionKept on the real sessions that
// compacted: each compaction's kept tail starts at the line that holds the entry
// its firstKeptEntryIndex names, found independently with python3's
// json.JSONDecoder.raw_decode over every object of the file (the header entry 0;
// session.jsonl has lines of two objects, so its entry 355 is on line 356):
// before-compaction.jsonl's compactions (lines 360 and 629) keep from entries 293
// (line 294) and 551 (line 552), session.jsonl's (line 463) from entry 355 (line
// 356). Claude Code's compact summary (3af9b1a7, line 483) keeps nothing before it.
func TestCompactionKeptRealSessions(t *testing.T) {
	sessions := filepath.Join("..", "..", "shared", "sessions")
	tests := []struct {
		file string
		// compaction line -> line of the first message its tail kept (0: none kept)
		want map[int]int
	}{
		{"pi/before-compaction.jsonl", map[int]int{360: 294, 629: 552}},
		{"pi/session.jsonl", map[int]int{463: 356}},
		{"claude-code/3af9b1a7-6512-4883-ad18-320658ced099.jsonl", map[int]int{483: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(sessions, tt.file)
			s, err := ReadFile(path, Options{Lenient: true})
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					sessionfiles.Missing(t, "%s: %v", path, err)
				}
				t.Fatal(err)
			}
			got := map[int]int{}
			for _, m := range s.Messages {
				if !m.AgentCompaction {
					continue
				}
				got[m.Line] = 0
				if m.CompactionKept > 0 {
					got[m.Line] = s.Messages[m.Index-m.CompactionKept].Line
				}
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("compaction line -> first kept line (-want +got):\n%s", d)
			}
		})
	}
}
