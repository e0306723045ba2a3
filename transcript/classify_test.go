package transcript

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

// actCall classifies a call of tool name with args (a Go value marshalled to JSON,
// or json.RawMessage as is) against cwd.
func actCall(t *testing.T, name string, args any, cwd string) *ToolCall {
	t.Helper()
	raw, ok := args.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = b
	}
	c := &ToolCall{ID: "c1", Name: name, Args: raw}
	c.Classify(cwd)
	return c
}

// The ops and ranges the tests compare, as toolcall's tests spell them.
func rd(p string, r toolcall.Range) toolcall.FileOp {
	return toolcall.FileOp{Action: toolcall.ActionRead, Path: p, Range: r}
}

func ed(p string) toolcall.FileOp { return toolcall.FileOp{Action: toolcall.ActionEdit, Path: p} }

func wr(p, content string) toolcall.FileOp {
	return toolcall.FileOp{Action: toolcall.ActionWrite, Path: p, Content: content}
}

func rg(start, end int) toolcall.Range { return toolcall.Range{Start: start, End: end} }

func shellArgs(cmd string) any { return map[string]any{"command": cmd} }

// TestFailed uses result texts seen in ../shared/sessions (and the tools' own error
// strings named in TRANSCRIPT-FORMATS.md).
func TestFailed(t *testing.T) {
	edit := actCall(t, "Edit", map[string]any{"file_path": "/r/a"}, "")
	piEdit := actCall(t, "edit", map[string]any{"path": "/r/a", "oldText": "x", "newText": "y"}, "")
	read := actCall(t, "Read", map[string]any{"file_path": "/r/a"}, "")
	bash := actCall(t, "Bash", shellArgs("sed -i 's/a/b/' a && cat a"), "/r")
	gem := actCall(t, "run_shell_command", shellArgs("cat a"), "/r")
	tests := []struct {
		name  string
		call  *ToolCall
		text  string
		isErr bool
		want  bool
	}{
		{"is_error", edit, "whatever", true, true},
		{"claude string not found", edit, "<tool_use_error>String to replace not found in file.\nString: # pytest</tool_use_error>", false, true},
		{"claude not read yet", edit, "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>", false, true},
		{"old_string not found", edit, "Error: old_string not found in /r/a", false, true},
		{"claude edit ok", edit, "The file /r/a has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n     1→x", false, false},
		{"pi could not find", piEdit, "Could not find the exact text in /Users/badlogic/workspaces/pi-mono/packages/coding-agent/src/core/index.ts. The old text must match exactly including all whitespace and newlines.", false, true},
		{"pi no changes", piEdit, "No changes made to /Users/badlogic/workspaces/pi-mono/AGENTS.md. The replacement produced identical content.", false, true},
		{"pi edit ok", piEdit, "Successfully replaced text in /r/a. Changed 209 characters to 1306 characters.", false, false},
		{"swe lint failure", edit, "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry your edit commmand.\n\nERRORS:\n- E999 SyntaxError: unmatched ']'", false, true},
		{"read error", read, "<tool_use_error>File does not exist.</tool_use_error>", false, true},
		{"read too large", read, "File content (37775 tokens) exceeds maximum allowed tokens (25000).", false, true},
		{"read ok mentioning not found", read, "     1→raise RuntimeError('not found')\n", false, false},
		{"swe open missing", read, "File pydicom/x.py not found", false, true},
		{"pi read enoent", read, "ENOENT: no such file or directory, access '/Users/badlogic/workspaces/pi-mono/shittycodingagent.ai/src/index.html'", false, true},
		{"claude exit code", bash, "Exit code 1\nsed: can't read a: No such file or directory", false, true},
		{"pi exit code", bash, "ls: x: No such file or directory\n\n\nCommand exited with code 1", false, true},
		{"mini returncode", bash, "<returncode>2</returncode>\n<output>\nsed: -e expression #1</output>", false, true},
		{"mini returncode 0", bash, "<returncode>0</returncode>\n<output>\nx\n</output>", false, false},
		{"codex exec", bash, "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 1\nOutput:\nerr", false, true},
		{"codex shell json", bash, `{"output":"err\n","metadata":{"exit_code":1,"duration_seconds":0.1}}`, false, true},
		{"codex shell json ok", bash, `{"output":"x\n","metadata":{"exit_code":0,"duration_seconds":0.1}}`, false, false},
		{"gemini exit code", gem, "Command: cat a\nDirectory: (root)\nOutput: cat: a: No such file or directory\nError: (none)\nExit Code: 1\nSignal: 0", false, true},
		{"gemini ok", gem, "Command: cat a\nDirectory: (root)\nOutput: x\nError: (none)\nExit Code: 0\nSignal: 0", false, false},
		{"file content mentioning exit code", read, "     1→Exit code 1 is returned when …\n", false, false},
	}
	for _, tt := range tests {
		o := &ToolOutput{Call: tt.call, Text: tt.text, IsError: tt.isErr}
		if got := o.Failed(); got != tt.want {
			t.Errorf("%s: Failed() = %v, want %v", tt.name, got, tt.want)
		}
	}
	if (&ToolOutput{Text: "Exit code 1"}).Failed() {
		t.Errorf("orphan output reported failed")
	}
}

// TestOpenFiles follows SWE-agent's open file through a session built from the
// pydicom__pydicom-1458 trajectory's actions and (shortened) observations.
func TestOpenFiles(t *testing.T) {
	window := "[File: /pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py (372 lines total)]\n(272 more lines above)\n273:            \"Unable to convert\"\n274:            \"is not supported\"\n275:x\n(97 more lines below)"
	after := "[File: /pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py (373 lines total)]\n(236 more lines above)\n237:    ----------\n238:    ds : Dataset\n239:y\n(134 more lines below)\nFile updated. Please review the changes and make sure they are correct (correct indentation, no duplicate lines, etc). Edit the file again if necessary."
	failed := "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry your edit commmand.\n\n[This is how your edit would have looked if applied]\n[File: /pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py (373 lines total)]\n1:x\nYour changes have NOT been applied."
	created := "[File: /pydicom__pydicom/reproduce_bug.py (1 lines total)]\n1:\n"
	steps := []struct{ action, obs string }{
		{"create reproduce_bug.py", created},
		{"edit 1:1\nimport numpy as np\nend_of_edit", "[File: /pydicom__pydicom/reproduce_bug.py (2 lines total)]\n1:import numpy as np\n2:\nFile updated."},
		{"open pydicom/pixel_data_handlers/numpy_handler.py 293", window},
		{"edit 287:295\n    required_elements = [\nend_of_edit", failed},
		{"edit 287:296\n    required_elements = [\nend_of_edit", after},
		{"goto 1", "[File: /pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py (373 lines total)]\n1:a\n2:b\n3:c\n(370 more lines below)"},
	}
	s := &Session{Cwd: "/pydicom__pydicom"}
	for i, st := range steps {
		name := strings.Fields(st.action)[0]
		c := actCall(t, name, shellArgs(st.action), s.Cwd)
		c.ID, c.Step, c.Message = name+string(rune('0'+i)), i+1, len(s.Messages)
		s.Messages = append(s.Messages, &Message{Index: len(s.Messages), Step: i + 1, Role: RoleAssistant, Calls: []*ToolCall{c}})
		o := &ToolOutput{Key: c.ID, CallID: c.ID, Call: c, Text: st.obs, Message: len(s.Messages), Step: i + 1}
		c.Output = o
		s.Messages = append(s.Messages, &Message{Index: len(s.Messages), Step: i + 1, Role: RoleTool, Outputs: []*ToolOutput{o}})
		s.Calls = append(s.Calls, c)
	}
	ResolveOpenFiles(s)
	const np = "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py"
	const rb = "/pydicom__pydicom/reproduce_bug.py"
	want := [][]toolcall.FileOp{
		{wr(rb, "")},
		{ed(rb), rd(rb, toolcall.Range{})},
		{rd(np, rg(273, 275))},
		{ed(np)}, // failed: the window is the would-be file, no read; the edit itself is judged by Failed
		{ed(np), rd(np, rg(237, 239))},
		{rd(np, rg(1, 3))},
	}
	for i, c := range s.Calls {
		if diff := cmp.Diff(want[i], c.Ops); diff != "" {
			t.Errorf("call %d (%q) ops (-want +got):\n%s", i, steps[i].action, diff)
		}
	}
	if !s.Calls[3].Output.Failed() || s.Calls[4].Output.Failed() {
		t.Errorf("Failed: failed edit %v, applied edit %v", s.Calls[3].Output.Failed(), s.Calls[4].Output.Failed())
	}
	if s.Calls[2].Path != np || s.Calls[2].Range != rg(273, 275) || s.Calls[2].Summary != "open pydicom/pixel_data_handlers/numpy_handler.py 293" {
		t.Errorf("open call after refinement: %s %v %q", s.Calls[2].Path, s.Calls[2].Range, s.Calls[2].Summary)
	}
}

// TestClassifyRealSessions spot-checks the classification of real calls as read by
// the registered readers: (call index, action, path, range) verified with jq.
func TestClassifyRealSessions(t *testing.T) {
	type spot struct {
		i    int
		act  toolcall.Action
		path string
		r    toolcall.Range
		nOps int
	}
	tests := []struct {
		file  string
		spots []spot
	}{
		// jq -r '.messages[]|select(.role=="assistant")|.content' | bash blocks, in order
		{"mini-swe-agent/django__django-16560.traj.json", []spot{
			{0, toolcall.ActionSearch, "", toolcall.Range{}, 0},
			{1, toolcall.ActionRead, "/testbed/django/db/models/constraints.py", toolcall.Range{}, 1},
			{2, toolcall.ActionWrite, "/testbed/reproduce_issue.py", toolcall.Range{}, 1},
			{3, toolcall.ActionShell, "", toolcall.Range{}, 0},
			{4, toolcall.ActionRead, "/testbed/django/db/models/constraints.py", rg(18, 50), 1},
			{5, toolcall.ActionEdit, "/testbed/django/db/models/constraints.py", toolcall.Range{}, 1},
			{84, toolcall.ActionRead, "/testbed/django/db/models/constraints.py", toolcall.TailRange(5), 1},
			{85, toolcall.ActionEdit, "/testbed/django/db/models/constraints.py", toolcall.Range{}, 2},
		}},
		// Gemini: read_file ×3, write_file, replace, write_file, then run_shell_command
		// "cat index.html style.css script.js"
		{"gemini-cli/session-2025-12-24T06-40-c330aea9.json", []spot{
			{4, toolcall.ActionEdit, "/home/mischa/Gemini-Playground/index.html", toolcall.Range{}, 1},
			{5, toolcall.ActionWrite, "Gemini-Playground/script.js", toolcall.Range{}, 1},
			{6, toolcall.ActionRead, "Gemini-Playground/index.html", toolcall.Range{}, 3},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s, err := ReadFile("../../shared/sessions/"+tt.file, Options{Lenient: true})
			if err != nil {
				t.Skipf("session not readable here: %v", err)
			}
			for _, sp := range tt.spots {
				c := s.Calls[sp.i]
				got := spot{sp.i, c.Action, c.Path, c.Range, len(c.Ops)}
				if diff := cmp.Diff(sp, got, cmp.AllowUnexported(spot{})); diff != "" {
					t.Errorf("call %d %q (-want +got):\n%s", sp.i, textcut.RunesEllipsis(strings.Join(strings.Fields(c.Command), " "), 80), diff)
				}
			}
		})
	}
}

// ToolCall.Classify replaces every field it sets: classified again after a
// reader's refinement, a call is what the first Classify made it.
func TestClassifyReplaces(t *testing.T) {
	c := actCall(t, "Bash", shellArgs("sed -n '10,20p' a.go && cat b.go"), "/r")
	first := c.Classification
	c.Action, c.Path, c.Range, c.Summary = toolcall.ActionRead, "/x", rg(1, 2), "refined"
	c.Ops = append(c.Ops, rd("/y", toolcall.Range{}))
	c.Classify("/r")
	if diff := cmp.Diff(first, c.Classification); diff != "" {
		t.Errorf("classified again (-first +again):\n%s", diff)
	}
}
