package transcript

import (
	"encoding/json"
	"path"
	"strings"
)

// Classify sets the call's Action, Path, Range, Content, Command and Summary from its
// tool name and arguments, mapping each agent's tool vocabulary onto DESIGN.md's
// read/edit/write/search/shell/other. cwd is the session's working directory, used
// to make relative paths absolute. Readers may refine the result afterwards from
// structured results (Claude Code's toolUseResult).
func (c *ToolCall) Classify(cwd string) {
	var args map[string]any
	_ = json.Unmarshal(c.Args, &args)
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := args[k].(string); ok && v != "" {
				return v
			}
		}
		return ""
	}
	name := strings.ToLower(c.Name)
	c.Action = ActionOther
	switch name {
	case "read", "read_file", "view":
		c.Action = ActionRead
		c.Path = NormalizePath(str("file_path", "path", "absolute_path"), cwd)
	case "edit", "multiedit", "replace", "str_replace":
		c.Action = ActionEdit
		c.Path = NormalizePath(str("file_path", "path"), cwd)
	case "write", "write_file", "create":
		c.Action = ActionWrite
		c.Path = NormalizePath(str("file_path", "path"), cwd)
		c.Content = str("content", "file_text")
	case "grep", "glob", "search_file_content", "find", "ls", "list_directory":
		c.Action = ActionSearch
	case "bash", "shell", "run_shell_command", "exec_command", "shell_command":
		c.Action = ActionShell
		c.Command = str("command", "cmd")
	}
	c.Summary = summarize(c, str)
}

func summarize(c *ToolCall, str func(...string) string) string {
	switch {
	case c.Path != "":
		return c.Path
	case c.Command != "":
		return oneLine(c.Command, 120)
	}
	if s := str("pattern", "query", "url", "description", "prompt"); s != "" {
		return oneLine(s, 120)
	}
	return oneLine(string(c.Args), 120)
}

// oneLine folds whitespace runs to single spaces and cuts to n runes with "…".
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// NormalizePath makes p comparable across calls: Windows drive forms (C:\x, C:/x,
// /c/x) become /c/x with forward slashes, "./" and ".." are resolved, and a relative
// path is joined to cwd when cwd is known. The empty string stays empty.
func NormalizePath(p, cwd string) string {
	p = strings.TrimSpace(p)
	if p == "" {
		return ""
	}
	p = strings.Trim(p, `"'`)
	win := func(s string) string {
		s = strings.ReplaceAll(s, `\`, "/")
		if len(s) >= 2 && s[1] == ':' && isLetter(s[0]) {
			s = "/" + strings.ToLower(s[:1]) + s[2:]
		}
		return s
	}
	p = win(p)
	if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "~") && cwd != "" {
		p = win(cwd) + "/" + p
	}
	return path.Clean(p)
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }
