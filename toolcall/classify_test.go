package toolcall

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// actCall classifies a call of tool name with args (a Go value marshalled to JSON,
// or json.RawMessage as is) against cwd.
func actCall(t *testing.T, name string, args any, cwd string) *Classification {
	t.Helper()
	raw, ok := args.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = b
	}
	c := Classify(name, raw, cwd)
	return &c
}

// actView is what the tests compare.
type actView struct {
	Action  Action
	Path    string
	Range   Range
	Content string
	Command string
	Ops     []FileOp
}

func viewOf(c *Classification) actView {
	return actView{c.Action, c.Path, c.Range, c.Content, c.Command, c.Ops}
}

func rd(p string, r Range) FileOp      { return FileOp{Action: ActionRead, Path: p, Range: r} }
func ed(p string) FileOp               { return FileOp{Action: ActionEdit, Path: p} }
func wr(p, content string) FileOp      { return FileOp{Action: ActionWrite, Path: p, Content: content} }
func rg(start, end int) Range          { return Range{Start: start, End: end} }
func shellArgs(cmd string) any         { return map[string]any{"command": cmd} }
func rawArgs(s string) json.RawMessage { return json.RawMessage(s) }

// TestClassifyTools covers each agent's structured tool vocabulary.
func TestClassifyTools(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n+\n+body\n*** Update File: src/a.go\n*** Move to: src/b.go\n@@ func A\n-a\n+b\n*** Delete File: old.txt\n*** End Patch\n"
	patchOps := []FileOp{wr("/r/docs/new.md", "# New\n\nbody\n"), ed("/r/src/a.go"), ed("/r/src/b.go"), ed("/r/old.txt")}
	tests := []struct {
		name string
		tool string
		args any
		cwd  string
		want actView
	}{
		// Claude Code
		{"claude Read", "Read", map[string]any{"file_path": "/r/a.go"}, "/r",
			actView{ActionRead, "/r/a.go", Range{}, "", "", []FileOp{rd("/r/a.go", Range{})}}},
		{"claude Read offset+limit", "Read", map[string]any{"file_path": "C:\\r\\a.go", "offset": 17, "limit": 30}, "",
			actView{ActionRead, "/c/r/a.go", rg(17, 46), "", "", []FileOp{rd("/c/r/a.go", rg(17, 46))}}},
		{"claude Read offset only", "Read", map[string]any{"file_path": "/r/a.go", "offset": 200}, "",
			actView{ActionRead, "/r/a.go", Range{Start: 200}, "", "", []FileOp{rd("/r/a.go", Range{Start: 200})}}},
		{"claude Edit", "Edit", map[string]any{"file_path": "a.go", "old_string": "x", "new_string": "y"}, "/r",
			actView{ActionEdit, "/r/a.go", Range{}, "", "", []FileOp{ed("/r/a.go")}}},
		{"claude MultiEdit", "MultiEdit", map[string]any{"file_path": "/r/a.go", "edits": []any{map[string]any{"old_string": "x", "new_string": "y"}}}, "",
			actView{ActionEdit, "/r/a.go", Range{}, "", "", []FileOp{ed("/r/a.go")}}},
		{"claude Write", "Write", map[string]any{"file_path": "/r/a.go", "content": "package a\n"}, "",
			actView{ActionWrite, "/r/a.go", Range{}, "package a\n", "", []FileOp{wr("/r/a.go", "package a\n")}}},
		{"claude Write empty", "Write", map[string]any{"file_path": "/r/empty", "content": ""}, "",
			actView{ActionWrite, "/r/empty", Range{}, "", "", []FileOp{wr("/r/empty", "")}}},
		{"claude NotebookEdit", "NotebookEdit", map[string]any{"notebook_path": "/r/n.ipynb", "cell_id": "x", "new_source": "1"}, "",
			actView{ActionEdit, "/r/n.ipynb", Range{}, "", "", []FileOp{ed("/r/n.ipynb")}}},
		{"claude Bash", "Bash", map[string]any{"command": "cat README.md", "description": "Show readme"}, "/r",
			actView{ActionRead, "/r/README.md", Range{}, "", "cat README.md", []FileOp{rd("/r/README.md", Range{})}}},
		{"claude Grep", "Grep", map[string]any{"pattern": "func A", "path": "/r/src"}, "",
			actView{ActionSearch, "", Range{}, "", "", nil}},
		{"claude Glob", "Glob", map[string]any{"pattern": "**/*.go"}, "", actView{ActionSearch, "", Range{}, "", "", nil}},
		{"claude LS", "LS", map[string]any{"path": "/r"}, "", actView{ActionSearch, "", Range{}, "", "", nil}},
		{"claude Task", "Task", map[string]any{"description": "find it", "prompt": "…", "subagent_type": "x"}, "", actView{ActionOther, "", Range{}, "", "", nil}},
		{"claude TodoWrite", "TodoWrite", map[string]any{"todos": []any{}}, "", actView{ActionOther, "", Range{}, "", "", nil}},
		{"claude Skill", "Skill", map[string]any{"skill": "pdf"}, "", actView{ActionOther, "", Range{}, "", "", nil}},
		{"claude WebFetch", "WebFetch", map[string]any{"url": "https://x", "prompt": "p"}, "", actView{ActionOther, "", Range{}, "", "", nil}},
		// pi
		{"pi read", "read", map[string]any{"path": "src/a.ts", "offset": 100, "limit": 20}, "/p",
			actView{ActionRead, "/p/src/a.ts", rg(100, 119), "", "", []FileOp{rd("/p/src/a.ts", rg(100, 119))}}},
		{"pi edit", "edit", map[string]any{"path": "/p/a.ts", "oldText": "x", "newText": "y"}, "",
			actView{ActionEdit, "/p/a.ts", Range{}, "", "", []FileOp{ed("/p/a.ts")}}},
		{"pi write", "write", map[string]any{"path": "/p/a.ts", "content": "x\n"}, "",
			actView{ActionWrite, "/p/a.ts", Range{}, "x\n", "", []FileOp{wr("/p/a.ts", "x\n")}}},
		{"pi bash", "bash", map[string]any{"command": "sed -n '796,825p' /p/README.md", "timeout": 10}, "",
			actView{ActionRead, "/p/README.md", rg(796, 825), "", "sed -n '796,825p' /p/README.md", []FileOp{rd("/p/README.md", rg(796, 825))}}},
		{"pi grep", "grep", map[string]any{"pattern": "x", "path": "."}, "", actView{ActionSearch, "", Range{}, "", "", nil}},
		{"pi find", "find", map[string]any{"pattern": "*.ts"}, "", actView{ActionSearch, "", Range{}, "", "", nil}},
		{"pi ls", "ls", map[string]any{"path": "."}, "", actView{ActionSearch, "", Range{}, "", "", nil}},
		// Codex
		{"codex exec_command", "exec_command", map[string]any{"cmd": "nl -ba src/main.rs | sed -n '1,80p'", "workdir": "/repo"}, "/elsewhere",
			actView{ActionRead, "/repo/src/main.rs", rg(1, 80), "", "nl -ba src/main.rs | sed -n '1,80p'", []FileOp{rd("/repo/src/main.rs", rg(1, 80))}}},
		{"codex shell bash -lc", "shell", map[string]any{"command": []any{"bash", "-lc", "sed -n '10,20p' lib.rs"}, "workdir": "/repo/src", "timeout_ms": 1000}, "",
			actView{ActionRead, "/repo/src/lib.rs", rg(10, 20), "", "sed -n '10,20p' lib.rs", []FileOp{rd("/repo/src/lib.rs", rg(10, 20))}}},
		{"codex shell argv", "shell", map[string]any{"command": []any{"cat", "my file.txt"}, "workdir": "/repo"}, "",
			actView{ActionRead, "/repo/my file.txt", Range{}, "", "cat 'my file.txt'", []FileOp{rd("/repo/my file.txt", Range{})}}},
		{"codex shell apply_patch argv", "shell", map[string]any{"command": []any{"apply_patch", patch}, "workdir": "/r"}, "",
			actView{ActionEdit, "/r/docs/new.md", Range{}, "", "apply_patch", patchOps}},
		{"codex shell_command", "shell_command", map[string]any{"command": "rg -n 'fn main' src"}, "/repo",
			actView{ActionSearch, "", Range{}, "", "rg -n 'fn main' src", nil}},
		{"codex apply_patch custom (JSON string)", "apply_patch", rawArgs(mustJSON(t, patch)), "/r",
			actView{ActionEdit, "/r/docs/new.md", Range{}, "", "apply_patch", patchOps}},
		{"codex apply_patch function input", "apply_patch", map[string]any{"input": patch}, "/r",
			actView{ActionEdit, "/r/docs/new.md", Range{}, "", "apply_patch", patchOps}},
		{"codex apply_patch raw text", "apply_patch", rawArgs(patch), "/r",
			actView{ActionEdit, "/r/docs/new.md", Range{}, "", "apply_patch", patchOps}},
		{"codex apply_patch add only", "apply_patch", rawArgs(mustJSON(t, "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch")), "/r",
			actView{ActionWrite, "/r/a.txt", Range{}, "hi\n", "apply_patch", []FileOp{wr("/r/a.txt", "hi\n")}}},
		{"codex exec_command apply_patch heredoc", "exec_command", map[string]any{"cmd": "apply_patch <<'PATCH'\n" + patch + "PATCH\n", "workdir": "/r"}, "",
			actView{ActionEdit, "/r/docs/new.md", Range{}, "", "apply_patch <<'PATCH'\n" + patch + "PATCH\n", patchOps}},
		// Gemini CLI
		{"gemini read_file", "read_file", map[string]any{"file_path": "Gemini-Playground/index.html"}, "/home/m",
			actView{ActionRead, "/home/m/Gemini-Playground/index.html", Range{}, "", "", []FileOp{rd("/home/m/Gemini-Playground/index.html", Range{})}}},
		{"gemini read_file 0-based offset", "read_file", map[string]any{"absolute_path": "/h/j.md", "offset": 10, "limit": 5}, "",
			actView{ActionRead, "/h/j.md", rg(11, 15), "", "", []FileOp{rd("/h/j.md", rg(11, 15))}}},
		{"gemini read_file limit", "read_file", map[string]any{"file_path": "M-Gemini/scripts/sync_raw_logs.py", "limit": 50}, "",
			actView{ActionRead, "M-Gemini/scripts/sync_raw_logs.py", rg(1, 50), "", "", []FileOp{rd("M-Gemini/scripts/sync_raw_logs.py", rg(1, 50))}}},
		{"gemini read_many_files", "read_many_files", map[string]any{"paths": []any{"a.md", "b.md"}}, "/h",
			actView{ActionRead, "/h/a.md", Range{}, "", "", []FileOp{rd("/h/a.md", Range{}), rd("/h/b.md", Range{})}}},
		{"gemini read_many_files glob", "read_many_files", map[string]any{"paths": []any{"docs/*.md"}}, "/h", actView{ActionSearch, "", Range{}, "", "", nil}},
		{"gemini write_file", "write_file", map[string]any{"file_path": "README.md", "content": "# W\n"}, "/h",
			actView{ActionWrite, "/h/README.md", Range{}, "# W\n", "", []FileOp{wr("/h/README.md", "# W\n")}}},
		{"gemini replace", "replace", map[string]any{"file_path": "/h/x.toml", "old_string": "a", "new_string": "b", "instruction": "i"}, "",
			actView{ActionEdit, "/h/x.toml", Range{}, "", "", []FileOp{ed("/h/x.toml")}}},
		{"gemini run_shell_command dir_path", "run_shell_command", map[string]any{"command": "git status", "dir_path": "M-Gemini"}, "/h",
			actView{ActionShell, "", Range{}, "", "git status", nil}},
		{"gemini list_directory", "list_directory", map[string]any{"dir_path": "M-Gemini"}, "", actView{ActionSearch, "", Range{}, "", "", nil}},
		{"gemini search_file_content", "search_file_content", map[string]any{"pattern": "x"}, "", actView{ActionSearch, "", Range{}, "", "", nil}},
		{"gemini google_web_search", "google_web_search", map[string]any{"query": "x"}, "", actView{ActionOther, "", Range{}, "", "", nil}},
		// SWE-agent function calls
		{"swe str_replace_editor view", "str_replace_editor", map[string]any{"command": "view", "path": "/testbed/setup.py", "view_range": []any{10, -1}}, "",
			actView{ActionRead, "/testbed/setup.py", Range{Start: 10}, "", "", []FileOp{rd("/testbed/setup.py", Range{Start: 10})}}},
		{"swe str_replace_editor create", "str_replace_editor", map[string]any{"command": "create", "path": "/testbed/r.py", "file_text": "print(1)\n"}, "",
			actView{ActionWrite, "/testbed/r.py", Range{}, "print(1)\n", "", []FileOp{wr("/testbed/r.py", "print(1)\n")}}},
		{"swe str_replace_editor str_replace", "str_replace_editor", map[string]any{"command": "str_replace", "path": "/testbed/r.py", "old_str": "1", "new_str": "2"}, "",
			actView{ActionEdit, "/testbed/r.py", Range{}, "", "", []FileOp{ed("/testbed/r.py")}}},
		{"swe str_replace_editor undo_edit", "str_replace_editor", map[string]any{"command": "undo_edit", "path": "/testbed/r.py"}, "",
			actView{ActionEdit, "/testbed/r.py", Range{}, "", "", []FileOp{ed("/testbed/r.py")}}},
		{"swe open", "open", map[string]any{"path": "src/marshmallow/fields.py", "line_number": 1474}, "/testbed",
			actView{ActionRead, "/testbed/src/marshmallow/fields.py", UnknownRange(), "", "", []FileOp{rd("/testbed/src/marshmallow/fields.py", UnknownRange())}}},
		{"swe create", "create", map[string]any{"filename": "reproduce.py"}, "/testbed",
			actView{ActionWrite, "/testbed/reproduce.py", Range{}, "", "", []FileOp{wr("/testbed/reproduce.py", "")}}},
		{"swe edit on the open file", "edit", map[string]any{"search": "return int(value", "replace": "return int(round(value"}, "",
			actView{ActionEdit, "", Range{}, "", "", []FileOp{{Action: ActionEdit}}}},
		{"swe find_file", "find_file", map[string]any{"file_name": "fields.py", "dir": "src"}, "", actView{ActionSearch, "", Range{}, "", "", nil}},
		{"swe submit", "submit", map[string]any{}, "", actView{ActionOther, "", Range{}, "", "", nil}},
		// SWE-agent and mini-swe-agent text actions
		{"swe text open", "open", shellArgs("open pydicom/pixel_data_handlers/numpy_handler.py 293"), "/pydicom__pydicom",
			actView{ActionRead, "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py", UnknownRange(), "", "open pydicom/pixel_data_handlers/numpy_handler.py 293",
				[]FileOp{rd("/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py", UnknownRange())}}},
		{"swe text edit", "edit", shellArgs("edit 287:295\n    required_elements = [\nend_of_edit"), "",
			actView{ActionEdit, "", Range{}, "", "edit 287:295\n    required_elements = [\nend_of_edit", []FileOp{{Action: ActionEdit}}}},
		{"swe text create", "bash", shellArgs("create reproduce_bug.py\n"), "/pydicom__pydicom",
			actView{ActionWrite, "/pydicom__pydicom/reproduce_bug.py", Range{}, "", "create reproduce_bug.py\n", []FileOp{wr("/pydicom__pydicom/reproduce_bug.py", "")}}},
		{"swe text str_replace_editor", "bash", shellArgs("str_replace_editor view /testbed/setup.py --view_range 1 20"), "",
			actView{ActionRead, "/testbed/setup.py", rg(1, 20), "", "str_replace_editor view /testbed/setup.py --view_range 1 20", []FileOp{rd("/testbed/setup.py", rg(1, 20))}}},
		{"text-only args string", "bash", rawArgs(`"nl -ba lib/matplotlib/text.py | sed -n '1120,1140p'"`), "/testbed",
			actView{ActionRead, "/testbed/lib/matplotlib/text.py", rg(1120, 1140), "", "nl -ba lib/matplotlib/text.py | sed -n '1120,1140p'", []FileOp{rd("/testbed/lib/matplotlib/text.py", rg(1120, 1140))}}},
		{"macOS open is no SWE-agent command", "Bash", shellArgs("open -a Safari index.html"), "/r",
			actView{ActionShell, "", Range{}, "", "open -a Safari index.html", nil}},
		// OpenHands
		{"openhands run", "run", map[string]any{"command": "mkdir -p /workspace/todo-app", "is_input": false}, "",
			actView{ActionShell, "", Range{}, "", "mkdir -p /workspace/todo-app", nil}},
		{"openhands read", "read", map[string]any{"path": "/workspace/a.py", "start": 0, "end": -1}, "",
			actView{ActionRead, "/workspace/a.py", Range{}, "", "", []FileOp{rd("/workspace/a.py", Range{})}}},
		{"openhands edit view", "edit", map[string]any{"path": "/workspace/a.py", "command": "view", "view_range": []any{5, 9}}, "",
			actView{ActionRead, "/workspace/a.py", rg(5, 9), "", "", []FileOp{rd("/workspace/a.py", rg(5, 9))}}},
		{"openhands edit create (ipython)", "edit", map[string]any{"path": "/workspace/g.py", "content": "", "start": 1, "end": -1,
			"translated_ipython_code": "print(file_editor(**{'command': 'view', 'path': '/workspace/g.py'}))"}, "",
			actView{ActionRead, "/workspace/g.py", Range{}, "", "", []FileOp{rd("/workspace/g.py", Range{})}}},
		{"openhands write", "write", map[string]any{"path": "/workspace/a.py", "content": "x\n", "start": 0, "end": -1}, "",
			actView{ActionWrite, "/workspace/a.py", Range{}, "x\n", "", []FileOp{wr("/workspace/a.py", "x\n")}}},
		{"openhands partial write", "write", map[string]any{"path": "/workspace/a.py", "content": "x\n", "start": 3, "end": 5}, "",
			actView{ActionEdit, "/workspace/a.py", Range{}, "", "", []FileOp{ed("/workspace/a.py")}}},
		// anything else
		{"mcp tool", "mcp__github__create_issue", map[string]any{"title": "x"}, "", actView{ActionOther, "", Range{}, "", "", nil}},
		{"no args", "Read", rawArgs(""), "", actView{ActionOther, "", Range{}, "", "", nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := actCall(t, tt.tool, tt.args, tt.cwd)
			if diff := cmp.Diff(tt.want, viewOf(c)); diff != "" {
				t.Errorf("Classify(%s %v) (-want +got):\n%s", tt.tool, tt.args, diff)
			}
			// Classify depends on its arguments alone: a second run gives the same result.
			again := actCall(t, tt.tool, tt.args, tt.cwd)
			if diff := cmp.Diff(viewOf(c), viewOf(again)); diff != "" {
				t.Errorf("second Classify differs (-first +second):\n%s", diff)
			}
		})
	}
}

// jsonQuote quotes s as a JSON string.
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestClassifyShell runs real command lines taken from ../shared/sessions (noted per
// row) through Classify: Command, the action (one row per kind the analysis gives,
// ranges of each form) and the ops. internal/shell's TestAnalyze runs 55 more through
// the analysis itself.
func TestClassifyShell(t *testing.T) {
	const dj = "/testbed/django/db/models/constraints.py"
	heredoc := "cat <<'EOF' > reproduce_issue.py\nimport os\nimport django\n\nprint(f\"{os.sep}\")\nEOF"
	tests := []struct {
		src string // which session the command comes from
		cmd string
		dir string
		act Action
		ops []FileOp
	}{
		{"django", "sed -n '18,50p' django/db/models/constraints.py", "/testbed", ActionRead, []FileOp{rd(dj, rg(18, 50))}},
		{"django", "tail -n 20 django/db/models/constraints.py", "/testbed", ActionRead, []FileOp{rd(dj, TailRange(20))}},
		{"django", heredoc, "/testbed", ActionWrite, []FileOp{wr("/testbed/reproduce_issue.py", "import os\nimport django\n\nprint(f\"{os.sep}\")\n")}},
		{"django", "grep -n \"def unique_error_message\" django/db/models/base.py", "/testbed", ActionSearch, nil},
		{"django", "python reproduce_issue.py", "/testbed", ActionShell, nil},
		{"sympy", "rm reproduce_issue.py check_iter.py check_finiteset.py", "/testbed", ActionEdit,
			[]FileOp{ed("/testbed/reproduce_issue.py"), ed("/testbed/check_iter.py"), ed("/testbed/check_finiteset.py")}},
		{"pytest", "sed -n '/class BaseReport/,/def __init__/p' src/_pytest/reports.py", "/testbed", ActionRead, []FileOp{rd("/testbed/src/_pytest/reports.py", UnknownRange())}},
		{"pi", "cd /Users/badlogic/workspaces/pi-mono && tail -30 packages/coding-agent/src/core/agent-session.ts", "/elsewhere", ActionRead,
			[]FileOp{rd("/Users/badlogic/workspaces/pi-mono/packages/coding-agent/src/core/agent-session.ts", TailRange(30))}},
		{"claude", `cd "C:\Users\Mischa\.claude-worktrees\M-Claude\unruffled-mcclintock" && cat scripts/search.py`, "", ActionRead,
			[]FileOp{rd("/c/Users/Mischa/.claude-worktrees/M-Claude/unruffled-mcclintock/scripts/search.py", Range{})}},
		{"shell", "echo 'x = 1' > a.py && cat a.py", "/r", ActionEdit, []FileOp{wr("/r/a.py", "x = 1\n"), rd("/r/a.py", Range{})}},
	}
	for _, tt := range tests {
		t.Run(tt.src+": "+oneLine(tt.cmd, 60), func(t *testing.T) {
			c := actCall(t, "bash", shellArgs(tt.cmd), tt.dir)
			if c.Command != tt.cmd {
				t.Errorf("Command = %q, want %q", c.Command, tt.cmd)
			}
			if c.Action != tt.act {
				t.Errorf("Action = %s, want %s", c.Action, tt.act)
			}
			if diff := cmp.Diff(tt.ops, c.Ops); diff != "" {
				t.Errorf("Ops (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClassifyPathsAndSummary checks Paths and Summary.
func TestClassifyPathsAndSummary(t *testing.T) {
	tests := []struct {
		tool    string
		args    any
		paths   []string
		summary string
	}{
		{"Read", map[string]any{"file_path": "/r/a.go", "offset": 10, "limit": 5}, []string{"/r/a.go"}, "/r/a.go:10-14"},
		{"Bash", shellArgs("cat a.go b.go a.go"), []string{"/r/a.go", "/r/b.go"}, "cat a.go b.go a.go"},
		{"Grep", map[string]any{"pattern": "func A", "path": "/r/src"}, nil, "func A in /r/src"},
		{"Task", map[string]any{"description": "Find   the\nbug", "prompt": "long"}, nil, "Find the bug"},
		{"WebFetch", map[string]any{"url": "https://example.com", "prompt": "summarise"}, nil, "summarise"},
		{"read_many_files", map[string]any{"paths": []any{"a.md", "b.md"}}, []string{"/r/a.md", "/r/b.md"}, "/r/a.md (+1 more)"},
		{"Bash", shellArgs(strings.Repeat("x", 200)), nil, strings.Repeat("x", 119) + "…"},
	}
	for _, tt := range tests {
		c := actCall(t, tt.tool, tt.args, "/r")
		if diff := cmp.Diff(tt.paths, c.Paths); diff != "" {
			t.Errorf("%s %v: Paths (-want +got):\n%s", tt.tool, tt.args, diff)
		}
		if c.Summary != tt.summary {
			t.Errorf("%s %v: Summary = %q, want %q", tt.tool, tt.args, c.Summary, tt.summary)
		}
	}
}

func TestRangeForms(t *testing.T) {
	tests := []struct {
		r, o Range
		want bool
	}{
		{Range{}, rg(5, 9), true},
		{Range{}, TailRange(5), true},
		{Range{}, UnknownRange(), true},
		{rg(1, 0), rg(3, 4), true},
		{rg(200, 250), Range{}, false},
		{rg(190, 260), rg(200, 250), true},
		{rg(200, 250), rg(190, 260), false},
		{Range{Start: 10}, rg(12, 400), true},
		{Range{Start: 10}, Range{Start: 5}, false},
		{rg(1, 50), Range{Start: 10}, false},
		{TailRange(20), TailRange(5), true},
		{TailRange(5), TailRange(20), false},
		{TailRange(20), rg(1, 2), false},
		{rg(1, 100000), TailRange(1), false},
		{Range{Start: 1}, TailRange(3), true},
		{UnknownRange(), UnknownRange(), false},
		{rg(1, 10), UnknownRange(), false},
	}
	for _, tt := range tests {
		if got := tt.r.Covers(tt.o); got != tt.want {
			t.Errorf("%v.Covers(%v) = %v, want %v", tt.r, tt.o, got, tt.want)
		}
	}
	strs := map[Range]string{{}: "all", rg(3, 4): "3-4", {Start: 7}: "7-end", TailRange(5): "last 5", UnknownRange(): "part"}
	for r, want := range strs {
		if r.String() != want {
			t.Errorf("%#v.String() = %q, want %q", r, r.String(), want)
		}
	}
	if TailRange(5).Whole() || UnknownRange().Whole() || !(Range{Start: 1}).Whole() {
		t.Errorf("Whole wrong for tail/unknown/start-1")
	}
}

func TestVisibleRange(t *testing.T) {
	tests := []struct {
		name string
		r    Range
		text string
		want Range
	}{
		{"plain", Range{}, "a\nb\n", Range{}},
		{"pi read truncated", Range{}, "x\n\n[Showing lines 1-1603 of 2377 (50.0KB limit). Use offset=1604 to continue]", rg(1, 1603)},
		{"pi bash tail", Range{}, "y\n\n[Showing lines 1464-2638 of 2638 (50.0KB limit). Full output: /tmp/x.log]", rg(1464, 2638)},
		{"gemini partial", Range{}, "\nIMPORTANT: The file content has been truncated.\nStatus: Showing lines 1-50 of 195 total lines.\nAction: …", rg(1, 50)},
		{"gemini long lines cut", Range{}, "\nIMPORTANT: The file content has been truncated.\nStatus: Showing lines 1-119 of 119 total lines.\n", UnknownRange()},
		{"note on a partial read", rg(100, 200), "[Showing lines 100-150 of 900]", UnknownRange()},
		{"claude bash elision", Range{}, "a\n... [600615 characters truncated] ...\nb", UnknownRange()},
		{"mini elision", rg(1, 10), "<output_head>\na\n</output_head>\n<elided_chars>\n100 characters elided\n</elided_chars>", UnknownRange()},
		{"partial unchanged", rg(5, 9), "x", rg(5, 9)},
	}
	for _, tt := range tests {
		if got := VisibleRange(tt.r, tt.text); got != tt.want {
			t.Errorf("%s: VisibleRange = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestFileOps checks that readers' refinements of the call-level fields win for
// single-file calls.
func TestFileOps(t *testing.T) {
	c := actCall(t, "read", map[string]any{"path": "/t/f.py"}, "")
	c.Range = rg(1459, 1558) // a reader narrowed it from the output
	if diff := cmp.Diff([]FileOp{rd("/t/f.py", rg(1459, 1558))}, c.FileOps()); diff != "" {
		t.Errorf("refined read (-want +got):\n%s", diff)
	}
	w := actCall(t, "Write", map[string]any{"file_path": "/t/f.py", "content": ""}, "")
	if diff := cmp.Diff([]FileOp{wr("/t/f.py", "")}, w.FileOps()); diff != "" {
		t.Errorf("empty write (-want +got):\n%s", diff)
	}
	w2 := &Classification{Action: ActionWrite, Path: "/t/g.py"} // set by a reader, content unknown
	if diff := cmp.Diff([]FileOp{ed("/t/g.py")}, w2.FileOps()); diff != "" {
		t.Errorf("write without content (-want +got):\n%s", diff)
	}
	m := actCall(t, "Bash", shellArgs("cat a b"), "/t")
	if diff := cmp.Diff([]FileOp{rd("/t/a", Range{}), rd("/t/b", Range{})}, m.FileOps()); diff != "" {
		t.Errorf("multi (-want +got):\n%s", diff)
	}
	swe := actCall(t, "edit", map[string]any{"search": "a", "replace": "b"}, "")
	if got := swe.FileOps(); got != nil {
		t.Errorf("edit of an unknown open file: FileOps = %v, want none", got)
	}
}
