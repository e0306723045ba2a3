package toolcall

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClassifyFiveAgents covers the tool calls the five agents `pruneadvisor wrap`
// runs send today, with the argument names of their tool schemas (Claude Code
// 2.1.332, Codex 0.171.0, Gemini CLI 0.61.0: READ_FILE_PARAM_START_LINE "1-based",
// pi 0.73.1 dist/core/tools/{read,edit}.js, opencode 1.18.33 read "1-indexed"
// offset, edit filePath/oldString/newString, apply_patch patchText).
func TestClassifyFiveAgents(t *testing.T) {
	patch := "*** Begin Patch\n*** Update File: notes.txt\n@@\n-old\n+new\n*** End Patch\n"
	tests := []struct {
		name string
		tool string
		args any
		want actView
	}{
		{"claude Read", "Read", map[string]any{"file_path": "/w/a.go"}, actView{Action: ActionRead, Path: "/w/a.go", Ops: []FileOp{rd("/w/a.go", Range{})}}},
		{"claude Edit", "Edit", map[string]any{"file_path": "/w/a.go", "old_string": "a", "new_string": "b"}, actView{Action: ActionEdit, Path: "/w/a.go", Ops: []FileOp{ed("/w/a.go")}}},
		{"codex exec_command", "exec_command", map[string]any{"cmd": "sed -n '1,40p' a.go", "workdir": "/w"},
			actView{Action: ActionRead, Path: "/w/a.go", Range: rg(1, 40), Command: "sed -n '1,40p' a.go", Ops: []FileOp{rd("/w/a.go", rg(1, 40))}}},
		{"codex exec_command cat", "exec_command", map[string]any{"cmd": "cat a.go", "workdir": "/w", "yield_time_ms": 10000},
			actView{Action: ActionRead, Path: "/w/a.go", Command: "cat a.go", Ops: []FileOp{rd("/w/a.go", Range{})}}},
		{"codex apply_patch custom tool", "apply_patch", rawArgs(jsonQuote(patch)),
			actView{Action: ActionEdit, Path: "/w/notes.txt", Command: "apply_patch", Ops: []FileOp{ed("/w/notes.txt")}}},
		{"gemini read_file", "read_file", map[string]any{"file_path": "a.go"}, actView{Action: ActionRead, Path: "/w/a.go", Ops: []FileOp{rd("/w/a.go", Range{})}}},
		{"gemini read_file lines", "read_file", map[string]any{"file_path": "a.go", "start_line": 5, "end_line": 9},
			actView{Action: ActionRead, Path: "/w/a.go", Range: rg(5, 9), Ops: []FileOp{rd("/w/a.go", rg(5, 9))}}},
		{"gemini read_file older", "read_file", map[string]any{"absolute_path": "/w/a.go", "offset": 10, "limit": 5},
			actView{Action: ActionRead, Path: "/w/a.go", Range: rg(11, 15), Ops: []FileOp{rd("/w/a.go", rg(11, 15))}}},
		{"gemini replace", "replace", map[string]any{"file_path": "/w/a.go", "old_string": "a", "new_string": "b", "instruction": "fix"},
			actView{Action: ActionEdit, Path: "/w/a.go", Ops: []FileOp{ed("/w/a.go")}}},
		{"gemini write_file", "write_file", map[string]any{"file_path": "/w/a.go", "content": "x\n"},
			actView{Action: ActionWrite, Path: "/w/a.go", Content: "x\n", Ops: []FileOp{wr("/w/a.go", "x\n")}}},
		{"gemini run_shell_command", "run_shell_command", map[string]any{"command": "cat a.go", "description": "show", "dir_path": "sub"},
			actView{Action: ActionRead, Path: "/w/sub/a.go", Command: "cat a.go", Ops: []FileOp{rd("/w/sub/a.go", Range{})}}},
		{"pi read", "read", map[string]any{"path": "a.go", "offset": 3, "limit": 2}, actView{Action: ActionRead, Path: "/w/a.go", Range: rg(3, 4), Ops: []FileOp{rd("/w/a.go", rg(3, 4))}}},
		{"pi edit edits[]", "edit", map[string]any{"path": "a.go", "edits": []any{map[string]any{"oldText": "a", "newText": "b"}}},
			actView{Action: ActionEdit, Path: "/w/a.go", Ops: []FileOp{ed("/w/a.go")}}},
		{"opencode read", "read", map[string]any{"filePath": "/w/a.go"}, actView{Action: ActionRead, Path: "/w/a.go", Ops: []FileOp{rd("/w/a.go", Range{})}}},
		{"opencode read offset", "read", map[string]any{"filePath": "/w/a.go", "offset": 20, "limit": 10},
			actView{Action: ActionRead, Path: "/w/a.go", Range: rg(20, 29), Ops: []FileOp{rd("/w/a.go", rg(20, 29))}}},
		{"opencode edit", "edit", map[string]any{"filePath": "/w/a.go", "oldString": "a", "newString": "b", "replaceAll": false},
			actView{Action: ActionEdit, Path: "/w/a.go", Ops: []FileOp{ed("/w/a.go")}}},
		{"opencode write", "write", map[string]any{"filePath": "/w/a.go", "content": "y"},
			actView{Action: ActionWrite, Path: "/w/a.go", Content: "y", Ops: []FileOp{wr("/w/a.go", "y")}}},
		{"opencode bash workdir", "bash", map[string]any{"command": "cat a.go", "description": "show", "workdir": "/w/sub"},
			actView{Action: ActionRead, Path: "/w/sub/a.go", Command: "cat a.go", Ops: []FileOp{rd("/w/sub/a.go", Range{})}}},
		{"opencode apply_patch", "apply_patch", map[string]any{"patchText": patch},
			actView{Action: ActionEdit, Path: "/w/notes.txt", Command: "apply_patch", Ops: []FileOp{ed("/w/notes.txt")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := actCall(t, tt.tool, tt.args, "/w")
			if d := cmp.Diff(tt.want, viewOf(c)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
