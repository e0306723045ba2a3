package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/pruneadvisor/pruneadvisor/toolcall/internal/shell"
)

// Classify returns the Classification (Action, Path, Range, Content, Command,
// Summary, Paths and Ops) of a call of tool name with arguments args (JSON: an
// object, an argument vector, or for text-only trajectories a JSON string holding
// the command; bytes that are not JSON are taken as the command text), mapping
// each agent's tool vocabulary onto docs/DESIGN.md's read/edit/write/search/shell/other
// (TRANSCRIPT-FORMATS.md lists the vocabularies): Claude Code (Read, Edit,
// MultiEdit, Write, NotebookEdit, Bash, Grep, Glob, LS, Task, TodoWrite, …), pi
// (read, edit with edits[], write, bash, grep, find, ls), Codex (exec_command with
// cmd and workdir, shell with argv, shell_command, apply_patch as function or
// custom tool whose Args is the patch as a JSON string), Gemini CLI (read_file with
// file_path and 1-based start_line/end_line, or the older absolute_path with a
// 0-based offset, read_many_files, write_file, replace, run_shell_command with
// dir_path, list_directory, glob, search_file_content), opencode (read with
// filePath and a 1-based offset, edit with filePath/oldString/newString, write,
// bash with workdir, apply_patch with patchText), SWE-agent (str_replace_editor,
// and the windowed open/goto/scroll/create/edit/insert commands, as functions or
// as text), OpenHands (run, read, edit with a command, write) and text-only
// trajectories whose Args is a JSON string holding a shell command.
//
// Shell commands are analysed (package internal/shell): `cat`, `nl`,
// `head`, `tail`, `sed -n 'a,bp'`, `awk 'NR>=a && NR<=b'` are reads with their line
// range, `sed -i`, `perl -i`, redirections, `tee`, `rm`, `mv`, `cp` are edits, a lone
// `cat <<'EOF' > f` (or `tee f <<'EOF'`) with a literal body is a write whose Content
// is the body, `apply_patch` is a patch, `grep`/`rg`/`find`/`ls` are searches, and cd
// (or the call's workdir / dir_path) moves the directory relative paths resolve
// against. A call that reads and does nothing else is ActionRead; one whose only file
// effects are edits (and reads) without other commands is ActionEdit (ActionWrite when
// every effect is a write with known content); one that only searches is
// ActionSearch; anything else is ActionShell, with Ops still listing what it did.
//
// cwd is the session's working directory for relative paths ("" leaves them
// relative). A call no vocabulary knows is ActionOther. Readers may refine the
// result afterwards from structured results.
func Classify(name string, args json.RawMessage, cwd string) Classification {
	c := Classification{Action: ActionOther}
	k := &classifier{c: &c, a: decodeArgs(args), raw: args, cwd: cwd}
	k.classify(toolName(name))
	c.derive()
	c.Summary = k.summary()
	return c
}

// classifier holds the state of one Classify call.
type classifier struct {
	c   *Classification
	a   callArgs
	raw json.RawMessage // the arguments as given, for the summary of calls without a better one
	cwd string
}

// callArgs is a call's arguments: an object, or a bare text (a JSON string argument,
// or bytes that are not JSON at all).
type callArgs struct {
	m    map[string]any
	text string
}

func decodeArgs(raw json.RawMessage) callArgs {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return callArgs{}
	}
	switch t[0] {
	case '{':
		var m map[string]any
		if json.Unmarshal(t, &m) == nil {
			return callArgs{m: m}
		}
	case '"':
		var s string
		if json.Unmarshal(t, &s) == nil {
			// doubly encoded object arguments
			if st := strings.TrimSpace(s); strings.HasPrefix(st, "{") {
				var m map[string]any
				if json.Unmarshal([]byte(st), &m) == nil {
					return callArgs{m: m}
				}
			}
			return callArgs{text: s}
		}
	case '[':
		var argv []any
		if json.Unmarshal(t, &argv) == nil {
			return callArgs{m: map[string]any{"command": argv}}
		}
	}
	return callArgs{text: string(raw)}
}

// str returns the first non-empty string argument among keys.
func (a callArgs) str(keys ...string) string {
	for _, k := range keys {
		if v, ok := a.m[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}

// has reports whether any of keys is present (whatever its value).
func (a callArgs) has(keys ...string) bool {
	for _, k := range keys {
		if _, ok := a.m[k]; ok {
			return true
		}
	}
	return false
}

// num returns the first numeric argument among keys (numbers or numeric strings).
func (a callArgs) num(keys ...string) (int, bool) {
	for _, k := range keys {
		switch v := a.m[k].(type) {
		case float64:
			return int(v), true
		case string:
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}

// list returns a string-array argument.
func (a callArgs) list(key string) []string {
	arr, ok := a.m[key].([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(arr))
	for _, v := range arr {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// nums returns an int-array argument ([a, b] view ranges).
func (a callArgs) nums(key string) []int {
	arr, ok := a.m[key].([]any)
	if !ok {
		return nil
	}
	out := make([]int, 0, len(arr))
	for _, v := range arr {
		switch x := v.(type) {
		case float64:
			out = append(out, int(x))
		case string:
			n, err := strconv.Atoi(x)
			if err != nil {
				return nil
			}
			out = append(out, n)
		}
	}
	return out
}

// toolName lower-cases a tool name and drops namespace prefixes ("functions.").
func toolName(n string) string {
	n = strings.ToLower(strings.TrimSpace(n))
	n = strings.TrimPrefix(n, "functions.")
	n = strings.TrimPrefix(n, "default_api.")
	n = strings.TrimPrefix(n, "default_api:")
	return n
}

// pathKeys are the argument names the agents' file tools give the path under, in
// every spelling seen: Claude Code and Gemini CLI file_path, pi and Codex path,
// Gemini CLI's older absolute_path, opencode filePath, Claude Code notebook_path,
// Cursor target_file, and the camelCase forms SDK-built tools use.
var pathKeys = []string{"file_path", "path", "absolute_path", "filePath", "notebook_path", "filename", "target_file",
	"file", "absolutePath", "notebookPath", "fileName", "targetFile"}

func (k *classifier) classify(name string) {
	a := k.a
	if a.m == nil && a.text != "" {
		if name == "apply_patch" || name == "applypatch" {
			k.patch(a.text, k.cwd)
			return
		}
		k.shell(a.text, k.cwd)
		return
	}
	if cmd, ok := a.m["command"].(string); ok && len(a.m) == 1 && name != "apply_patch" && name != "applypatch" {
		// {"command": "…"} alone is a command line, whatever the tool is called (text
		// trajectories name calls after the command's first word)
		k.shell(cmd, k.cwd)
		return
	}
	switch name {
	case "read", "view", "read_file", "readfile", "notebookread", "open_file":
		k.readTool(name)
	case "read_many_files":
		k.readMany()
	case "str_replace_editor", "str_replace_based_edit_tool", "text_editor", "file_editor":
		k.editor(a.str("command"))
	case "edit", "multiedit", "replace", "str_replace", "notebookedit", "edit_notebook", "search_replace", "insert", "append", "edit_file":
		if cmd := a.str("command"); cmd != "" && name != "multiedit" {
			k.editor(cmd)
			return
		}
		k.editTool()
	case "write", "write_file", "writefile", "create", "create_file":
		k.writeTool(name)
	case "open":
		k.sweOpen(a.str(pathKeys...))
	case "goto", "scroll_down", "scroll_up":
		k.set(ActionRead, FileOp{Action: ActionRead, Range: UnknownRange()})
	case "apply_patch", "applypatch":
		text := a.str("input", "patch", "patchText", "patch_text", "content", "diff")
		k.patch(text, k.cwd)
	case "grep", "glob", "search_file_content", "find", "ls", "list_directory", "list_dir", "find_file",
		"search_file", "search_dir", "rg", "codebase_search", "file_search", "grep_search", "list_files",
		"search_files", "filemap", "tree":
		k.c.Action = ActionSearch
	case "bash", "shell", "run_shell_command", "exec_command", "shell_command", "execute_bash", "run",
		"local_shell", "local_shell_call", "container.exec", "execute_command", "run_command", "terminal",
		"run_terminal_cmd", "cmd":
		k.shellTool()
	}
}

// set records the call's action and ops.
func (k *classifier) set(act Action, ops ...FileOp) {
	k.c.Action = act
	k.c.Ops = append(k.c.Ops[:0], ops...)
}

// path normalises a path argument against the session cwd.
func (k *classifier) path(p string) string { return NormalizePath(p, k.cwd) }

// readTool handles Read (Claude Code, pi: 1-based offset + limit), read_file (Gemini:
// 0-based offset + limit; Cursor: start/end_line_one_indexed), OpenHands read
// (0-based start, exclusive end, or view_range) and view (view_range).
func (k *classifier) readTool(name string) {
	a := k.a
	p := a.str(pathKeys...)
	if p == "" {
		return
	}
	r := Range{}
	off, hasOff := a.num("offset")
	lim, hasLim := a.num("limit")
	switch {
	case len(a.nums("view_range")) == 2:
		r = viewRange(a.nums("view_range"))
	case name == "read_file" && a.has("start_line", "end_line"):
		// Gemini CLI (0.61): 1-based start_line and end_line, both inclusive
		s, _ := a.num("start_line")
		e, _ := a.num("end_line")
		r = Range{Start: max(s, 1), End: max(e, 0)}
	case a.has("start_line_one_indexed"):
		s, _ := a.num("start_line_one_indexed")
		e, _ := a.num("end_line_one_indexed_inclusive")
		r = Range{Start: max(s, 1), End: max(e, 0)}
		if full, ok := a.m["should_read_entire_file"].(bool); ok && full {
			r = Range{}
		}
	case name == "read_file" && (hasOff || hasLim):
		start := max(off, 0) + 1
		r = Range{Start: start}
		if hasLim && lim > 0 {
			r.End = start + lim - 1
		}
	case hasOff || hasLim:
		start := max(off, 1)
		r = Range{Start: start}
		if hasLim && lim > 0 {
			r.End = start + lim - 1
		}
	case a.has("start", "end"):
		s, _ := a.num("start")
		e, hasEnd := a.num("end")
		r = Range{Start: max(s, 0) + 1}
		if hasEnd && e > 0 {
			r.End = e
		}
	}
	if r.Start == 1 && r.End == 0 {
		r = Range{}
	}
	k.set(ActionRead, FileOp{Action: ActionRead, Path: k.path(p), Range: r})
}

// viewRange converts str_replace_editor's [a, b] (b = -1: to the end).
func viewRange(v []int) Range {
	a, b := max(v[0], 1), v[1]
	if b < 0 {
		if a == 1 {
			return Range{}
		}
		return Range{Start: a}
	}
	if b < a {
		return Range{Start: a, End: a}
	}
	return Range{Start: a, End: b}
}

// readMany handles Gemini's read_many_files: literal paths are whole-file reads; any
// glob or include pattern makes it a search (which files it read is not known).
func (k *classifier) readMany() {
	paths := k.a.list("paths")
	if len(paths) == 0 {
		paths = k.a.list("file_paths")
	}
	if len(paths) == 0 || k.a.has("include") && len(k.a.list("include")) > 0 {
		k.c.Action = ActionSearch
		return
	}
	var ops []FileOp
	for _, p := range paths {
		if strings.ContainsAny(p, "*?[{") {
			k.c.Action = ActionSearch
			return
		}
		ops = append(ops, FileOp{Action: ActionRead, Path: k.path(p)})
	}
	k.set(ActionRead, ops...)
}

// editor dispatches str_replace_editor-style commands.
func (k *classifier) editor(cmd string) {
	a := k.a
	p := k.path(a.str(pathKeys...))
	switch cmd {
	case "view":
		r := Range{}
		if v := a.nums("view_range"); len(v) == 2 {
			r = viewRange(v)
		}
		if p != "" {
			k.set(ActionRead, FileOp{Action: ActionRead, Path: p, Range: r})
		}
	case "create", "write":
		if p == "" {
			return
		}
		if content, ok := a.m["file_text"].(string); ok {
			k.set(ActionWrite, FileOp{Action: ActionWrite, Path: p, Content: content})
		} else if content, ok := a.m["content"].(string); ok {
			k.set(ActionWrite, FileOp{Action: ActionWrite, Path: p, Content: content})
		} else {
			k.set(ActionEdit, FileOp{Action: ActionEdit, Path: p})
		}
	case "str_replace", "insert", "undo_edit", "append", "edit":
		if p != "" {
			k.set(ActionEdit, FileOp{Action: ActionEdit, Path: p})
		}
	}
}

var ohCommand = regexp.MustCompile(`'command':\s*'(\w+)'`)

// editTool handles edits without a command: Claude Edit/MultiEdit/NotebookEdit, pi
// edit, Gemini replace, OpenHands edit (command recovered from
// translated_ipython_code), and SWE-agent's edit/insert on the open file (no path).
func (k *classifier) editTool() {
	a := k.a
	if code := a.str("translated_ipython_code"); code != "" {
		if m := ohCommand.FindStringSubmatch(code); m != nil && m[1] != "create" {
			k.editor(m[1])
			return
		}
	}
	p := a.str(pathKeys...)
	if p == "" {
		if a.has("search", "replace", "text", "replacement", "start_line", "line") {
			k.set(ActionEdit, FileOp{Action: ActionEdit})
		}
		return
	}
	k.set(ActionEdit, FileOp{Action: ActionEdit, Path: k.path(p)})
}

// writeTool handles Write (Claude Code, pi), write_file (Gemini), OpenHands write
// (a partial write when start/end select lines) and SWE-agent create (an empty new
// file, which becomes the open file).
func (k *classifier) writeTool(name string) {
	a := k.a
	p := a.str(pathKeys...)
	if p == "" {
		return
	}
	p = k.path(p)
	var content string
	found := false
	for _, key := range []string{"content", "file_text", "contents", "text", "fileText"} {
		if v, ok := a.m[key].(string); ok {
			content, found = v, true
			break
		}
	}
	if a.has("start", "end") {
		s, _ := a.num("start")
		e, _ := a.num("end")
		if s > 1 || e != -1 {
			k.set(ActionEdit, FileOp{Action: ActionEdit, Path: p})
			return
		}
	}
	if !found && name != "create" {
		k.set(ActionEdit, FileOp{Action: ActionEdit, Path: p})
		return
	}
	k.set(ActionWrite, FileOp{Action: ActionWrite, Path: p, Content: content})
}

// sweOpen handles SWE-agent `open path [line]`. The window it shows is known only
// from the output (OpenFiles refines it), so until then the read covers nothing.
func (k *classifier) sweOpen(p string) {
	if p == "" {
		return
	}
	k.set(ActionRead, FileOp{Action: ActionRead, Path: k.path(p), Range: UnknownRange()})
}

// shellTool extracts the command and working directory of a shell tool call.
func (k *classifier) shellTool() {
	a := k.a
	dir := a.str("workdir", "dir_path", "directory", "cwd", "working_directory", "working_dir", "workingDirectory", "dirPath")
	v, ok := a.m["command"]
	if !ok {
		v = a.m["cmd"]
	}
	if act, ok := a.m["action"].(map[string]any); ok && v == nil { // local_shell_call
		v = act["command"]
		if d, ok := act["working_directory"].(string); ok && dir == "" {
			dir = d
		}
	}
	base := k.cwd
	if dir != "" {
		base = NormalizePath(dir, k.cwd)
	}
	switch x := v.(type) {
	case string:
		k.shell(x, base)
	case []any:
		argv := make([]string, 0, len(x))
		for _, s := range x {
			if str, ok := s.(string); ok {
				argv = append(argv, str)
			}
		}
		k.argv(argv, base)
	}
}

// argv handles a command given as an argument vector: ["bash", "-lc", cmd],
// ["apply_patch", patch], or a plain program with arguments.
func (k *classifier) argv(argv []string, dir string) {
	if len(argv) == 0 {
		return
	}
	prog := strings.ToLower(path.Base(strings.ReplaceAll(argv[0], `\`, "/")))
	switch {
	case (prog == "bash" || prog == "sh" || prog == "zsh" || prog == "dash") && len(argv) >= 3 &&
		strings.HasPrefix(argv[1], "-") && strings.Contains(argv[1], "c"):
		k.shell(argv[2], dir)
	case prog == "apply_patch" || prog == "applypatch":
		if len(argv) >= 2 {
			k.c.Command = "apply_patch"
			k.patch(argv[1], dir)
		}
	default:
		quoted := make([]string, len(argv))
		for i, s := range argv {
			quoted[i] = shell.Quote(s)
		}
		k.shell(strings.Join(quoted, " "), dir)
	}
}

// shell classifies a shell command run in dir.
func (k *classifier) shell(cmd, dir string) {
	k.c.Command = cmd
	if k.sweText(cmd, dir) {
		return
	}
	res := shell.Analyze(cmd, dir)
	k.c.Ops = fileOps(res.Ops)
	k.c.Action = Action(res.Kind())
}

// fileOps converts the shell analysis' ops (whose kinds and ranges are spelled as
// Action and Range are).
func fileOps(ops []shell.Op) []FileOp {
	if len(ops) == 0 {
		return nil
	}
	out := make([]FileOp, len(ops))
	for i, op := range ops {
		out[i] = FileOp{Action: Action(op.Kind), Path: op.Path, Range: Range(op.Range), Content: op.Content}
	}
	return out
}

// sweActionWords are SWE-agent's windowed-editor and search commands.
var sweActionWords = map[string]bool{
	"open": true, "goto": true, "scroll_up": true, "scroll_down": true, "create": true,
	"edit": true, "insert": true, "append": true, "search_file": true, "search_dir": true,
	"find_file": true, "submit": true, "filemap": true, "str_replace_editor": true,
}

var sweEditLine = regexp.MustCompile(`^(edit|insert|append)(\s+\d+(:\d+)?)?\s*$`)

// sweText recognises SWE-agent's text commands (v0 windowed editor, v1
// str_replace_editor as text); it reports whether it classified cmd.
func (k *classifier) sweText(cmd, dir string) bool {
	first, rest, _ := strings.Cut(strings.TrimLeft(cmd, " \t\n"), "\n")
	fields := strings.Fields(first)
	if len(fields) == 0 || !sweActionWords[fields[0]] {
		return false
	}
	rel := func(p string) string {
		return NormalizePath(strings.Trim(p, `"'`), dir)
	}
	switch fields[0] {
	case "open":
		if rest != "" || len(fields) < 2 || len(fields) > 3 || strings.HasPrefix(fields[1], "-") {
			return false // macOS open -a …, or not SWE-agent at all
		}
		k.set(ActionRead, FileOp{Action: ActionRead, Path: rel(fields[1]), Range: UnknownRange()})
	case "goto", "scroll_up", "scroll_down":
		if rest != "" || len(fields) > 2 {
			return false
		}
		k.set(ActionRead, FileOp{Action: ActionRead, Range: UnknownRange()})
	case "create":
		if rest != "" || len(fields) != 2 {
			return false
		}
		k.set(ActionWrite, FileOp{Action: ActionWrite, Path: rel(fields[1])})
	case "edit", "insert", "append":
		if !sweEditLine.MatchString(first) && !strings.Contains(rest, "end_of_") {
			return false
		}
		k.set(ActionEdit, FileOp{Action: ActionEdit})
	case "search_file", "search_dir", "find_file", "filemap":
		k.c.Action = ActionSearch
	case "submit":
		k.c.Action = ActionOther
	case "str_replace_editor":
		words, ok := shell.Words(cmd)
		if !ok || len(words) < 3 {
			return false
		}
		m := map[string]any{"command": words[1], "path": words[2]}
		for i := 3; i < len(words); i++ {
			if !strings.HasPrefix(words[i], "--") {
				continue
			}
			key := strings.TrimPrefix(words[i], "--")
			if key == "view_range" && i+2 < len(words) {
				m[key] = []any{words[i+1], words[i+2]}
				i += 2
			} else if i+1 < len(words) {
				m[key] = words[i+1]
				i++
			}
		}
		sub := &classifier{c: k.c, a: callArgs{m: m}, cwd: dir}
		sub.editor(words[1])
	}
	return true
}

// patch classifies an apply_patch call.
func (k *classifier) patch(text, dir string) {
	if k.c.Command == "" {
		k.c.Command = "apply_patch"
	}
	ops := fileOps(shell.ParsePatch(text, dir))
	if len(ops) == 0 {
		k.c.Action = ActionEdit
		return
	}
	act := ActionWrite
	for _, op := range ops {
		if op.Action != ActionWrite {
			act = ActionEdit
		}
	}
	k.set(act, ops...)
}

// FileOps returns the call's file accesses as consumers (the rules) should see them.
// Readers may refine Action, Path, Range and Content after Classify (Claude Code's
// structured Read result, SWE-agent's window) without touching Ops, so for a call
// with at most one op that is a read, edit or write the call-level fields win: the op
// is rebuilt from them (a write keeps the op's Content when the op is a write of the
// same path, else c.Content, and becomes an edit when neither holds content). Calls
// with several ops, or whose Action is shell/search/other, return Ops as they are.
// Ops without a path are dropped.
func (c *Classification) FileOps() []FileOp {
	var ops []FileOp
	if len(c.Ops) <= 1 && c.Path != "" && (c.Action == ActionRead || c.Action == ActionEdit || c.Action == ActionWrite) {
		op := FileOp{Action: c.Action, Path: c.Path}
		switch c.Action {
		case ActionRead:
			op.Range = c.Range
		case ActionWrite:
			switch {
			case len(c.Ops) == 1 && c.Ops[0].Action == ActionWrite && c.Ops[0].Path == c.Path:
				op.Content = c.Ops[0].Content
			case c.Content != "":
				op.Content = c.Content
			default:
				op.Action = ActionEdit
			}
		}
		return []FileOp{op}
	}
	for _, op := range c.Ops {
		if op.Path != "" {
			ops = append(ops, op)
		}
	}
	return ops
}

// derive sets Path, Paths, Range and Content from Ops.
func (c *Classification) derive() {
	c.Paths = nil
	seen := map[string]bool{}
	for _, op := range c.Ops {
		if op.Path != "" && !seen[op.Path] {
			seen[op.Path] = true
			c.Paths = append(c.Paths, op.Path)
		}
	}
	c.Path, c.Range, c.Content = "", Range{}, ""
	if len(c.Paths) > 0 {
		c.Path = c.Paths[0]
	}
	for _, op := range c.Ops {
		if op.Path != c.Path {
			continue
		}
		if c.Action == ActionRead && op.Action == ActionRead {
			c.Range = op.Range
			break
		}
		if c.Action == ActionWrite && op.Action == ActionWrite {
			c.Content = op.Content
			break
		}
	}
}

// summary is the one-line argument summary for cards and stubs: the command for
// shell calls, the path (with the range of a partial read) for file tools, the
// pattern and where for searches, else a description, prompt or URL.
func (k *classifier) summary() string {
	c, a := k.c, k.a
	if c.Command != "" {
		return oneLine(c.Command, 120)
	}
	if c.Path != "" {
		s := c.Path
		if c.Action == ActionRead && !c.Range.Whole() {
			s += ":" + c.Range.String()
		}
		if n := len(c.Paths); n > 1 {
			s += fmt.Sprintf(" (+%d more)", n-1)
		}
		return oneLine(s, 120)
	}
	if p := a.str("pattern", "query", "search_term", "regex", "file_name", "glob"); p != "" {
		if where := a.str("path", "dir_path", "dir", "directory", "file", "include"); where != "" {
			p += " in " + where
		}
		return oneLine(p, 120)
	}
	if s := a.str(slices.Concat(pathKeys, []string{"dir_path", "description", "prompt", "url", "subject", "question", "skill", "command"})...); s != "" {
		return oneLine(s, 120)
	}
	if a.m == nil && a.text != "" {
		return oneLine(a.text, 120)
	}
	return oneLine(string(k.raw), 120)
}

// oneLine folds whitespace runs to single spaces and cuts to n runes with "…".
func oneLine(s string, n int) string {
	return textcut.RunesEllipsis(strings.Join(strings.Fields(s), " "), n)
}
