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

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

// rdrSessions is the shared real-session folder, relative to this package.
const rdrSessions = "../../shared/sessions"

// rdrRead names one call whose normalised read (or write) the test checks.
type rdrRead struct {
	action toolcall.Action
	path   string
	rng    toolcall.Range
}

// rdrWant holds the figures a real session must read back as. The id counts were
// taken over the whole file with python3 (json per line, or a raw_decode stream for pi,
// skipping malformed lines) — not with this reader.
type rdrWant struct {
	file       string
	strictLine int // first malformed line (strict read fails there); 0 when the file is clean
	skipped    int // lines a lenient read skips
	messages   int
	steps      int // assistant messages after merging split lines
	calls      int
	ids        int // distinct call ids
	answered   int // distinct call ids with a result somewhere in the file
	outputs    int
	unanswered int
	meta       int
	taskPrefix string
	id, cwd    string
	reads      map[string]rdrRead // call id → its normalised action, path and range
	errs       []string           // call ids whose output must be an error
}

var claudeWants = []rdrWant{
	{
		file: "claude-code/3af9b1a7-6512-4883-ad18-320658ced099.jsonl", strictLine: 4, skipped: 35,
		// 168 ids, 152 with a result: the 35 truncated lines (redaction cut them) hold the
		// other results, so 16 calls stay unanswered.
		messages: 277, steps: 114, calls: 168, ids: 168, answered: 152, outputs: 152, unanswered: 16, meta: 2,
		taskPrefix: "sync you repo (M-Claude)", id: "3af9b1a7-6512-4883-ad18-320658ced099", cwd: "/Users/[USER]",
		reads: map[string]rdrRead{
			"toolu_01DDzuWBWybz54PfW8huCykn": {toolcall.ActionRead, "/Users/[USER]/Documents/M-Claude/.gitleaks.toml", toolcall.Range{Start: 200, End: 220}},
			"toolu_013CgYSUDFcbKTTe5zZvmzGC": {toolcall.ActionRead, "/Users/[USER]/Documents/M-Claude/.github/workflows/test.yml", toolcall.Range{Start: 1, End: 30}},
			"toolu_019msn3KvYS9dZeHku5yHJNx": {toolcall.ActionRead, "/Users/[USER]/Documents/M-Claude/CHAT_LOGS-markdown/d435e688-a664-4dba-b2e7-786c1dde4a4c.md", toolcall.Range{}},
		},
		errs: []string{"toolu_01Be1nJrqAj3zhvLBYZX4Tao"}, // Edit: "String to replace not found"
	},
	{
		file: "claude-code/57bb5674-54b1-4ce6-9157-2d341cd9bfc1.jsonl", strictLine: 76, skipped: 6,
		messages: 89, steps: 31, calls: 56, ids: 56, answered: 54, outputs: 54, unanswered: 2, meta: 1,
		taskPrefix: "this is a tmux term with a footer.", id: "57bb5674-54b1-4ce6-9157-2d341cd9bfc1", cwd: "/Users/[USER]",
		reads: map[string]rdrRead{
			"toolu_01Ej9wSdYTznfQ3PGJ3vxTAZ": {toolcall.ActionRead, "/Users/[USER]/.zprofile", toolcall.Range{}},
		},
	},
	{
		// Old format: the two subagents' lines (isSidechain, own roots) are interleaved
		// with the main thread. The reader keeps file order, so all 21 calls are there;
		// the task comes from the main thread's slash command.
		file:     "claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
		messages: 45, steps: 20, calls: 21, ids: 21, answered: 21, outputs: 21, unanswered: 0, meta: 2,
		taskPrefix: "/orchestrator @CLAUDE.md", id: "5c0375b4-57a5-4f26-b12d-d022ee4e51b7", cwd: "/path/to/Demo",
		reads: map[string]rdrRead{
			"toolu_01YGfgPmLThZtkbtqRpvYMVW": {toolcall.ActionRead, "/path/to/Demo/CLAUDE.md", toolcall.Range{}},
			"toolu_018awfyyafbNVMNu6kfSRuKi": {toolcall.ActionEdit, "/path/to/Demo/CLAUDE.md", toolcall.Range{}},
		},
	},
	{
		file:     "claude-code/abc757d1-3da3-42fb-bb7b-ffa293a4ba29.jsonl",
		messages: 190, steps: 94, calls: 92, ids: 92, answered: 91, outputs: 91, unanswered: 1, meta: 0,
		taskPrefix: "review, proposal improvemets", id: "abc757d1-3da3-42fb-bb7b-ffa293a4ba29",
		cwd: `C:\Users\Mischa\.claude-worktrees\M-Claude\unruffled-mcclintock`,
		reads: map[string]rdrRead{
			// offset 0, limit 50: Claude Code numbers the lines from 0, but they are the
			// file's lines 1-50 (toolUseResult startLine 0, numLines 50, totalLines 216).
			"toolu_018BzuConiC9jpxWNqbyEPiz": {toolcall.ActionRead, "/c/Users/Mischa/.claude-worktrees/M-Claude/unruffled-mcclintock/scripts/convert_to_markdown.py", toolcall.Range{Start: 1, End: 50}},
			"toolu_01MxsoUbLdBT8e2xmHGHLaqU": {toolcall.ActionRead, "/c/Users/Mischa/.claude-worktrees/M-Claude/unruffled-mcclintock/scripts/convert_to_markdown.py", toolcall.Range{Start: 17, End: 46}},
			"toolu_01D8e5ofxe7BRVXgjUMN2Rod": {toolcall.ActionRead, "/c/Users/Mischa/.claude-worktrees/M-Claude/unruffled-mcclintock/.github/workflows/test.yml", toolcall.Range{}},
		},
	},
	{
		file:     "claude-code/agent-abc3cb6.jsonl",
		messages: 51, steps: 11, calls: 39, ids: 39, answered: 39, outputs: 39, unanswered: 0, meta: 0,
		taskPrefix: "Explore this repository thoroughly", id: "abc757d1-3da3-42fb-bb7b-ffa293a4ba29",
		cwd: `C:\Users\Mischa\.claude-worktrees\M-Claude\unruffled-mcclintock`,
		reads: map[string]rdrRead{
			"toolu_01REq16BWafxpmPTLWV6wncF": {toolcall.ActionRead, "/c/Users/Mischa/.claude-worktrees/M-Claude/unruffled-mcclintock/docs/M-SECURITY.md", toolcall.Range{}},
		},
	},
	{
		file: "claude-code/c10f5964-20bd-4783-aa1a-30b06c8a702a.jsonl", strictLine: 6, skipped: 5,
		messages: 95, steps: 40, calls: 46, ids: 46, answered: 45, outputs: 45, unanswered: 1, meta: 4,
		taskPrefix: "resume last session", id: "c10f5964-20bd-4783-aa1a-30b06c8a702a", cwd: "/Users/[USER]",
		reads: map[string]rdrRead{
			"toolu_01Rye6HLqyPe9caMFbjhsHfs": {toolcall.ActionRead, "/Users/[USER]/Applications/Claude Tmux.app/Contents/Info.plist", toolcall.Range{}},
		},
	},
	{
		// Its sessionId differs from the file name: the file continues another session.
		file:     "claude-code/ff33b5b0-cc51-4271-a3eb-545a85882e5f.jsonl",
		messages: 70, steps: 24, calls: 45, ids: 45, answered: 44, outputs: 44, unanswered: 1, meta: 0,
		taskPrefix: "when running gitleaks scan", id: "f225835b-3612-4093-903f-bd4538fb7cb9", cwd: "/home/[USER]/M-Claude",
		reads: map[string]rdrRead{
			"toolu_01VqFqoi6L3UgPLKpKumuZy8": {toolcall.ActionRead, "/home/[USER]/M-Claude/Docs/GITLEAKS-MAX-STRICT.md", toolcall.Range{Start: 1, End: 250}},
			"toolu_01NStxwhPFL92Vv6eve8TrTi": {toolcall.ActionRead, "/home/[USER]/M-Claude/.gitleaks.toml", toolcall.Range{Start: 1, End: 100}},
			"toolu_01LSeQUvaVpLn9YguRjLLtWi": {toolcall.ActionRead, "/home/[USER]/M-Claude/.gitleaks.toml", toolcall.Range{}},
		},
	},
}

// rdrFigures is what rdrCheckReal compares.
type rdrFigures struct {
	Skipped, Messages, Steps, Calls, IDs, Answered, Outputs, Unanswered, Meta int
	ID, Cwd                                                                   string
}

// rdrCheckReal reads one real session and checks it against want. resultIDs are the
// call ids that have a result somewhere in the file, found by an independent scan.
func rdrCheckReal(t *testing.T, format Format, w rdrWant, resultIDs func([]byte) map[string]bool) *Session {
	t.Helper()
	path := filepath.Join(rdrSessions, w.file)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Detect(path, data); err != nil || got != format {
		t.Errorf("Detect = %q, %v; want %q", got, err, format)
	}
	_, err = Read(path, data, Options{Format: format})
	if w.strictLine == 0 && err != nil {
		t.Fatalf("strict read: %v", err)
	}
	if w.strictLine != 0 {
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != w.strictLine || !errors.Is(err, ErrMalformed) {
			t.Fatalf("strict read error = %v; want a *ParseError at line %d", err, w.strictLine)
		}
	}
	s, err := Read(path, data, Options{Format: format, Lenient: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	answered := map[string]bool{}
	for _, c := range s.Calls {
		ids[c.ID] = true
		if c.Output != nil {
			answered[c.ID] = true
		}
	}
	meta := 0
	for _, m := range s.Messages {
		if m.Meta {
			meta++
		}
	}
	got := rdrFigures{s.Skipped, len(s.Messages), s.Steps(), len(s.Calls), len(ids), len(answered), len(s.Outputs()), len(s.Unanswered()), meta, s.ID, s.Cwd}
	want := rdrFigures{w.skipped, w.messages, w.steps, w.calls, w.ids, w.answered, w.outputs, w.unanswered, w.meta, w.id, w.cwd}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("figures (-want +got):\n%s", d)
	}
	if !strings.HasPrefix(s.Task, w.taskPrefix) {
		t.Errorf("Task = %.80q; want prefix %q", s.Task, w.taskPrefix)
	}
	// Every call whose result is anywhere in the file keeps it, paired by id; no
	// output is paired with a call of another id.
	results := resultIDs(data)
	for _, c := range s.Calls {
		if results[c.ID] && c.Output == nil {
			t.Errorf("call %s (line %d) lost its result", c.ID, s.Messages[c.Message].Line)
		}
		if c.Output != nil && (c.Output.CallID != c.ID || c.Output.Call != c) {
			t.Errorf("call %s paired with output %s", c.ID, c.Output.CallID)
		}
	}
	for _, o := range s.Outputs() {
		if o.Call == nil && len(s.Orphans) == 0 {
			t.Errorf("output %s has no call", o.Key)
		}
	}
	for id, r := range w.reads {
		c := rdrCall(s, id)
		if c == nil {
			t.Errorf("no call %s", id)
			continue
		}
		if d := cmp.Diff(r, rdrRead{c.Action, c.Path, c.Range}, cmp.AllowUnexported(rdrRead{})); d != "" {
			t.Errorf("call %s (-want +got):\n%s", id, d)
		}
	}
	for _, id := range w.errs {
		if c := rdrCall(s, id); c == nil || c.Output == nil || !c.Output.IsError {
			t.Errorf("call %s: output not marked as an error", id)
		}
	}
	return s
}

func rdrCall(s *Session, id string) *ToolCall {
	for _, c := range s.Calls {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// claudeResultIDs scans a Claude Code file line by line with a generic JSON decode and
// returns the tool_use_id of every tool_result block in a well-formed line.
func claudeResultIDs(data []byte) map[string]bool {
	out := map[string]bool{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var v struct {
			Message struct {
				Content any `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(line, &v) != nil {
			continue
		}
		blocks, _ := v.Message.Content.([]any)
		for _, b := range blocks {
			if m, ok := b.(map[string]any); ok && m["type"] == "tool_result" {
				id, _ := m["tool_use_id"].(string)
				out[id] = true
			}
		}
	}
	return out
}

func TestClaudeRealSessions(t *testing.T) {
	for _, w := range claudeWants {
		t.Run(filepath.Base(w.file), func(t *testing.T) {
			rdrCheckReal(t, FormatClaudeCode, w, claudeResultIDs)
		})
	}
}

// A message split over several lines sharing message.id is one Message at its first
// line; the tool_result lines of its parallel calls (each hanging off its own tool_use
// line) all keep their results.
func TestClaudeMergesSplitMessages(t *testing.T) {
	s, err := ReadFile(filepath.Join(rdrSessions, "claude-code/agent-abc3cb6.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	type msg struct {
		Role  Role
		Line  int
		Calls []string
		Outs  []string
	}
	var got []msg
	for _, m := range s.Messages[:5] {
		g := msg{Role: m.Role, Line: m.Line}
		for _, c := range m.Calls {
			g.Calls = append(g.Calls, c.ID)
		}
		for _, o := range m.Outputs {
			g.Outs = append(g.Outs, o.CallID)
		}
		got = append(got, g)
	}
	want := []msg{
		{Role: RoleUser, Line: 1},
		{Role: RoleAssistant, Line: 2, Calls: []string{"toolu_01UuGFajECdYFvV4KvkRa372", "toolu_015B3hrfv6ChErztB3AWPupj", "toolu_01K4n8ui8avmHM9EXN8CxxqG"}},
		{Role: RoleTool, Line: 6, Outs: []string{"toolu_015B3hrfv6ChErztB3AWPupj"}},
		{Role: RoleTool, Line: 7, Outs: []string{"toolu_01UuGFajECdYFvV4KvkRa372"}},
		{Role: RoleTool, Line: 8, Outs: []string{"toolu_01K4n8ui8avmHM9EXN8CxxqG"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("first messages (-want +got):\n%s", d)
	}
}

// ---- hand-made Claude Code lines ----

// ccT builds one Claude Code line. parent "" is null; message is the raw message JSON;
// extra is appended inside the object (",\"isMeta\":true").
func ccT(typ, uuid, parent, message, extra string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	return fmt.Sprintf(`{"parentUuid":%s,"isSidechain":false,"cwd":"/w","sessionId":"s1","type":%q,"message":%s,"uuid":%q%s}`, p, typ, message, uuid, extra)
}

func ccPrompt(uuid, parent, text string) string {
	b, _ := json.Marshal(text)
	return ccT("user", uuid, parent, `{"role":"user","content":`+string(b)+`}`, "")
}

func ccText(uuid, parent, msgID, text string) string {
	b, _ := json.Marshal(text)
	return ccT("assistant", uuid, parent, `{"id":"`+msgID+`","role":"assistant","content":[{"type":"text","text":`+string(b)+`}]}`, "")
}

func ccUse(uuid, parent, msgID, id, name, input string) string {
	return ccT("assistant", uuid, parent, `{"id":"`+msgID+`","role":"assistant","content":[{"type":"tool_use","id":"`+id+`","name":"`+name+`","input":`+input+`}]}`, "")
}

func ccResult(uuid, parent, id, content, extra string) string {
	return ccT("user", uuid, parent, `{"role":"user","content":[{"tool_use_id":"`+id+`","type":"tool_result","content":`+content+`}]}`, extra)
}

func ccFile(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// rdrShape is a compact view of a session for comparisons.
type rdrShape struct {
	Role  Role
	Line  int
	Text  string
	Meta  bool
	Calls []string
	Outs  []string
}

func rdrShapes(s *Session) []rdrShape {
	var out []rdrShape
	for _, m := range s.Messages {
		sh := rdrShape{Role: m.Role, Line: m.Line, Text: m.Text, Meta: m.Meta}
		for _, c := range m.Calls {
			sh.Calls = append(sh.Calls, c.ID)
		}
		for _, o := range m.Outputs {
			sh.Outs = append(sh.Outs, o.Key+"="+o.Text)
		}
		out = append(out, sh)
	}
	return out
}

// A rewind re-parents a new prompt at an earlier point: the abandoned branch (prompt
// u2 and what followed) goes; the parallel reads before it, each result hanging off its
// own tool_use line, all stay with their results.
func TestClaudeRewindDropsOnlyTheAbandonedBranch(t *testing.T) {
	data := ccFile(
		ccPrompt("u1", "", "fix the bug"),
		ccText("a1", "u1", "m1", "Looking at both files."),
		ccUse("a2", "a1", "m1", "t1", "Read", `{"file_path":"/w/a.go"}`),
		ccUse("a3", "a2", "m1", "t2", "Read", `{"file_path":"/w/b.go"}`),
		ccResult("r1", "a2", "t1", `"package a"`, ""),
		ccResult("r2", "a3", "t2", `"package b"`, ""),
		ccText("a4", "r2", "m2", "Both read. Edit a.go?"),
		ccPrompt("u2", "a4", "yes, edit a.go"), // abandoned from here …
		ccUse("a5", "u2", "m3", "t3", "Edit", `{"file_path":"/w/a.go","old_string":"a","new_string":"b"}`),
		ccResult("r3", "a5", "t3", `"ok"`, ""),
		ccText("a6", "r3", "m4", "done"), // … to here
		ccPrompt("u3", "a4", "no, edit b.go instead"),
		ccUse("a7", "u3", "m5", "t4", "Edit", `{"file_path":"/w/b.go","old_string":"a","new_string":"b"}`),
		ccResult("r4", "a7", "t4", `"ok"`, ""),
		ccText("a8", "r4", "m6", "done with b.go"),
	)
	s, err := readClaude("rewind.jsonl", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rdrShape{
		{Role: RoleUser, Line: 1, Text: "fix the bug"},
		{Role: RoleAssistant, Line: 2, Text: "Looking at both files.", Calls: []string{"t1", "t2"}},
		{Role: RoleTool, Line: 5, Outs: []string{"t1=package a"}},
		{Role: RoleTool, Line: 6, Outs: []string{"t2=package b"}},
		{Role: RoleAssistant, Line: 7, Text: "Both read. Edit a.go?"},
		{Role: RoleUser, Line: 12, Text: "no, edit b.go instead"},
		{Role: RoleAssistant, Line: 13, Calls: []string{"t4"}},
		{Role: RoleTool, Line: 14, Outs: []string{"t4=ok"}},
		{Role: RoleAssistant, Line: 15, Text: "done with b.go"},
	}
	if d := cmp.Diff(want, rdrShapes(s)); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	if len(s.Unanswered()) != 0 {
		t.Errorf("unanswered calls: %d", len(s.Unanswered()))
	}
	if d := cmp.Diff([]string{"4 lines on branches abandoned by a rewind were left out"}, s.Warnings); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
	if s.Task != "fix the bug" {
		t.Errorf("Task = %q", s.Task)
	}
}

// When the conversation continues from the first parallel result (not the last), the
// other tool_use line's branch holds only that call and its result: it is a
// continuation of the same message, not a rewind, and nothing is dropped.
func TestClaudeParallelContinuationIsNotARewind(t *testing.T) {
	data := ccFile(
		ccPrompt("u1", "", "check both"),
		ccUse("a1", "u1", "m1", "t1", "Bash", `{"command":"a"}`),
		ccUse("a2", "a1", "m1", "t2", "Bash", `{"command":"b"}`),
		ccResult("r1", "a1", "t1", `"A"`, ""),
		ccResult("r2", "a2", "t2", `"B"`, ""),
		ccText("a3", "r1", "m2", "both fine"),
		ccPrompt("u2", "a3", "thanks"),
	)
	s, err := readClaude("par.jsonl", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rdrShape{
		{Role: RoleUser, Line: 1, Text: "check both"},
		{Role: RoleAssistant, Line: 2, Calls: []string{"t1", "t2"}},
		{Role: RoleTool, Line: 4, Outs: []string{"t1=A"}},
		{Role: RoleTool, Line: 5, Outs: []string{"t2=B"}},
		{Role: RoleAssistant, Line: 6, Text: "both fine"},
		{Role: RoleUser, Line: 7, Text: "thanks"},
	}
	if d := cmp.Diff(want, rdrShapes(s)); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings %q", s.Warnings)
	}
}

// The tree is a structure the reader walks, never recursively: a parentUuid cycle and
// a compaction boundary (parentUuid null, logicalParentUuid) must neither hang nor drop
// the history before them.
func TestClaudeCycleAndCompaction(t *testing.T) {
	t.Run("cycle", func(t *testing.T) {
		data := ccFile(
			ccPrompt("x", "y", "first"),
			ccText("y", "x", "m1", "second"),
			ccPrompt("z", "y", "third"),
		)
		s, err := readClaude("cycle.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(s.Messages); got != 3 {
			t.Errorf("messages = %d; want 3", got)
		}
		if d := cmp.Diff([]string{"3 lines sit on a parentUuid cycle; they are kept in file order"}, s.Warnings); d != "" {
			t.Errorf("warnings (-want +got):\n%s", d)
		}
	})
	t.Run("compaction", func(t *testing.T) {
		data := ccFile(
			ccPrompt("u1", "", "port the parser"),
			ccUse("a1", "u1", "m1", "t1", "Read", `{"file_path":"/w/p.go"}`),
			ccResult("r1", "a1", "t1", `"package p"`, ""),
			ccText("a2", "r1", "m2", "read it"),
			`{"parentUuid":null,"logicalParentUuid":"a2","type":"system","subtype":"compact_boundary","uuid":"b1","sessionId":"s1"}`,
			ccT("user", "c1", "b1", `{"role":"user","content":"This session is being continued from a previous conversation."}`, `,"isCompactSummary":true`),
			ccPrompt("u2", "c1", "go on"),
			ccUse("a3", "u2", "m3", "t2", "Read", `{"file_path":"/w/q.go"}`),
			ccResult("r2", "a3", "t2", `"package q"`, ""),
		)
		s, err := readClaude("compact.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var lines []int
		var meta []bool
		for _, m := range s.Messages {
			lines = append(lines, m.Line)
			meta = append(meta, m.Meta)
		}
		if d := cmp.Diff([]int{1, 2, 3, 4, 6, 7, 8, 9}, lines); d != "" {
			t.Errorf("lines (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]bool{false, false, false, false, true, false, false, false}, meta); d != "" {
			t.Errorf("meta (-want +got):\n%s", d)
		}
		if len(s.Warnings) != 0 || len(s.Unanswered()) != 0 {
			t.Errorf("warnings %q, unanswered %d", s.Warnings, len(s.Unanswered()))
		}
	})
}

// Bad input: an error naming the line in strict mode, a skipped line and a warning in
// lenient mode, never a panic.
func TestClaudeBadInput(t *testing.T) {
	good := []string{
		ccPrompt("u1", "", "list files"),
		ccUse("a1", "u1", "m1", "t1", "Bash", `{"command":"ls"}`),
		ccResult("r1", "a1", "t1", `"a.go\nb.go"`, ""),
	}
	tests := []struct {
		name      string
		data      []byte
		line      int
		field     string
		msgPart   string
		messages  int // in lenient mode
		warnParts []string
	}{
		{
			name: "truncated last line",
			data: []byte(strings.Join(good, "\n") + "\n" + ccText("a2", "r1", "m2", "the files are")[:60]),
			line: 4, msgPart: "unexpected end", messages: 3, warnParts: []string{"line 4: skipped"},
		},
		{
			name: "line is a JSON array",
			data: ccFile(good[0], `["user","assistant"]`, good[1], good[2]),
			line: 2, msgPart: "found a JSON array", messages: 3, warnParts: []string{"line 2: skipped"},
		},
		{
			name: "user line without a message",
			data: ccFile(good[0], `{"type":"user","uuid":"q","parentUuid":"u1"}`, good[1], good[2]),
			line: 2, field: "message", msgPart: "without a message", messages: 3, warnParts: []string{"line 2: skipped: field message"},
		},
		{
			name: "tool_result without tool_use_id",
			data: ccFile(good[0], good[1], ccT("user", "r1", "a1", `{"content":[{"type":"tool_result","content":"x"}]}`, "")),
			line: 3, field: "message.content.0.tool_use_id", msgPart: "without a tool_use_id", messages: 2,
			warnParts: []string{"line 3: skipped: field message.content.0.tool_use_id"},
		},
		{
			name: "content of the wrong type",
			data: ccFile(good[0], ccT("assistant", "a1", "u1", `{"id":"m1","content":42}`, ""), good[2]),
			line: 2, field: "message.content", msgPart: "string or an array", messages: 2,
			warnParts: []string{"line 2: skipped", "no earlier call"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readClaude("bad.jsonl", tt.data, Options{})
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("strict error = %v; want *ParseError", err)
			}
			if pe.File != "bad.jsonl" || pe.Line != tt.line || pe.Field != tt.field || !strings.Contains(pe.Msg, tt.msgPart) {
				t.Errorf("error = %+v; want line %d field %q msg ~%q", *pe, tt.line, tt.field, tt.msgPart)
			}
			s, err := readClaude("bad.jsonl", tt.data, Options{Lenient: true})
			if err != nil {
				t.Fatal(err)
			}
			if s.Skipped != 1 || len(s.Messages) != tt.messages {
				t.Errorf("lenient: skipped %d, messages %d; want 1, %d", s.Skipped, len(s.Messages), tt.messages)
			}
			for _, part := range tt.warnParts {
				if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, part) }) {
					t.Errorf("warnings %q lack %q", s.Warnings, part)
				}
			}
		})
	}
}

func TestClaudeEdgeCases(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		for _, data := range [][]byte{nil, []byte("\n \n"), ccFile(`{"type":"summary","summary":"x","leafUuid":"u"}`)} {
			if _, err := readClaude("e.jsonl", data, Options{}); !errors.Is(err, ErrEmpty) {
				t.Errorf("%q: err = %v; want ErrEmpty", data, err)
			}
		}
		if _, err := Read("e.jsonl", []byte("  \n"), Options{}); !errors.Is(err, ErrEmpty) {
			t.Errorf("Read: err = %v; want ErrEmpty", err)
		}
	})
	t.Run("invalid UTF-8 in a tool result", func(t *testing.T) {
		data := ccFile(
			ccPrompt("u1", "", "cat the binary"),
			ccUse("a1", "u1", "m1", "t1", "Bash", `{"command":"cat x.bin"}`),
			ccResult("r1", "a1", "t1", "\"head \xff\xfe tail\"", ""),
		)
		s, err := readClaude("utf8.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		o := s.Outputs()[0]
		if o.Text != "head \ufffd\ufffd tail" {
			t.Errorf("Text = %q", o.Text)
		}
		out, err := s.Rewrite(map[string]string{"t1": "[pruned]"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out, []byte(`"content":"[pruned]"`)) || bytes.Contains(out, []byte("\xff")) {
			t.Errorf("rewritten line: %q", bytes.Split(out, []byte("\n"))[2])
		}
	})
	t.Run("duplicate tool_use ids", func(t *testing.T) {
		data := ccFile(
			ccPrompt("u1", "", "run it twice"),
			ccUse("a1", "u1", "m1", "t1", "Bash", `{"command":"make"}`),
			ccResult("r1", "a1", "t1", `"first"`, ""),
			ccUse("a2", "r1", "m2", "t1", "Bash", `{"command":"make"}`),
			ccResult("r2", "a2", "t1", `"second"`, ""),
		)
		s, err := readClaude("dup.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range s.Calls {
			got = append(got, fmt.Sprintf("%s@%d->%s:%s", c.ID, c.Message, c.Output.Key, c.Output.Text))
		}
		if d := cmp.Diff([]string{"t1@1->t1:first", "t1@3->t1#2:second"}, got); d != "" {
			t.Errorf("pairs (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{`line 4: call id "t1" used again`}, s.Warnings); d != "" {
			t.Errorf("warnings (-want +got):\n%s", d)
		}
	})
	t.Run("tool_result before its call", func(t *testing.T) {
		data := ccFile(
			ccPrompt("u1", "", "go"),
			ccResult("r0", "u1", "t9", `"too early"`, ""),
			ccUse("a1", "r0", "m1", "t9", "Bash", `{"command":"date"}`),
		)
		s, err := readClaude("early.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Orphans) != 1 || s.Orphans[0].CallID != "t9" || s.Orphans[0].Call != nil {
			t.Errorf("orphans = %+v", s.Orphans)
		}
		if u := s.Unanswered(); len(u) != 1 || u[0].ID != "t9" {
			t.Errorf("unanswered = %v", u)
		}
		if d := cmp.Diff([]string{`line 2: tool result for call id "t9" has no earlier call`}, s.Warnings); d != "" {
			t.Errorf("warnings (-want +got):\n%s", d)
		}
	})
	t.Run("huge output", func(t *testing.T) {
		big := strings.Repeat("0123456789abcdef ", 300_000) // 5.1 MB
		data := ccFile(
			ccPrompt("u1", "", "dump"),
			ccUse("a1", "u1", "m1", "t1", "Bash", `{"command":"dump"}`),
			ccResult("r1", "a1", "t1", `"`+big+`"`, ""),
		)
		s, err := readClaude("big.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		o := s.Outputs()[0]
		if o.Text != big || o.Tokens < 100_000 {
			t.Errorf("len %d, tokens %d", len(o.Text), o.Tokens)
		}
		out, err := s.Rewrite(map[string]string{"t1": "stub"})
		if err != nil || len(out) > 2000 {
			t.Errorf("rewrite: %d bytes, %v", len(out), err)
		}
	})
}

// Meta messages and the task: wrappers and isMeta lines are Meta; the task is the first
// plain-string prompt of the main thread (a slash command's arguments count).
func TestClaudeMetaAndTask(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		task  string
		meta  []bool
	}{
		{
			name: "isMeta and wrappers skipped",
			lines: []string{
				ccT("user", "u0", "", `{"role":"user","content":"<local-command-caveat>Caveat: …</local-command-caveat>"}`, `,"isMeta":true`),
				ccPrompt("u1", "u0", "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>"),
				ccPrompt("u2", "u1", "<local-command-stdout></local-command-stdout>"),
				ccPrompt("u3", "u2", "add a --verbose flag"),
			},
			task: "add a --verbose flag",
			meta: []bool{true, true, true, false},
		},
		{
			name: "slash command with arguments",
			lines: []string{
				ccPrompt("u1", "", "<command-message>review is running…</command-message>\n<command-name>/review</command-name>\n<command-args>the auth change</command-args>"),
				ccT("user", "u2", "u1", `{"role":"user","content":[{"type":"text","text":"Review the change …"}]}`, `,"isMeta":true`),
			},
			task: "/review the auth change",
			meta: []bool{true, true},
		},
		{
			name: "array prompt and interrupt marker",
			lines: []string{
				ccT("user", "u1", "", `{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]}`, ""),
				ccT("user", "u2", "u1", `{"role":"user","content":[{"type":"image","source":{}},{"type":"text","text":"fix this"}]}`, ""),
			},
			task: "fix this", // builder fallback: no plain-string prompt
			meta: []bool{true, false},
		},
		{
			name: "sidechain prompt interleaved in a main file",
			lines: []string{
				ccT("user", "s1", "", `{"role":"user","content":"subagent: scan the repo"}`, `,"isSidechain":true`),
				ccPrompt("u1", "", "ship it"),
			},
			task: "ship it",
			meta: []bool{false, false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// ccT writes "isSidechain":false first; a later duplicate key wins in
			// encoding/json, which is what the sidechain case relies on.
			s, err := readClaude("t.jsonl", ccFile(tt.lines...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var meta []bool
			for _, m := range s.Messages {
				meta = append(meta, m.Meta)
			}
			if s.Task != tt.task {
				t.Errorf("Task = %q; want %q", s.Task, tt.task)
			}
			if d := cmp.Diff(tt.meta, meta); d != "" {
				t.Errorf("meta (-want +got):\n%s", d)
			}
		})
	}
}

// The structured toolUseResult refines the call: a Read's range, an edit's failure, a
// write's content, the "file unchanged" answer.
func TestClaudeToolUseResult(t *testing.T) {
	file := func(start, num, total int) string {
		return fmt.Sprintf(`,"toolUseResult":{"type":"text","file":{"filePath":"/w/a.go","content":"x","numLines":%d,"startLine":%d,"totalLines":%d}}`, num, start, total)
	}
	data := ccFile(
		ccPrompt("u1", "", "go"),
		ccUse("a1", "u1", "m1", "r-part", "Read", `{"file_path":"a.go","offset":10,"limit":5}`),
		ccResult("r1", "a1", "r-part", `"    10→x"`, file(10, 5, 100)),
		ccUse("a2", "r1", "m2", "r-whole", "Read", `{"file_path":"/w/a.go"}`),
		ccResult("r2", "a2", "r-whole", `"     1→x"`, file(1, 100, 100)),
		ccUse("a3", "r2", "m3", "r-args", "Read", `{"file_path":"/w/b.go","offset":3,"limit":4}`),
		ccResult("r3", "a3", "r-args", `"     3→x"`, ""),
		ccUse("a4", "r3", "m4", "r-same", "Read", `{"file_path":"/w/a.go"}`),
		ccResult("r4", "a4", "r-same", `"File unchanged since last read."`, `,"toolUseResult":{"type":"file_unchanged","file":{"filePath":"/w/a.go"}}`),
		ccUse("a5", "r4", "m5", "e-bad", "Edit", `{"file_path":"/w/a.go","old_string":"q","new_string":"r"}`),
		ccResult("r5", "a5", "e-bad", `"<tool_use_error>String to replace not found in file.</tool_use_error>"`, `,"toolUseResult":"Error: String to replace not found in file."`),
		ccUse("a6", "r5", "m6", "e-ok", "Edit", `{"file_path":"/w/a.go","old_string":"x","new_string":"y"}`),
		ccResult("r6", "a6", "e-ok", `"The file /w/a.go has been updated."`, `,"toolUseResult":{"filePath":"/w/a.go","oldString":"x","newString":"y"}`),
		ccUse("a7", "r6", "m7", "w-1", "Write", `{"file_path":"/w/c.go","content":"package c\n"}`),
		ccResult("r7", "a7", "w-1", `"File created successfully at: /w/c.go"`, `,"toolUseResult":{"type":"create","filePath":"/w/c.go","content":"package c\n"}`),
	)
	s, err := readClaude("tur.jsonl", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Action    toolcall.Action
		Path      string
		Range     toolcall.Range
		Content   string
		IsError   bool
		Unchanged bool
	}
	got := map[string]view{}
	for _, c := range s.Calls {
		got[c.ID] = view{c.Action, c.Path, c.Range, c.Content, c.Output.IsError, c.Output.Unchanged}
	}
	want := map[string]view{
		"r-part":  {Action: toolcall.ActionRead, Path: "/w/a.go", Range: toolcall.Range{Start: 10, End: 14}},
		"r-whole": {Action: toolcall.ActionRead, Path: "/w/a.go"},
		"r-args":  {Action: toolcall.ActionRead, Path: "/w/b.go", Range: toolcall.Range{Start: 3, End: 6}},
		"r-same":  {Action: toolcall.ActionRead, Path: "/w/a.go", Unchanged: true},
		"e-bad":   {Action: toolcall.ActionEdit, Path: "/w/a.go", IsError: true},
		"e-ok":    {Action: toolcall.ActionEdit, Path: "/w/a.go"},
		"w-1":     {Action: toolcall.ActionWrite, Path: "/w/c.go", Content: "package c\n"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}

// rdrRoundTrip stubs every third rewritable output, rewrites, reads the result back
// with the same reader and checks: the same messages, calls and outputs, the stub text
// in place of each stubbed output, and — for line formats — every line that carries no
// stubbed output byte-identical.
func rdrRoundTrip(t *testing.T, s *Session, opts Options, lineFormat bool) {
	t.Helper()
	stubs := map[string]string{}
	stubLines := map[int]bool{}
	n := 0
	for _, m := range s.Messages {
		for _, o := range m.Outputs {
			if o.unit == 0 {
				continue
			}
			if n%3 == 0 {
				stubs[o.Key] = fmt.Sprintf("[pruned %s: %d tokens; recall(%q)]", o.Key, o.Tokens, o.Key)
				stubLines[m.Line] = true
			}
			n++
		}
	}
	if len(stubs) == 0 {
		t.Fatal("nothing to stub")
	}
	out, err := s.Rewrite(stubs)
	if err != nil {
		t.Fatal(err)
	}
	opts.Format = s.Format
	s2, err := Read(s.Name, out, opts)
	if err != nil {
		t.Fatalf("re-read: %v", err)
	}
	want := rdrShapes(s)
	for i, m := range s.Messages {
		for j, o := range m.Outputs {
			if st, ok := stubs[o.Key]; ok {
				want[i].Outs[j] = o.Key + "=" + st
			}
		}
	}
	if d := cmp.Diff(want, rdrShapes(s2)); d != "" {
		t.Errorf("re-read (-want +got):\n%s", d)
	}
	if s2.Skipped != s.Skipped || s2.Task != s.Task || len(s2.Calls) != len(s.Calls) {
		t.Errorf("re-read: skipped %d→%d, calls %d→%d, task changed %v", s.Skipped, s2.Skipped, len(s.Calls), len(s2.Calls), s2.Task != s.Task)
	}
	for i, c := range s.Calls {
		c2 := s2.Calls[i]
		if c2.ID != c.ID || c2.Range != c.Range || c2.Path != c.Path || c2.Action != c.Action {
			t.Errorf("call %s changed: %+v → %+v", c.ID, c, c2)
		}
	}
	if !lineFormat {
		return
	}
	a, b := bytes.Split(s.raw, []byte("\n")), bytes.Split(out, []byte("\n"))
	if len(a) != len(b) {
		t.Fatalf("line count %d → %d", len(a), len(b))
	}
	changed := 0
	for i := range a {
		same := bytes.Equal(a[i], b[i])
		if !same {
			changed++
		}
		if !stubLines[i+1] && !same {
			t.Errorf("line %d changed but carries no stubbed output", i+1)
		}
		if stubLines[i+1] && same {
			t.Errorf("line %d carries a stubbed output but did not change", i+1)
		}
	}
	if changed != len(stubLines) {
		t.Errorf("%d lines changed; want %d", changed, len(stubLines))
	}
}

func TestClaudeRewriteRoundTrip(t *testing.T) {
	for _, f := range []string{"3af9b1a7-6512-4883-ad18-320658ced099.jsonl", "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", "agent-abc3cb6.jsonl"} {
		t.Run(f, func(t *testing.T) {
			s, err := ReadFile(filepath.Join(rdrSessions, "claude-code", f), Options{Lenient: true})
			if err != nil {
				t.Fatal(err)
			}
			rdrRoundTrip(t, s, Options{Lenient: true}, true)
		})
	}
	t.Run("array content with several text pieces", func(t *testing.T) {
		data := ccFile(
			ccPrompt("u1", "", "shot"),
			ccUse("a1", "u1", "m1", "t1", "mcp__shot", `{}`),
			ccResult("r1", "a1", "t1", `[{"type":"text","text":"one"},{"type":"image","source":{"type":"base64","data":"AAAA"}},{"type":"text","text":"two"}]`, ""),
		)
		s, err := readClaude("pieces.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		o := s.Outputs()[0]
		if o.Text != "one\ntwo" || !o.HasImage || o.Block != 0 {
			t.Errorf("output %+v", o)
		}
		out, err := s.Rewrite(map[string]string{"t1": "STUB"})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(string(data), `"text":"one"`, `"text":"STUB"`, 1)
		// The Messages API rejects empty text blocks, so Rewrite removes the second
		// text piece instead of emptying it; the image keeps its place.
		want = strings.Replace(want, `,{"type":"text","text":"two"}`, ``, 1)
		if string(out) != want {
			t.Errorf("rewritten:\n%s\nwant:\n%s", out, want)
		}
	})
}

// Detectors must be specific: each of the three claims its own real files and none of
// the other formats' real files.
func TestDetectorsAreExclusive(t *testing.T) {
	own := map[string]Format{"claude-code": FormatClaudeCode, "pi": FormatPi}
	detectors := map[Format]func([]byte) bool{FormatClaudeCode: detectClaude, FormatPi: detectPi, FormatAnthropic: detectAnthropic}
	files, err := filepath.Glob(filepath.Join(rdrSessions, "*", "*"))
	if err != nil || len(files) < 20 {
		t.Fatalf("sessions: %d files, %v", len(files), err)
	}
	for _, f := range files {
		dir := filepath.Base(filepath.Dir(f))
		if dir == "LICENSES" || strings.HasSuffix(f, ".md") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		head := bytes.TrimLeft(data, " \t\r\n")
		if len(head) > DetectBytes {
			head = head[:DetectBytes]
		}
		for format, detect := range detectors {
			if got, want := detect(head), own[dir] == format; got != want {
				t.Errorf("%s/%s: detect %s = %v; want %v", dir, filepath.Base(f), format, got, want)
			}
		}
	}
	// A head cut inside a long first line is still recognised.
	long := ccPrompt("u1", "", strings.Repeat("very long prompt ", 8000))
	if !detectClaude([]byte(long)[:DetectBytes]) {
		t.Error("claude head cut inside line 1 not recognised")
	}
	for _, other := range []string{
		`{"timestamp":"2025-10-01T00:00:00Z","type":"session_meta","payload":{"id":"x","cwd":"/w"}}`,
		`{"id":"x","timestamp":"2025-08-01","instructions":"","git":null}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}`,
	} {
		if detectClaude([]byte(other)) || detectPi([]byte(other)) || detectAnthropic([]byte(other)) {
			t.Errorf("a Codex line was claimed: %s", other)
		}
	}
}

// FuzzClaude feeds arbitrary bytes to the Claude Code reader: it must never panic, must
// fail only with ErrMalformed or ErrEmpty, and whatever it reads must satisfy the
// session invariants and survive a Rewrite of every locatable output.
func FuzzClaude(f *testing.F) {
	rdrSeedFromFiles(f, filepath.Join(rdrSessions, "claude-code", "*.jsonl"), 12)
	f.Add(ccFile(ccPrompt("u1", "", "x"), ccUse("a1", "u1", "m1", "t1", "Read", `{"file_path":"a"}`), ccResult("r1", "a1", "t1", `[{"type":"text","text":"y"}]`, "")))
	f.Add(ccFile(ccPrompt("x", "y", "a"), ccText("y", "x", "m", "b")))
	f.Add([]byte(`[1]` + "\n" + `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"q","content":"\xff"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rdrFuzzOne(t, data, readClaude)
	})
}

// rdrSeedFromFiles adds the first lines of each matching real file as fuzz seeds.
func rdrSeedFromFiles(f *testing.F, glob string, lines int) {
	files, _ := filepath.Glob(glob)
	if len(files) == 0 {
		f.Fatalf("no seed files for %s", glob)
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		parts := bytes.SplitAfterN(data, []byte("\n"), lines+1)
		f.Add(bytes.Join(parts[:min(lines, len(parts))], nil))
	}
}

// rdrFuzzOne runs one fuzz input through read in both modes.
func rdrFuzzOne(t *testing.T, data []byte, read func(string, []byte, Options) (*Session, error)) {
	for _, lenient := range []bool{false, true} {
		s, err := read("fuzz", data, Options{Lenient: lenient})
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("lenient=%v: unexpected error kind: %v", lenient, err)
			}
			if lenient && errors.Is(err, ErrMalformed) && s != nil {
				t.Fatal("session and error together")
			}
			continue
		}
		rdrInvariants(t, s)
		stubs := map[string]string{}
		for _, o := range s.Outputs() {
			if o.unit != 0 {
				stubs[o.Key] = "STUB " + o.Key
			}
		}
		out, err := s.Rewrite(stubs)
		if err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		s2, err := read("fuzz", out, Options{Lenient: true})
		if err != nil {
			t.Fatalf("re-read after rewrite: %v", err)
		}
		if len(s2.Outputs()) != len(s.Outputs()) {
			t.Fatalf("outputs %d → %d after rewrite", len(s.Outputs()), len(s2.Outputs()))
		}
	}
}

// rdrInvariants checks what every reader must guarantee about a session.
func rdrInvariants(t *testing.T, s *Session) {
	t.Helper()
	prev := 0
	for i, u := range s.units {
		if u.start < prev || u.end < u.start || u.end > len(s.raw) {
			t.Fatalf("unit %d [%d,%d) out of order or range (prev end %d, raw %d)", i, u.start, u.end, prev, len(s.raw))
		}
		prev = u.end
	}
	keys := map[string]bool{}
	for i, m := range s.Messages {
		if m.Index != i {
			t.Fatalf("message %d has Index %d", i, m.Index)
		}
		if m.CompactionKept < 0 || m.CompactionKept > i || m.CompactionKept > 0 && !m.AgentCompaction {
			t.Fatalf("message %d: CompactionKept %d (compaction %v)", i, m.CompactionKept, m.AgentCompaction)
		}
		for _, c := range m.Calls {
			if c.Message != i || c.ID == "" {
				t.Fatalf("call %q: Message %d, in message %d", c.ID, c.Message, i)
			}
		}
		for _, o := range m.Outputs {
			if keys[o.Key] {
				t.Fatalf("output key %q repeats", o.Key)
			}
			keys[o.Key] = true
			if o.unit != 0 && (o.unit > len(s.units) || len(o.paths) == 0) {
				t.Fatalf("output %q: unit %d of %d, %d paths", o.Key, o.unit, len(s.units), len(o.paths))
			}
			if o.Call != nil && (o.Call.Output != o || o.Call.ID != o.CallID) {
				t.Fatalf("output %q badly paired", o.Key)
			}
		}
	}
	for _, c := range s.Calls {
		if c.Output != nil && c.Output.Call != c {
			t.Fatalf("call %q badly paired", c.ID)
		}
	}
}
