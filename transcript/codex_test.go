package transcript

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

const (
	codexCurrent = "codex/rollout-2025-11-04T10-12-33-019a4e2c-7d1b-7c30-9f4e-2b8d6c1a9e57.jsonl"
	codexLegacy  = "codex/rollout-2025-08-14T16-05-41-5b1e0c2a-93f4-4d8e-a1c7-2f6b8d0e4a39.jsonl"
)

// codexCall is what the Codex tests assert of a call: the parts this reader owns.
type codexCall struct {
	ID, Name string
	Step     int
	Line     int             // line of the assistant message making the call
	Action   toolcall.Action // only asserted for apply_patch calls (this reader finds the patch)
	Path     string
	Command  string // not asserted for apply_patch calls
	OutLine  int    // line of the output, 0 while unanswered
	OutPath  string
	IsError  bool
	Out      string // prefix of the output text
}

// codexCalls lists the calls of s; each output text is cut to the length of the
// matching want's Out.
func codexCalls(s *Session, want []codexCall) []codexCall {
	var out []codexCall
	for i, c := range s.Calls {
		cc := codexCall{ID: c.ID, Name: c.Name, Step: c.Step, Line: s.Messages[c.Message].Line, Command: c.Command}
		if strings.Contains(string(c.Args), "apply_patch") || c.Name == "apply_patch" {
			cc.Action, cc.Path, cc.Command = c.Action, c.Path, ""
		}
		if o := c.Output; o != nil {
			cc.OutLine, cc.OutPath, cc.IsError = s.Messages[o.Message].Line, o.paths[0], o.IsError
			n := len(o.Text)
			if i < len(want) {
				n = min(n, len(want[i].Out))
			}
			cc.Out = o.Text[:n]
		}
		out = append(out, cc)
	}
	return out
}

// The figures follow from how the files were written (see the generator notes in
// the report): current form, 3 user turns, 11 model calls (steps), 11 calls of
// which the last was interrupted; legacy form, one turn of 6 model calls.
func TestCodexCurrent(t *testing.T) {
	s, raw := docReadFile(t, readCodex, docOwn(codexCurrent))
	docInvariants(t, s)
	want := docFigures{ID: "019a4e2c-7d1b-7c30-9f4e-2b8d6c1a9e57", Cwd: "/home/dev/wordfreq",
		Task:     `Counting treats "Hello" and "hello" as different words. Make word counting case-insensitive and add a test for it.`,
		Messages: 26, Steps: 11, Calls: 11, Outputs: 10, Unanswered: 1, Errors: 1, Meta: 2}
	if diff := cmp.Diff(want, docFiguresOf(s, want)); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	wantCalls := []codexCall{
		{"call_1Hq8sZ2cVtWmB4xK9pLr0aJd", "exec_command", 1, 7, "", "", `rg -n "func Count" -S .`, 9, "payload.output", false, "Chunk ID: a41f07\nWall time: 0.0193 seconds\nProcess exited with code 0"},
		{"call_7Rk2mYfN3xQe9uTb1cWs5hLo", "exec_command", 2, 11, "", "", "sed -n '1,40p' count.go", 14, "payload.output", false, "Chunk ID: c20e5b\nWall time: 0.0148 seconds\nProcess exited with code 0"},
		{"call_4Vd9pEj6nGa2sKz8yHq3tXmc", "exec_command", 2, 11, "", "", "cat count_test.go", 15, "payload.output", false, "Chunk ID: 9e3d1a\nWall time: 0.0131 seconds\nProcess exited with code 0"},
		{"call_Zp5wLc8rKf2nTj6aQy1eVb3m", "apply_patch", 3, 17, toolcall.ActionEdit, "/home/dev/wordfreq/count.go", "", 19, "payload.output", false, "Success. Updated the following files:\nM count.go\n"},
		{"call_Gm3tYx7qWd1kRs9vNb4cPe2h", "apply_patch", 4, 20, toolcall.ActionEdit, "/home/dev/wordfreq/count_test.go", "", 21, "payload.output", true, "apply_patch verification failed: Failed to find e"},
		{"call_Bw6nHs2yTq8mLc4xZr7aKd1e", "exec_command", 5, 22, "", "", "sed -n '8,14p' count_test.go", 24, "payload.output", false, "Chunk ID: 5b7c2e\nWall time: 0.0122 seconds\nProcess exited with code 0"},
		{"call_Qs1vKe9wMx3nBy7tHc5dJf2a", "apply_patch", 6, 25, toolcall.ActionEdit, "/home/dev/wordfreq/count_test.go", "", 26, "payload.output", false, "Success. Updated the following files:\nM count_test.go\n"},
		{"call_Ek4rPw8jNz2qVt6mXa9sLc3b", "exec_command", 7, 27, "", "", "go vet ./... && go test ./...", 28, "payload.output", false, "Chunk ID: e81a4f\nWall time: 1.8420 seconds\nProcess exited with code 0"},
		{"call_Hn8cXv3kQa6wRe1tMz5yBp9d", "apply_patch", 9, 35, toolcall.ActionWrite, "/home/dev/wordfreq/CHANGELOG.md", "", 38, "payload.output", false, "Success. Updated the following files:\nA CHANGELOG.md\n"},
		{"call_Ty2mJd7sLw4pVk9xNc1qRe6h", "exec_command", 9, 35, "", "", "cat count.go", 39, "payload.output", false, "Chunk ID: 3f9d6b\nWall time: 0.0117 seconds\nProcess exited with code 0"},
		{"call_Wc5nRx1tHq8kMv3yLd7pZs2a", "exec_command", 11, 43, "", "", "go test -run '^$' -bench . ./...", 0, "", false, ""},
	}
	if diff := cmp.Diff(wantCalls, codexCalls(s, wantCalls)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// The sed read returned the whole 36-line file, ending in Top's closing brace.
	if o := s.Calls[1].Output; !strings.HasSuffix(o.Text, "Output:\npackage wordfreq\n\nimport (\n\t\"sort\"\n\t\"strings\"\n\t\"unicode\"\n)\n\n// Count returns how often each word occurs in text.\nfunc Count(text string) map[string]int {\n\tcounts := map[string]int{}\n\twords := strings.FieldsFunc(text, func(r rune) bool {\n\t\treturn !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\\''\n\t})\n\tfor _, w := range words {\n\t\tcounts[w]++\n\t}\n\treturn counts\n}\n\n// Top returns the n most frequent words, most frequent first; ties sort alphabetically.\nfunc Top(counts map[string]int, n int) []string {\n\twords := make([]string, 0, len(counts))\n\tfor w := range counts {\n\t\twords = append(words, w)\n\t}\n\tsort.Slice(words, func(i, j int) bool {\n\t\tif counts[words[i]] != counts[words[j]] {\n\t\t\treturn counts[words[i]] > counts[words[j]]\n\t\t}\n\t\treturn words[i] < words[j]\n\t})\n\tif len(words) > n {\n\t\twords = words[:n]\n\t}\n\treturn words\n}\n") {
		t.Errorf("sed output %q", o.Text)
	}
	// Reads: Path and Range come from Classify on the command this reader extracts.
	for _, r := range []struct {
		call int
		path string
		rng  toolcall.Range
	}{{1, "/home/dev/wordfreq/count.go", toolcall.Range{Start: 1, End: 40}}, {2, "/home/dev/wordfreq/count_test.go", toolcall.Range{}}, {5, "/home/dev/wordfreq/count_test.go", toolcall.Range{Start: 8, End: 14}}} {
		if c := s.Calls[r.call]; c.Action != toolcall.ActionRead || c.Path != r.path || c.Range != r.rng {
			t.Errorf("call %d: %s %s %v, want read %s %v", r.call, c.Action, c.Path, c.Range, r.path, r.rng)
		}
	}
	if w := s.Calls[8]; w.Content != "# Changelog\n\n## Unreleased\n\n- Count is case-insensitive: \"Hello\" and \"hello\" are one word.\n" {
		t.Errorf("added file content %q", w.Content)
	}
	var patch string
	if err := json.Unmarshal(s.Calls[3].Args, &patch); err != nil || !strings.HasPrefix(patch, "*** Begin Patch\n*** Update File: count.go\n") {
		t.Errorf("custom tool args %s (%v)", s.Calls[3].Args, err)
	}
	// Texts: the final answer of the first turn and the injected context.
	if m := s.Messages[18]; m.Role != RoleAssistant || m.Line != 30 || !strings.HasPrefix(m.Text, "Counting is now case-insensitive: `Count` lower-cases") {
		t.Errorf("message 18: %s line %d %.40q", m.Role, m.Line, m.Text)
	}
	if !s.Messages[0].Meta || !s.Messages[1].Meta || s.Messages[2].Meta || s.Messages[19].Meta {
		t.Errorf("meta flags: %v %v %v %v", s.Messages[0].Meta, s.Messages[1].Meta, s.Messages[2].Meta, s.Messages[19].Meta)
	}
	docRoundTrip(t, s, raw, readCodex, func(i int, o *ToolOutput) bool { return i != 1 })
}

func TestCodexLegacy(t *testing.T) {
	s, raw := docReadFile(t, readCodex, docOwn(codexLegacy))
	docInvariants(t, s)
	want := docFigures{ID: "5b1e0c2a-93f4-4d8e-a1c7-2f6b8d0e4a39", Cwd: "/home/dev/todo-cli",
		Task:     "`todo done 3` crashes with an index out of range when the list has only 2 items.",
		Messages: 14, Steps: 6, Calls: 6, Outputs: 6, Errors: 2, Meta: 1}
	if diff := cmp.Diff(want, docFiguresOf(s, want)); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	wantCalls := []codexCall{
		{"call_aQ3nVx8kLm2pRt6y", "shell", 1, 6, "", "", "ls -R", 8, "output", false, "README.md\ncmd\ngo.mod\nstore.go\n\n./cmd:\ndone.go\nmain.go\n"},
		{"call_bW7mKc1xNq5sTz9e", "shell", 2, 10, "", "", "sed -n '1,60p' cmd/done.go", 13, "output", false, "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"strconv\"\n)\n"},
		{"call_cE4rYh6jPv0dLs2w", "shell", 2, 10, "", "", "cat cmd/remove.go", 14, "output", true, "cat: cmd/remove.go: No such file or directory\n"},
		{"call_dR8tGn3bWx7kMq1v", "shell", 3, 16, "", "", "cat store.go", 17, "output", false, "package main\n\nimport (\n\t\"encoding/json\"\n\t\"os\"\n)\n"},
		{"call_eK2pZs9wHc4nXy6t", "shell", 4, 19, toolcall.ActionEdit, "/home/dev/todo-cli/cmd/done.go", "", 21, "output", false, "Success. Updated the following files:\nM cmd/done.go\n"},
		{"call_fN6vQe3mTr8wBk1j", "shell", 5, 23, "", "", "go build ./... && go run ./cmd done 3", 24, "output", true, "no item 3: the list has 2 items\nexit status 1\n"},
	}
	if diff := cmp.Diff(wantCalls, codexCalls(s, wantCalls)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if c := s.Calls[1]; c.Action != toolcall.ActionRead || c.Path != "/home/dev/todo-cli/cmd/done.go" || c.Range != (toolcall.Range{Start: 1, End: 60}) {
		t.Errorf("argv sed read: %s %s %v", c.Action, c.Path, c.Range)
	}
	if m := s.Messages[len(s.Messages)-1]; m.Role != RoleAssistant || m.Line != 26 || !strings.HasPrefix(m.Text, "`todo done N` now checks N") {
		t.Errorf("last message: %s line %d %.30q", m.Role, m.Line, m.Text)
	}
	docRoundTrip(t, s, raw, readCodex, func(i int, o *ToolOutput) bool { return true })
}

func TestCodexShapes(t *testing.T) {
	// A partial export starting mid-session, with CRLF endings, blank lines, a
	// developer message, a VS Code prompt, a local_shell_call, an output made of
	// content items (text and image), an output object with success false, a
	// web_search_call (no call), a compaction and an unknown record type.
	lines := []string{
		`{"timestamp":"2026-01-01T00:00:00Z","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5"}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>sandboxed</permissions instructions>"}]}}`,
		``,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{"type":"user_message","message":"# Context from my IDE setup:\n\n## Open tabs:\n- a.go\n\n## My request for Codex:\nlook at a.go"}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"# Context from my IDE setup:\n\n## My request for Codex:\nlook at a.go"}]}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"local_shell_call","call_id":"ls1","status":"completed","action":{"type":"exec","command":["bash","-lc","cat a.go"],"working_directory":"/w/sub"}}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"web_search_call","status":"completed","action":{"type":"search","query":"go"}}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call","name":"view_image","arguments":"{\"path\":\"x.png\"}","call_id":"vi1"}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call_output","call_id":"ls1","output":[{"type":"input_text","text":"package a"},{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call_output","call_id":"vi1","output":{"content":"no such image","success":false}}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"compacted","payload":{"message":"Summary: read a.go."}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"ghost_snapshot","payload":{"commit":"abc"}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"git\",\"log\",\"--format=%H %s\"]}","call_id":"sh1"}}`,
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call_output","call_id":"sh1","output":"Exit code: 128\nWall time: 0.1 seconds\nOutput:\nfatal: not a git repository"}}`,
	}
	doc := strings.Join(lines, "\r\n") + "\r\n"
	s, err := readCodex("shapes", []byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	docInvariants(t, s)
	want := docFigures{Cwd: "/w", Task: "look at a.go", Messages: 8, Steps: 2, Calls: 3, Outputs: 3, Errors: 2, Meta: 2}
	if diff := cmp.Diff(want, docFiguresOf(s, want)); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	ls := s.Calls[0]
	if ls.Name != "local_shell" || ls.Command != "cat a.go" || ls.Output.Text != "package a" || !ls.Output.HasImage ||
		!cmp.Equal(ls.Output.paths, []string{"payload.output.0.text"}) || s.Messages[2].Line != 6 {
		t.Errorf("local shell: %s %q %+v line %d", ls.Name, ls.Command, ls.Output, s.Messages[2].Line)
	}
	if vi := s.Calls[1].Output; vi.Text != "no such image" || !vi.IsError || vi.paths[0] != "payload.output.content" {
		t.Errorf("object output: %+v", vi)
	}
	if sh := s.Calls[2]; sh.Command != "git log '--format=%H %s'" || !sh.Output.IsError {
		t.Errorf("argv shell: %q %+v", sh.Command, sh.Output)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "ghost_snapshot") {
		t.Errorf("warnings %q", s.Warnings)
	}
	docRoundTrip(t, s, []byte(doc), readCodex, func(i int, o *ToolOutput) bool { return true })

	// Legacy bare items without a header.
	bare := `{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}
{"type":"function_call","name":"shell","arguments":"{\"command\":[\"apply_patch\",\"*** Begin Patch\\n*** Delete File: old.txt\\n*** End Patch\"]}","call_id":"p1"}
{"type":"function_call_output","call_id":"p1","output":"{\"output\":\"Success.\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0}}"}`
	b, err := readCodex("bare", []byte(bare), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Calls[0]; c.Action != toolcall.ActionEdit || c.Path != "old.txt" || c.Output.Text != "Success." || c.Output.paths[0] != "output" {
		t.Errorf("bare patch call: %s %s %+v", c.Action, c.Path, c.Output)
	}
}

func TestCodexMalformed(t *testing.T) {
	good := `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}}`
	tests := []struct {
		name, line string
		field, msg string
	}{
		{"not json", `{"timestamp":"2026-01-01T00:00:00Z","type":`, "", "truncated"},
		{"garbage", `hello`, "", "invalid JSON"},
		{"not object", `[1,2]`, "", "not a JSON object"},
		{"null", `null`, "", "not a JSON object"},
		{"bad utf8", "{\"timestamp\":\"t\",\"type\":\"event_msg\",\"payload\":{\"type\":\"x\",\"message\":\"\xff\"}}", "", "invalid UTF-8"},
		{"payload not object", `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":"x"}`, "payload", "not an object"},
		{"call without name", `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call","arguments":"{}","call_id":"c"}}`, "payload.name", "missing"},
		{"output without id", `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call_output","output":"x"}}`, "payload.call_id", "missing"},
		{"output number", `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":5}}`, "payload.output", "neither"},
		{"unknown role", `{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"message","role":"robot","content":[]}}`, "payload.role", "unknown message role"},
		{"bare bad content", `{"type":"message","role":"user","content":7}`, "content", "neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := good + "\n\n" + tt.line + "\n" + good + "\n"
			_, err := readCodex(tt.name, []byte(doc), Options{})
			docErr(t, err, 3, tt.field, tt.msg)
			s, err := readCodex(tt.name, []byte(doc), Options{Lenient: true})
			if err != nil {
				t.Fatalf("lenient: %v", err)
			}
			if s.Skipped != 1 || len(s.Messages) != 2 || !strings.Contains(s.Warnings[0], ":3") {
				t.Errorf("lenient: skipped %d, %d messages, warnings %q", s.Skipped, len(s.Messages), s.Warnings)
			}
		})
	}
	if _, err := readCodex("meta only", []byte(`{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x"}}`), Options{}); err == nil || !strings.Contains(err.Error(), "no messages") {
		t.Errorf("session without messages: %v", err)
	}
}

func FuzzCodex(f *testing.F) {
	docSeeds(f, docOwn(codexCurrent), docOwn(codexLegacy))
	f.Add([]byte(`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch\n*** Add File: a\n+x\n*** End Patch","call_id":"c"}}` + "\n" +
		`{"timestamp":"2026-01-01T00:00:00Z","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c","output":"{\"output\":\"ok\",\"metadata\":{\"exit_code\":\"1\"}}"}}`))
	f.Add([]byte(`{"id":"x","timestamp":"2026-01-01T00:00:00Z","instructions":null}` + "\n" + `{"record_type":"state"}` + "\n" + `{"type":"local_shell_call","call_id":"c","action":{"command":["ls"]}}`))
	f.Fuzz(func(t *testing.T, data []byte) { docFuzz(t, readCodex, data) })
}
