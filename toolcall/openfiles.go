package toolcall

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// OpenFiles follows SWE-agent's windowed editor, whose edit, insert, goto and
// scroll commands act on "the open file" that an earlier open or create chose; a
// per-call Classify cannot know it. Feed it every call and output in session order
// (Call when a call appears, Output when its result does), each with the call's
// tool name, arguments and Classification; it fills in the path of ops Classify
// left without one, and sets the line window of open/goto/scroll (and the window
// an edit prints after applying) from the output's "[File: p (N lines total)]"
// header, "(K more lines above)" marker and numbered lines. Readers of SWE-agent
// trajectories run one over the whole session (package transcript's
// ResolveOpenFiles); a live caller keeps one OpenFiles per session.
type OpenFiles struct {
	Cwd     string // session working directory, for relative paths in headers
	current string
}

// Current returns the normalised path of the open file, "" when none is known.
func (t *OpenFiles) Current() string { return t.current }

// Call fills in the ops on the open file of c, the Classification of a call of
// tool name with arguments args, and notes the file open/create opens.
func (t *OpenFiles) Call(name string, args json.RawMessage, c *Classification) {
	w := sweWord(name, c.Command)
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
	c.refresh(args)
}

// Output refines c, the Classification of a call of tool name with arguments args,
// from text, the output that came back for it, and follows the open file. isError
// is the reader's failure flag for the output; a failed output (isError, or
// c.Failed(text)) refines nothing.
func (t *OpenFiles) Output(name string, args json.RawMessage, c *Classification, text string, isError bool) {
	w := sweWord(name, c.Command)
	file, win, ok := sweWindow(text)
	if m := openFileStatus.FindStringSubmatch(text); m != nil && m[1] != "n/a" {
		t.current = NormalizePath(m[1], t.Cwd)
	}
	if !ok || w == "" || isError || c.Failed(text) {
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
	c.refresh(args)
}

// refresh re-derives the call's fields from its ops after OpenFiles changed them.
func (c *Classification) refresh(args json.RawMessage) {
	c.derive()
	k := &classifier{c: c, a: decodeArgs(args), raw: args}
	c.Summary = k.summary()
}

// sweWord returns the SWE-agent windowed command a call of tool name with command
// line command runs, "" for any other call.
func sweWord(name, command string) string {
	n := toolName(name)
	switch n {
	case "open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert", "append":
		return n
	}
	if command != "" {
		f := strings.Fields(command)
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
