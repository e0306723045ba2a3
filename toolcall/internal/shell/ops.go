// Package shell analyses the command lines coding agents run, for toolcall's
// Classify: which files a line reads (and which lines of them reach the output),
// which it edits or writes (with the content when the line states it), and whether
// it only searches. It lexes POSIX shell (quotes, escapes, $(…), heredocs,
// redirections, && || ; | & and newlines) and interprets the commands agents use to
// view and change files (cat, nl, head, tail, sed -n, awk NR ranges, sed -i, perl -i,
// heredoc and > / >> redirections, tee, rm, mv, cp, git checkout/restore,
// apply_patch), with cd moving the directory relative paths resolve against. It also
// reads apply_patch envelopes (ParsePatch).
//
// Nothing outside toolcall needs it, so it is internal; it does not import
// toolcall (toolcall imports it), and speaks its own small vocabulary (Kind, Op,
// Range) that toolcall converts from.
package shell

import (
	"strings"

	"github.com/pruneadvisor/pruneadvisor/toolcall/internal/paths"
)

// Kind is what a file access, or a whole command line, does. The values are
// toolcall's Action words.
type Kind string

// Kinds. An Op is Read, Edit or Write; a Result's Kind may also be Search or Other.
const (
	Read   Kind = "read"
	Edit   Kind = "edit"
	Write  Kind = "write"
	Search Kind = "search"
	Other  Kind = "shell"
)

// Op is one file access of a command line.
type Op struct {
	Kind Kind
	// Path is normalised (see paths.Normalize).
	Path string
	// Range is, for reads, the lines that reach the output.
	Range Range
	// Content is, for Write, the whole new content of the file. A write whose content
	// is not known (`echo $x > f`, `cp a f`) is an Edit.
	Content string
}

// Range is a 1-based inclusive line range in toolcall.Range's encoding, so that
// toolcall converts it with a type conversion: the zero value is the whole file,
// End 0 with Start > 0 runs to the end of the file, Start < 0 (End 0) is the last
// -Start lines (tail), and End < 0 (Start 0) a window of lines the command does not
// tell (a pattern range, a byte count).
type Range struct {
	Start, End int
}

// tailRange is the range of the last n lines.
func tailRange(n int) Range { return Range{Start: -max(n, 1)} }

// unknownRange is the range of a window whose lines are not known.
func unknownRange() Range { return Range{End: -1} }

// tail returns n > 0 when r is the last n lines, else 0.
func (r Range) tail() int {
	if r.Start < 0 && r.End >= 0 {
		return -r.Start
	}
	return 0
}

// unknown reports whether r is a window of unknown lines.
func (r Range) unknown() bool { return r.End < 0 }

// whole reports whether r covers the whole file.
func (r Range) whole() bool { return r.Start >= 0 && r.Start <= 1 && r.End == 0 }

// Kind is the line's kind as a whole: Write when every file effect is a write with
// known content and nothing else ran; Edit when its file effects include edits and
// nothing but readers, editors and harmless commands ran; Read when it only read
// files it can name; Search when it only searched or listed; Other for anything else
// (Ops still list what it did).
func (r Result) Kind() Kind {
	reads, edits := 0, 0
	for _, op := range r.Ops {
		if op.Kind == Read {
			reads++
		} else {
			edits++
		}
	}
	switch {
	case edits > 0 && !r.Other && !r.Search && reads == 0 && r.Writes == edits:
		return Write
	case edits > 0 && !r.Other:
		return Edit
	case reads > 0 && !r.Other && !r.Search && !r.Unsure:
		return Read
	case r.Search && !r.Other:
		return Search
	}
	return Other
}

// Words returns the words of the command line cmd with quotes and escapes removed,
// operators and redirections left out; false when it cannot lex cmd.
func Words(cmd string) ([]string, bool) {
	toks, ok := lexShell(cmd)
	if !ok {
		return nil, false
	}
	var words []string
	for _, t := range toks {
		if t.isWord() {
			words = append(words, t.val)
		}
	}
	return words, true
}

// Quote quotes s for a POSIX shell when it needs it.
func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`|&;<>()*?[]{}~#!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ParsePatch reads the files an apply_patch envelope touches: `*** Update File: p`
// is an edit of p (with `*** Move to: q` also an edit of q), `*** Delete File: p` an
// edit, and `*** Add File: p` a write whose Content is the added lines (each "+"
// line without its "+", newline-terminated). dir resolves relative paths; "\x00"
// means the directory is unknown and relative paths are skipped.
func ParsePatch(text, dir string) []Op {
	var ops []Op
	var add *Op
	var body []string
	flush := func() {
		if add != nil {
			if len(body) > 0 {
				add.Content = strings.Join(body, "\n") + "\n"
			}
			ops = append(ops, *add)
		}
		add, body = nil, nil
	}
	resolve := func(p string) (string, bool) {
		p = strings.TrimSpace(p)
		if p == "" {
			return "", false
		}
		if dir == "\x00" {
			if !strings.HasPrefix(paths.Slash(p), "/") {
				return "", false
			}
			return paths.Normalize(p, ""), true
		}
		return paths.Normalize(p, dir), true
	}
	for _, ln := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		for _, h := range []struct {
			prefix string
			act    Kind
		}{{"*** Add File: ", Write}, {"*** Update File: ", Edit}, {"*** Delete File: ", Edit}, {"*** Move to: ", Edit}} {
			if strings.HasPrefix(ln, h.prefix) {
				flush()
				if p, ok := resolve(strings.TrimPrefix(ln, h.prefix)); ok {
					op := Op{Kind: h.act, Path: p}
					if h.act == Write {
						add = &op
					} else {
						ops = append(ops, op)
					}
				}
				goto next
			}
		}
		if strings.HasPrefix(ln, "*** ") {
			flush()
		} else if add != nil && strings.HasPrefix(ln, "+") {
			body = append(body, ln[1:])
		}
	next:
	}
	flush()
	return ops
}
