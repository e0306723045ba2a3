// Package toolcall classifies the tool calls of coding agents: it maps each agent's
// tool vocabulary, and the shell commands they run, onto docs/DESIGN.md's
// read/edit/write/search/shell/other, with the files a call touches and the lines
// it reads (Classify), and reads from a call's output what the call really did:
// whether it failed (Classification.Failed), which lines a read shows
// (VisibleRange), and which file SWE-agent's windowed commands act on (OpenFiles).
// It knows nothing of sessions: package transcript classifies each call it reads
// with it and embeds the Classification in its ToolCall.
package toolcall

import (
	"fmt"

	"github.com/pruneadvisor/pruneadvisor/toolcall/internal/paths"
)

// Action is the normalised kind of a tool call.
type Action string

// Actions. Reads and edits carry a path (and reads a line range).
const (
	ActionRead   Action = "read"
	ActionEdit   Action = "edit"
	ActionWrite  Action = "write"
	ActionSearch Action = "search"
	ActionShell  Action = "shell"
	ActionOther  Action = "other"
)

// Range is a 1-based inclusive line range. The zero value means the whole file.
// End == 0 with Start > 0 means "from Start to the end of the file".
// Negative values encode reads whose line numbers the call does not tell: Start < 0
// (End 0) is the last -Start lines of the file (`tail -n N`, see TailRange), and
// End < 0 (Start 0) a partial read of unknown lines (a pattern range such as
// `sed -n '/a/,/b/p'`, an output cut in the middle; see UnknownRange).
type Range struct {
	Start int `json:"start,omitempty"`
	End   int `json:"end,omitempty"`
}

// TailRange is the range of a read of the last n lines of a file.
func TailRange(n int) Range { return Range{Start: -max(n, 1)} }

// UnknownRange is the range of a partial read whose lines are not known.
func UnknownRange() Range { return Range{End: -1} }

// Tail returns n > 0 when r is the last n lines of the file (TailRange), else 0.
func (r Range) Tail() int {
	if r.Start < 0 && r.End >= 0 {
		return -r.Start
	}
	return 0
}

// Unknown reports whether r is a partial read of unknown lines (UnknownRange).
func (r Range) Unknown() bool { return r.End < 0 }

// Whole reports whether r covers the whole file.
func (r Range) Whole() bool { return r.Start >= 0 && r.Start <= 1 && r.End == 0 }

// Covers reports whether r covers every line of o. A range running to the end of the
// file covers any range that starts at or after its start. A whole range covers
// everything; an unknown range covers nothing and is covered only by a whole range;
// a tail covers only a tail of at most as many lines, and is covered only by a whole
// range or such a tail (the file's length is not known).
func (r Range) Covers(o Range) bool {
	if r.Whole() {
		return true
	}
	if r.Unknown() || o.Unknown() {
		return false
	}
	if r.Tail() > 0 || o.Tail() > 0 {
		return o.Tail() > 0 && r.Tail() >= o.Tail()
	}
	rs := max(r.Start, 1)
	os := max(o.Start, 1)
	if os < rs {
		return false
	}
	if r.End == 0 {
		return true
	}
	return o.End != 0 && o.End <= r.End
}

// String renders the range in lines: "all", "START-end", "START-END", "last N"
// for a tail read, "part" for an unknown window.
func (r Range) String() string {
	switch {
	case r.Unknown():
		return "part"
	case r.Tail() > 0:
		return fmt.Sprintf("last %d", r.Tail())
	case r.Whole():
		return "all"
	case r.End == 0:
		return fmt.Sprintf("%d-end", r.Start)
	default:
		return fmt.Sprintf("%d-%d", r.Start, r.End)
	}
}

// FileOp is one file access inside a tool call (Classification.Ops), in the order
// the call performs it.
type FileOp struct {
	// Action is ActionRead, ActionEdit or ActionWrite.
	Action Action
	// Path is the normalised path (NormalizePath). "" means "the file open in the
	// editor" (SWE-agent's windowed commands: edit, insert, goto, scroll_*): only
	// OpenFiles can name it, and consumers skip ops without a path.
	Path string
	// Range is, for reads, the lines the output shows (the zero value is the whole
	// file; see Range for tails and unknown windows).
	Range Range
	// Content is, for ActionWrite, the whole new content of the file. A write whose
	// content is not known (`echo $x > f`, `cp a f`, a patch hunk) is an ActionEdit.
	Content string
}

// Classification is what Classify tells of one tool call: its normalised action,
// the files it touches and the lines it reads. Package transcript's ToolCall embeds
// it; readers may refine Action, Path, Range and Content afterwards from
// structured results (FileOps then rebuilds the op from them).
type Classification struct {
	// The normalised action (set by Classify, refined by readers from structured results).
	Action  Action
	Path    string // normalised file path for read/edit/write, "" otherwise
	Range   Range  // lines read (reads) — zero is the whole file
	Content string // for writes: the full file content written; "" when not known
	Command string // for shell calls: the command line
	Summary string // short argument summary for cards and stubs (path, command, pattern)
	// Paths lists every file the call reads or edits, normalised, in order of first
	// access, without repeats; Paths[0] == Path. Nil when the call touches no file.
	Paths []string
	// Ops lists each file access of the call in the order the call performs it (a
	// shell line can read one file and edit another; a patch can touch several). Set by
	// Classify; see FileOp. Nil when the call touches no file it can name.
	Ops []FileOp
}

// NormalizePath makes p comparable across calls and agents: surrounding quotes and
// blanks go, backslashes become slashes, the Windows drive forms C:\x, C:/x, /c/x,
// /C/x, /cygdrive/c/x and /mnt/c/x all become /c/x, a relative path is joined to cwd
// (itself normalised) when cwd is known, and "." and ".." are resolved (path.Clean).
// Paths starting with "~" are kept as written. The empty string stays empty.
func NormalizePath(p, cwd string) string { return paths.Normalize(p, cwd) }
