package recall

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
)

// Errors of a partial recall (Part), returned wrapped; test with errors.Is. Each
// message names the argument (lines, grep or context), quotes the value and gives
// the valid form.
var (
	// ErrBadRange means Part.Lines is not a line range of the original: not one of
	// the forms N, N-M and N- (1-based, M >= N), or a start past the original's last
	// line.
	ErrBadRange = errors.New("bad line range")
	// ErrBadPattern means Part.Grep is not a Go (RE2) regular expression, or is
	// longer than MaxPatternBytes.
	ErrBadPattern = errors.New("bad pattern")
	// ErrBadContext means Part.Context is negative, over MaxContext, or given
	// without Grep.
	ErrBadContext = errors.New("bad context")
)

// Limits of a partial recall. A recall asked for with no part is the whole
// original, never cut.
const (
	// MaxPartLines is the most lines (selected, matching and context lines) a
	// partial recall returns; the note after them says where it stopped and how to
	// ask for the rest. The same bound as Claude Code's Read tool.
	MaxPartLines = 2000
	// MaxPartBytes is the most bytes of numbered lines a partial recall returns,
	// about 25,000 tokens; the line that would pass it is not shown.
	MaxPartBytes = 100_000
	// MaxLineBytes is the most bytes of one original line a partial recall shows; a
	// longer line is cut at a UTF-8 boundary and ends with " [… N more bytes]" (a
	// whole recall gives it uncut).
	MaxLineBytes = 2000
	// MaxContext is the largest Part.Context.
	MaxContext = 20
	// MaxPatternBytes is the longest Part.Grep.
	MaxPatternBytes = 1000
)

// Part asks for part of an original instead of all of it. The zero Part asks for the
// whole original. Lines and Grep may be given together: then only the lines in the
// range are searched.
//
// Lines are counted from 1, split at "\n"; a "\r" ending a line (CRLF) is not
// shown and not matched; a final line without "\n" is a line, and a final "\n" does
// not start another one (so "a\nb\n" and "a\nb" have 2 lines, "" has none).
type Part struct {
	// Lines is a line range: "N" (line N), "N-M" (lines N to M, M >= N) or "N-"
	// (line N to the last), digits only. An M past the last line means the last.
	// Empty: every line.
	Lines string
	// Grep is a Go (RE2) regular expression, at most MaxPatternBytes, matched
	// against each line (case-sensitive unless it starts with (?i)); only the
	// lines it matches are shown. Empty: no search.
	Grep string
	// Context is how many lines before and after each matching line to show too, as
	// grep -C does: 0 to MaxContext, only with Grep.
	Context int
}

// LeftOut says what leaving out the Part field named name ("lines" or "grep",
// as the recall tool, the CLI's flags and the HTTP parameters name them) asks
// for: "every line" or "no search"; "" for another name. The CLI and the HTTP
// route refuse an argument given empty, which would read as left out.
func LeftOut(name string) string {
	switch name {
	case "lines":
		return "every line"
	case "grep":
		return "no search"
	}
	return ""
}

// IsWhole reports whether p asks for the whole original (the zero Part).
func (p Part) IsWhole() bool { return p == Part{} }

// Validate checks p's form without the original: Lines' syntax, Grep's compilation
// and Context's bounds. Errors wrap ErrBadRange, ErrBadPattern or ErrBadContext. A
// Lines start past the original's end is found only by Select.
func (p Part) Validate() error {
	_, err := p.compile()
	return err
}

// selector is a checked Part.
type selector struct {
	from, to int // 1-based, to 0: to the end
	re       *regexp.Regexp
	context  int
}

func (p Part) compile() (selector, error) {
	var s selector
	if p.Lines != "" {
		from, to, err := parseLines(p.Lines)
		if err != nil {
			return s, err
		}
		s.from, s.to = from, to
	} else {
		s.from = 1
	}
	if p.Grep != "" {
		if len(p.Grep) > MaxPatternBytes {
			return s, fmt.Errorf("%w: grep %s is %d bytes; want at most %d", ErrBadPattern, quoteArg(p.Grep), len(p.Grep), MaxPatternBytes)
		}
		re, err := regexp.Compile(p.Grep)
		if err != nil {
			var se *syntax.Error
			why := err.Error()
			if errors.As(err, &se) {
				why = fmt.Sprintf("%s: %s", se.Code, quoteArg(se.Expr))
			}
			return s, fmt.Errorf("%w: grep %s: %s; want a Go (RE2) regular expression (no lookaround, no backreferences), e.g. \"Timeout\" or \"(?i)error|fail\"", ErrBadPattern, quoteArg(p.Grep), why)
		}
		s.re = re
	}
	switch {
	case p.Context < 0 || p.Context > MaxContext:
		return s, fmt.Errorf("%w: context %d: want 0 to %d lines", ErrBadContext, p.Context, MaxContext)
	case p.Context > 0 && p.Grep == "":
		return s, fmt.Errorf("%w: context %d without grep: context is the lines shown around each grep match", ErrBadContext, p.Context)
	}
	s.context = p.Context
	return s, nil
}

// rangeForms is the valid forms of Part.Lines, for error messages.
const rangeForms = `want "N", "N-M" or "N-" with line numbers from 1, e.g. "200-250"`

// parseLines reads "N", "N-M" or "N-": to is 0 for "N-".
func parseLines(v string) (from, to int, err error) {
	bad := func(why string) (int, int, error) {
		return 0, 0, fmt.Errorf("%w: lines %s: %s; %s", ErrBadRange, quoteArg(v), why, rangeForms)
	}
	a, b, dash := strings.Cut(v, "-")
	num := func(s string) (int, string) {
		if s == "" {
			return 0, "a line number is missing"
		}
		for _, c := range []byte(s) {
			if c < '0' || c > '9' {
				return 0, fmt.Sprintf("%s is not a line number", quoteArg(s))
			}
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Sprintf("%s is too large", quoteArg(s))
		}
		if n == 0 {
			return 0, "line numbers start at 1"
		}
		return n, ""
	}
	from, why := num(a)
	if why != "" {
		return bad(why)
	}
	if !dash {
		return from, from, nil
	}
	if b == "" {
		return from, 0, nil
	}
	to, why = num(b)
	if why != "" {
		return bad(why)
	}
	if to < from {
		return bad(fmt.Sprintf("the end %d is before the start %d", to, from))
	}
	return from, to, nil
}

// quoteArg quotes an argument for an error message, cut to 60 bytes.
func quoteArg(v string) string {
	const max = 60
	if len(v) > max {
		return fmt.Sprintf("%q...", textcut.BytesOnRune(v, max))
	}
	return fmt.Sprintf("%q", v)
}

// Select returns the lines of text that p selects, as grep -n prints them: each
// line as its 1-based number, ':' and its text ("200:\tfoo" for the line "\tfoo"),
// one a line, "\n" after each; with Context, a context line has '-' for ':'
// ("199-...") and "--" stands alone between groups of lines that are not
// adjacent. A last line in brackets says what was shown:
//
//	[lines 200-250 of 1234]
//	[3 lines match "Timeout" in all 1234 lines]
//	[3 lines match "Timeout" in lines 200-250 of 1234]
//	[no line matches "Timeout" in all 1234 lines]
//
// A pattern that matches no line is not an error: the answer is only that note.
// Past MaxPartLines lines or MaxPartBytes bytes the lines stop ("[lines 1-2000 of
// 3000]" then says the last line shown), and a second note says where and how to
// ask for the rest:
//
//	[stopped after line 2000 (at most 2000 lines, 100000 bytes): ask for lines="2001-3000" for more]
//
// A line longer than MaxLineBytes is cut (see there). A Lines end past the last
// line means the last line. Errors: those of Validate, and ErrBadRange for a start
// past the last line (the message gives the count). The zero Part gives text
// itself, unchanged.
func Select(text string, p Part) (string, error) {
	if p.IsWhole() {
		return text, nil
	}
	s, err := p.compile()
	if err != nil {
		return "", err
	}
	lines := splitLines(text)
	total := len(lines)
	if p.Lines != "" && s.from > total {
		return "", fmt.Errorf("%w: lines %s: the original has %s, so it starts past the end; want a start from 1 to %d",
			ErrBadRange, quoteArg(p.Lines), plural(total, "line"), total)
	}
	if s.to == 0 || s.to > total {
		s.to = total
	}
	if s.re == nil {
		return s.lineRange(lines), nil
	}
	return s.grep(lines, p), nil
}

// lineRange writes lines s.from to s.to (Select without a pattern) and the note.
func (s selector) lineRange(lines []string) string {
	var w partWriter
	for n := s.from; n <= s.to; n++ {
		if !w.line(n, ':', lines[n-1]) {
			break
		}
	}
	fmt.Fprintf(&w.b, "[lines %d-%d of %d]\n", s.from, w.last, len(lines))
	if w.stopped != 0 {
		w.stopNote(s.to)
	}
	return w.b.String()
}

// grep writes the lines between s.from and s.to that s.re matches, each with its
// context, in order, groups apart from each other with a "--" between them, and
// the note (Select with p's pattern).
func (s selector) grep(lines []string, p Part) string {
	var w partWriter
	matches, shownTo := 0, 0 // shownTo: the last line written
	for n := s.from; n <= s.to; n++ {
		if !s.re.MatchString(lines[n-1]) {
			continue
		}
		matches++
		if w.stopped != 0 {
			continue // counting only
		}
		lo, hi := max(s.from, n-s.context, shownTo+1), min(s.to, n+s.context)
		if s.context > 0 && shownTo != 0 && lo > shownTo+1 {
			w.sep()
		}
		for k := lo; k <= hi; k++ {
			mark := byte('-')
			if s.re.MatchString(lines[k-1]) {
				mark = ':'
			}
			if !w.line(k, mark, lines[k-1]) {
				break
			}
			shownTo = k
		}
	}
	where := fmt.Sprintf("all %d lines", len(lines))
	if p.Lines != "" {
		where = fmt.Sprintf("lines %d-%d of %d", s.from, s.to, len(lines))
	}
	if matches == 0 {
		fmt.Fprintf(&w.b, "[no line matches %s in %s]\n", quoteArg(p.Grep), where)
		return w.b.String()
	}
	fmt.Fprintf(&w.b, "[%s %s %s in %s]\n", plural(matches, "line"), verb(matches, "matches", "match"), quoteArg(p.Grep), where)
	if w.stopped != 0 {
		w.stopNote(s.to)
	}
	return w.b.String()
}

// partWriter writes numbered lines within the limits.
type partWriter struct {
	b       strings.Builder
	lines   int
	last    int // the number of the last line written
	stopped int // the number of the first line not written for the limits; 0: none
}

// line writes line n; false (and stopped set) when a limit stops it.
func (w *partWriter) line(n int, mark byte, text string) bool {
	cut := ""
	if len(text) > MaxLineBytes {
		head := textcut.BytesOnRune(text, MaxLineBytes)
		cut = fmt.Sprintf(" [… %d more bytes]", len(text)-len(head))
		text = head
	}
	num := strconv.Itoa(n)
	size := len(num) + 1 + len(text) + len(cut) + 1
	if w.lines+1 > MaxPartLines || w.b.Len()+size > MaxPartBytes {
		w.stopped = n
		return false
	}
	w.b.WriteString(num)
	w.b.WriteByte(mark)
	w.b.WriteString(text)
	w.b.WriteString(cut)
	w.b.WriteByte('\n')
	w.lines++
	w.last = n
	return true
}

func (w *partWriter) sep() { w.b.WriteString("--\n") }

// stopNote says where the limits stopped the lines and how to ask for the rest
// (up to to).
func (w *partWriter) stopNote(to int) {
	fmt.Fprintf(&w.b, "[stopped after line %d (at most %d lines, %d bytes): ask for lines=\"%d-%d\" for more]\n",
		w.last, MaxPartLines, MaxPartBytes, w.stopped, to)
}

// splitLines splits text at "\n", dropping a "\r" ending a line; a final "\n" does not
// start another line.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// plural is "1 line", "2 lines".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
