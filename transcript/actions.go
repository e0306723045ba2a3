package transcript

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
	"github.com/pruneadvisor/pruneadvisor/transcript/internal/paths"
	"github.com/pruneadvisor/pruneadvisor/transcript/internal/shell"
)

// FileOp is one file access inside a tool call (ToolCall.Ops), in the order the call
// performs it.
type FileOp struct {
	// Action is ActionRead, ActionEdit or ActionWrite.
	Action Action
	// Path is the normalised path (NormalizePath). "" means "the file open in the
	// editor" (SWE-agent's windowed commands: edit, insert, goto, scroll_*): only
	// OpenFiles/ResolveOpenFiles can name it, and consumers skip ops without a path.
	Path string
	// Range is, for reads, the lines the output shows (the zero value is the whole
	// file; see Range for tails and unknown windows).
	Range Range
	// Content is, for ActionWrite, the whole new content of the file. A write whose
	// content is not known (`echo $x > f`, `cp a f`, a patch hunk) is an ActionEdit.
	Content string
}

// Classify sets the call's Action, Path, Range, Content, Command, Summary, Paths and
// Ops from its tool name and arguments, mapping each agent's tool vocabulary onto
// DESIGN.md's read/edit/write/search/shell/other (TRANSCRIPT-FORMATS.md lists the
// vocabularies): Claude Code (Read, Edit, MultiEdit, Write, NotebookEdit, Bash, Grep,
// Glob, LS, Task, TodoWrite, …), pi (read, edit with edits[], write, bash, grep,
// find, ls), Codex (exec_command with cmd and workdir, shell with argv,
// shell_command, apply_patch as function or custom tool whose Args is the patch as a
// JSON string), Gemini CLI (read_file with file_path and 1-based start_line/end_line,
// or the older absolute_path with a 0-based offset, read_many_files, write_file,
// replace, run_shell_command with dir_path, list_directory, glob,
// search_file_content), opencode (read with filePath and a 1-based offset, edit with
// filePath/oldString/newString, write, bash with workdir, apply_patch with
// patchText), SWE-agent
// (str_replace_editor, and the windowed open/goto/scroll/create/edit/insert commands,
// as functions or as text), OpenHands (run, read, edit with a command, write) and
// text-only trajectories whose Args is a JSON string holding a shell command.
//
// Shell commands are analysed (see analyzeShell in actions_shell.go): `cat`, `nl`,
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
// relative). Classify resets every field it sets, so calling it twice is harmless.
// Readers may refine the result afterwards from structured results.
func (c *ToolCall) Classify(cwd string) {
	c.Action, c.Path, c.Range, c.Content, c.Command, c.Summary = ActionOther, "", Range{}, "", "", ""
	c.Paths, c.Ops = nil, nil
	k := &classifier{c: c, a: decodeArgs(c.Args), cwd: cwd}
	k.classify(toolName(c.Name))
	c.derive()
	c.Summary = k.summary()
}

// classifier holds the state of one Classify call.
type classifier struct {
	c   *ToolCall
	a   callArgs
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
func (c *ToolCall) FileOps() []FileOp {
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
func (c *ToolCall) derive() {
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
	return oneLine(string(c.Args), 120)
}

// oneLine folds whitespace runs to single spaces and cuts to n runes with "…".
func oneLine(s string, n int) string {
	return textcut.RunesEllipsis(strings.Join(strings.Fields(s), " "), n)
}

// NormalizePath makes p comparable across calls and agents: surrounding quotes and
// blanks go, backslashes become slashes, the Windows drive forms C:\x, C:/x, /c/x,
// /C/x, /cygdrive/c/x and /mnt/c/x all become /c/x, a relative path is joined to cwd
// (itself normalised) when cwd is known, and "." and ".." are resolved (path.Clean).
// Paths starting with "~" are kept as written. The empty string stays empty.
func NormalizePath(p, cwd string) string { return paths.Normalize(p, cwd) }

// exit-status lines the agents append to shell output, each with where it is looked
// for (all seen in ../shared/sessions or documented in TRANSCRIPT-FORMATS.md).
var (
	exitClaude = regexp.MustCompile(`^Exit code (\d+)`)                        // Claude Code Bash error results
	exitPi     = regexp.MustCompile(`(?m)^Command exited with code (\d+)\s*$`) // pi bash, at the end
	exitCodex  = regexp.MustCompile(`(?m)^Process exited with code (\d+)`)     // Codex exec_command header
	exitMini   = regexp.MustCompile(`^\s*<returncode>(\d+)</returncode>`)      // mini-swe-agent observation
	exitGemini = regexp.MustCompile(`(?m)^Exit Code: (\d+)\s*$`)               // Gemini CLI run_shell_command
	exitJSON   = regexp.MustCompile(`"exit_code"\s*:\s*(-?\d+)`)               // Codex shell {"output","metadata"}
)

// editFailures are phrases edit and write tools answer with when nothing was changed
// (lower case; looked for in the first 1000 bytes of the output).
var editFailures = []string{
	"<tool_use_error>",                   // Claude Code: String to replace not found…, File has not been read yet…
	"string to replace not found",        // Claude Code Edit
	"old_string not found",               // Claude Code (older)
	"not found in file",                  // Claude Code
	"could not find the exact text",      // pi edit
	"no changes made to",                 // pi edit
	"your changes have not been applied", // SWE-agent windowed edit
	"your proposed edit has introduced",  // SWE-agent windowed edit (lint failure)
	"no replacement was performed",       // SWE-agent/OpenHands str_replace_editor
	"did not appear verbatim",            // str_replace_editor
	"failed to edit",                     // Gemini replace
	"0 occurrences found",                // Gemini replace
	"could not find the string to replace",
	"apply_patch verification failed", // Codex apply_patch
	"failed to find expected lines",   // Codex apply_patch
	"invalid patch",                   // Codex apply_patch
	"tool use was rejected",           // Claude Code permission denial
	"doesn't want to proceed",         // Claude Code permission denial
	"already exists",                  // SWE-agent create on an existing file
	"command aborted",                 // pi
}

// readFailures open the output of a read tool that read nothing (lower case, at the
// start of the output).
var readFailures = []string{
	"<tool_use_error>",    // Claude Code: File does not exist.
	"file does not exist", // Claude Code (older)
	"file not found",      // Gemini CLI read_file error
	"file content (",      // Claude Code: File content (N tokens) exceeds maximum allowed tokens
	"error:",              // OpenHands/str_replace_editor: ERROR: Invalid path…
	"error reading",       // generic
	"enoent",              // pi read: ENOENT: no such file or directory
	"no such file",        // shell-like tools
	"is a directory",      // read of a directory
	"usage:",              // SWE-agent open without arguments
}

// sweNotFound is SWE-agent's answer to open on a missing file: File x not found.
var sweNotFound = regexp.MustCompile(`^file \S+ not found`)

// Failed reports whether the output says its call did not do what it asked: the
// reader's IsError, a non-zero exit status in the agent's own words (Claude Code's
// "Exit code N", pi's "Command exited with code N", Codex's "Process exited with code
// N" and {"metadata":{"exit_code":N}}, mini-swe-agent's <returncode>, Gemini's "Exit
// Code: N"), for edits and writes a refusal such as "String to replace not found" or
// "Could not find the exact text" (editFailures), and for read tools an error where
// the content should start (readFailures). The rules use it so that a failed edit
// supersedes nothing and a failed read shows nothing.
func (o *ToolOutput) Failed() bool {
	if o.IsError {
		return true
	}
	t := o.Text
	c := o.Call
	if c == nil {
		return false
	}
	if c.Command != "" && exitFailed(t) {
		return true
	}
	edits := c.Action == ActionEdit || c.Action == ActionWrite
	if !edits {
		for _, op := range c.Ops {
			if op.Action != ActionRead {
				edits = true
				break
			}
		}
	}
	if edits {
		low := strings.ToLower(textcut.Bytes(t, 1000))
		for _, p := range editFailures {
			if strings.Contains(low, p) {
				return true
			}
		}
	}
	if c.Action == ActionRead && c.Command == "" {
		low := strings.ToLower(strings.TrimSpace(textcut.Bytes(t, 200)))
		for _, p := range readFailures {
			if strings.HasPrefix(low, p) {
				return true
			}
		}
		if sweNotFound.MatchString(low) {
			return true
		}
	}
	return false
}

// exitFailed finds a non-zero exit status in shell output.
func exitFailed(t string) bool {
	nonZero := func(m []string) bool { return m != nil && m[1] != "0" }
	head := textcut.Bytes(t, 600)
	tail := t
	if len(tail) > 600 {
		tail = tail[len(tail)-600:]
	}
	if nonZero(findWith(exitClaude, "Exit code ", head)) || nonZero(findWith(exitMini, "<returncode>", head)) ||
		nonZero(findWith(exitCodex, "Process exited with code ", head)) ||
		nonZero(findWith(exitPi, "Command exited with code ", tail)) ||
		nonZero(findWith(exitGemini, "Exit Code: ", tail)) {
		return true
	}
	if strings.HasPrefix(strings.TrimSpace(t), `{"output"`) {
		return nonZero(findWith(exitJSON, `"exit_code"`, tail))
	}
	return false
}

// findWith is re.FindStringSubmatch(s), answered nil at once when s lacks lit, a
// literal that every match of re holds: these patterns start with ^ or \s, so the
// regexp engine has no literal prefix to skip to and would try every position.
func findWith(re *regexp.Regexp, lit, s string) []string {
	if !strings.Contains(s, lit) {
		return nil
	}
	return re.FindStringSubmatch(s)
}

var showingLines = regexp.MustCompile(`Showing lines (\d+)-(\d+) of (\d+)`)

// elisions are markers of output cut in the middle (seen in ../shared/sessions:
// Claude Code Bash "[N characters truncated]", mini-swe-agent <elided_chars>;
// Codex "tokens truncated"; SWE-agent/OpenHands "<response clipped>").
var elisions = []string{
	"characters truncated]", "<elided_chars>", "tokens truncated", "chars truncated",
	"<response clipped>", "[... omitted", "lines omitted", "output truncated",
	"the output of your last command was too long",
}

// elisionMin is the length of the shortest elision marker: the window of
// hasElision's scan.
var elisionMin = func() int {
	m := len(elisions[0])
	for _, e := range elisions {
		m = min(m, len(e))
	}
	return m
}()

// elisionShift is the scan's shift table (Wu and Manber, "A fast algorithm for
// multi-pattern searching", TR-94-17, University of Arizona, 1994, with blocks of
// two bytes): for the two bytes that end the window, ASCII letters lowered (a
// block, foldBlock), how far the window may move on without passing the start of
// a marker. For a block in no marker's first elisionMin bytes that is
// elisionMin-1; 0 when it ends some marker's first elisionMin bytes, where the
// markers are compared.
var elisionShift = func() (t [1 << 16]uint8) {
	m := elisionMin
	for i := range t {
		t[i] = uint8(m - 1)
	}
	for _, e := range elisions {
		for q := 2; q <= m; q++ { // the block e[q-2:q] ends q bytes into the window
			k := foldBlock(e[q-2], e[q-1])
			t[k] = min(t[k], uint8(m-q))
		}
	}
	return t
}()

// foldBlock is the block of the bytes a, b: each lowered when an ASCII letter.
func foldBlock(a, b byte) int { return int(lowerASCII(a))<<8 | int(lowerASCII(b)) }

// lowerASCII lowers an ASCII upper-case letter, and returns any other byte as is.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// VisibleRange returns the lines of a read the output text really shows, given the
// range r the call asked for: a "Showing lines A-B of N" note (pi read and bash,
// Gemini read_file) narrows a whole-file read to A-B (a partial read with such a note,
// or Gemini's whole-file read with cut lines, becomes Unknown), and an elision marker
// in the middle makes it Unknown. Otherwise r is returned unchanged.
func VisibleRange(r Range, text string) Range {
	head := textcut.Bytes(text, 800)
	tail := text
	if len(tail) > 800 {
		tail = tail[len(tail)-800:]
	}
	m := showingLines.FindStringSubmatch(tail)
	if m == nil {
		m = showingLines.FindStringSubmatch(head)
	}
	if m != nil {
		if !r.Whole() {
			return UnknownRange()
		}
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		if a <= 1 && b >= n || b < a {
			return UnknownRange() // every line shown yet "truncated": lines were cut
		}
		return Range{Start: max(a, 1), End: b}
	}
	if hasElision(text) {
		return UnknownRange()
	}
	return r
}

// hasElision reports whether strings.ToLower(text) contains one of the elisions,
// without building a lowered copy of a text that has no elision marker: the markers
// are ASCII, and the only non-ASCII runes whose lower case is ASCII are U+0130 ('İ'
// to 'i') and U+212A (Kelvin sign to 'k'), so unless text holds one of those, a
// marker occurs in the lowered text exactly where it occurs in the text with only
// its ASCII letters lowered (bytes >= 0x80 never match an ASCII byte).
func hasElision(text string) bool {
	if strings.Contains(text, "\u0130") || strings.Contains(text, "\u212A") {
		low := strings.ToLower(text)
		for _, e := range elisions {
			if strings.Contains(low, e) {
				return true
			}
		}
		return false
	}
	return hasElisionFold(text)
}

// hasElisionFold reports whether text, with its ASCII letters lowered, contains one
// of the elisions. A window of elisionMin bytes moves over text by the shift of
// the block that ends it (elisionShift), and only where that is 0 are the markers
// compared with the text from the window's start: one pass that looks at one block
// in several bytes. The nine passes before, one per marker from a rarer anchor
// byte, stopped at about one byte in ten of tool output ('u', 'm', 'p', 'y', 'k'
// in both cases): 2.2 of the rules' 3.1 ms on a first request of 200,000 tokens.
func hasElisionFold(text string) bool {
	m := elisionMin
	for end := m - 1; end < len(text); {
		if s := elisionShift[foldBlock(text[end-1], text[end])]; s > 0 {
			end += int(s)
			continue
		}
		start := end - m + 1
		for _, e := range elisions {
			if start+len(e) <= len(text) && equalASCIIFold(text[start:start+len(e)], e) {
				return true
			}
		}
		end++
	}
	return false
}

// equalASCIIFold reports whether s with its ASCII letters lowered equals pat
// (ASCII lower case, as long as s).
func equalASCIIFold(s, pat string) bool {
	for k := 0; k < len(pat); k++ {
		b := s[k]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if b != pat[k] {
			return false
		}
	}
	return true
}

// OpenFiles follows SWE-agent's windowed editor, whose edit, insert, goto and
// scroll commands act on "the open file" that an earlier open or create chose; a
// per-call Classify cannot know it. Feed it every call and output in session order
// (Call when a call appears, Output when its result does); it fills in the path of ops
// Classify left without one, and sets the line window of open/goto/scroll (and the
// window an edit prints after applying) from the output's "[File: p (N lines total)]"
// header, "(K more lines above)" marker and numbered lines. Readers of SWE-agent
// trajectories call ResolveOpenFiles; a live caller keeps one OpenFiles per session.
type OpenFiles struct {
	Cwd     string // session working directory, for relative paths in headers
	current string
}

// Current returns the normalised path of the open file, "" when none is known.
func (t *OpenFiles) Current() string { return t.current }

// Call fills in c's ops on the open file and notes the file open/create opens.
func (t *OpenFiles) Call(c *ToolCall) {
	w := sweWord(c)
	if w == "" {
		return
	}
	ops := c.Ops[:0]
	for _, op := range c.Ops {
		if op.Path == "" {
			if t.current == "" {
				continue
			}
			op.Path = t.current
		}
		ops = append(ops, op)
	}
	c.Ops = ops
	if (w == "open" || w == "create") && len(c.Ops) > 0 {
		t.current = c.Ops[0].Path
	}
	c.refresh()
}

// Output refines o's call from what the output shows and follows the open file.
func (t *OpenFiles) Output(o *ToolOutput) {
	c := o.Call
	if c == nil {
		return
	}
	w := sweWord(c)
	file, win, ok := sweWindow(o.Text)
	if m := openFileStatus.FindStringSubmatch(o.Text); m != nil && m[1] != "n/a" {
		t.current = NormalizePath(m[1], t.Cwd)
	}
	if !ok || w == "" || o.Failed() {
		return
	}
	file = NormalizePath(file, t.Cwd)
	t.current = file
	switch w {
	case "open", "goto", "scroll_up", "scroll_down":
		c.Ops = []FileOp{{Action: ActionRead, Path: file, Range: win}}
	case "edit", "insert", "append":
		c.Ops = []FileOp{{Action: ActionEdit, Path: file}, {Action: ActionRead, Path: file, Range: win}}
	case "create":
		c.Ops = []FileOp{{Action: ActionWrite, Path: file}}
	default:
		return
	}
	c.refresh()
}

// ResolveOpenFiles runs an OpenFiles over the whole session (see OpenFiles).
func ResolveOpenFiles(s *Session) {
	t := &OpenFiles{Cwd: s.Cwd}
	for _, m := range s.Messages {
		for _, c := range m.Calls {
			t.Call(c)
		}
		for _, o := range m.Outputs {
			t.Output(o)
		}
	}
}

// refresh re-derives the call's fields from its ops after OpenFiles changed them.
func (c *ToolCall) refresh() {
	c.derive()
	k := &classifier{c: c, a: decodeArgs(c.Args)}
	c.Summary = k.summary()
}

// sweWord returns the SWE-agent windowed command a call runs, "" for any other call.
func sweWord(c *ToolCall) string {
	n := toolName(c.Name)
	switch n {
	case "open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert", "append":
		return n
	}
	if c.Command != "" {
		f := strings.Fields(c.Command)
		if len(f) > 0 {
			switch f[0] {
			case "open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert", "append":
				return f[0]
			}
		}
	}
	return ""
}

var (
	sweHeader      = regexp.MustCompile(`\[File: (.+?) \((\d+) lines total\)\]`)
	sweAbove       = regexp.MustCompile(`^\((\d+) more lines above\)$`)
	sweLine        = regexp.MustCompile(`^(\d+):`)
	openFileStatus = regexp.MustCompile(`\(Open file: ([^)\n]+)\)`)
)

// sweWindow parses SWE-agent's file window: exactly one "[File: p (N lines total)]"
// header, an optional "(K more lines above)", then numbered "L:text" lines. A window
// showing every line is the whole file.
func sweWindow(text string) (string, Range, bool) {
	hs := sweHeader.FindAllStringSubmatchIndex(text, -1)
	if len(hs) != 1 {
		return "", Range{}, false
	}
	h := hs[0]
	file := text[h[2]:h[3]]
	total, _ := strconv.Atoi(text[h[4]:h[5]])
	lines := strings.Split(text[h[1]:], "\n")
	above, first, last := 0, 0, 0
	for _, ln := range lines {
		ln = strings.TrimRight(ln, "\r")
		if first == 0 {
			if ln == "" {
				continue
			}
			if m := sweAbove.FindStringSubmatch(ln); m != nil {
				above, _ = strconv.Atoi(m[1])
				continue
			}
		}
		m := sweLine.FindStringSubmatch(ln)
		if m == nil {
			break
		}
		n, _ := strconv.Atoi(m[1])
		if first == 0 {
			first = n
		}
		last = n
	}
	if first == 0 {
		return "", Range{}, false
	}
	if above > 0 && first != above+1 {
		return "", Range{}, false
	}
	if first == 1 && last >= total {
		return file, Range{}, true
	}
	return file, Range{Start: first, End: last}, true
}

// classifyLike classifies c as if it were a call of tool name with args, then gives c
// back its own Name and Args. Readers use it when the arguments Classify needs are
// recorded somewhere other than the call's own Args (OpenHands keeps an old edit's
// editor command in the model's raw tool call).
func classifyLike(c *ToolCall, name string, args any, cwd string) {
	raw, err := json.Marshal(args)
	if err != nil {
		raw = []byte("{}")
	}
	tmp := *c
	tmp.Name, tmp.Args = name, raw
	tmp.Classify(cwd)
	tmp.Name, tmp.Args = c.Name, c.Args
	*c = tmp
}
