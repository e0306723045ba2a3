package rules

import (
	"regexp"
	"strings"
)

// Annotation is text an agent's harness adds to tool results that changes from call
// to call while the tool's own output stays the same: the duplicate rule compares
// outputs with every annotation removed (docs/DESIGN.md step 3).
type Annotation struct {
	// Agent names the harness that adds it, with the version it was seen in.
	Agent string
	// What says what the text is.
	What string
	// Marker is a substring every occurrence holds; an output without it is not
	// searched (the cheap test first).
	Marker string
	// Re matches one occurrence, with the blank lines that set it off.
	Re *regexp.Regexp
	// Open and Close, when set, say that Re is a block from Open to the first Close
	// after it with the newlines around it (BlockExpr(Open, Close)), which
	// StripAnnotations then removes by string search instead of the regexp.
	Open, Close string
	// LineStart says that Re is `(?m)^` and Marker followed by the rest of the
	// expression, so that no match starts before the line of Marker's first
	// occurrence: StripAnnotations hands the regexp only the text from there.
	//
	// Both exist for speed: none of these expressions has a literal prefix, so the
	// regexp engine steps through every byte of a long output before the match (the
	// Gemini CLI line took 40% of the duplicate rule's time in a replay of
	// ../shared/corpus). TestAnnotationShapes checks that each Re has the shape its
	// fields claim, FuzzStripAnnotations that the result is the regexps' own.
	LineStart bool
	// Source is the real text that shows it: a file under testdata/ or
	// ../shared/sessions, whose test (TestAnnotationsOnRealText) checks that two
	// outputs of the same call differ in it and are equal without it.
	Source string
}

// Annotations is the one table of harness annotations (docs/DESIGN.md step 3).
var Annotations = []Annotation{
	{
		Agent:  "Claude Code 2.1.332",
		What:   "a <system-reminder> block appended to every tool result (the tokens left in the context, which change on every call; the malware note on reads)",
		Marker: "<system-reminder>",
		Re:     regexp.MustCompile(`(?s)\n*<system-reminder>.*?</system-reminder>\n*`),
		Open:   "<system-reminder>",
		Close:  "</system-reminder>",
		Source: "testdata/annotations/claude-code-2.1.332-Bash.json",
	},
	{
		Agent:  "Codex CLI 0.171.0",
		What:   "the Chunk ID and Wall time lines heading every exec_command and write_stdin output",
		Marker: "Wall time: ",
		Re:     regexp.MustCompile(`(?m)\A(?:Chunk ID: [0-9a-f]+\n)?Wall time: [0-9.]+ seconds\n`),
		Source: "testdata/annotations/codex-0.171.0-exec_command.json",
	},
	{
		Agent:     "Gemini CLI 0.61.0",
		What:      "the Process Group PGID line closing every run_shell_command output (a new process group each call)",
		Marker:    "Process Group PGID: ",
		Re:        regexp.MustCompile(`(?m)^Process Group PGID: \d+\n?`),
		LineStart: true,
		Source:    "testdata/annotations/gemini-cli-0.61.0-run_shell_command.json",
	},
}

// StripAnnotations returns text without the harness annotations of the table (the
// text itself when it holds none).
func StripAnnotations(text string) string {
	for _, a := range Annotations {
		i := strings.Index(text, a.Marker)
		switch {
		case i < 0:
		case a.Open != "":
			text = stripBlock(text, a.Open, a.Close)
		case a.LineStart:
			from := strings.LastIndexByte(text[:i], '\n') + 1
			text = text[:from] + a.strip(text[from:])
		default:
			text = a.strip(text)
		}
	}
	return text
}

// strip removes a's matches from text with its regexp.
func (a *Annotation) strip(text string) string {
	return a.Re.ReplaceAllStringFunc(text, func(m string) string {
		if sub := a.Re.FindStringSubmatch(m); len(sub) > 1 {
			return sub[1] // the part of the match that is the tool's own
		}
		return ""
	})
}

// BlockExpr is the regular expression of a block annotation (Annotation.Open and
// Close): Open, anything up to the first Close after it, Close, with the newlines
// before and after.
func BlockExpr(open, close string) string {
	return `(?s)\n*` + regexp.QuoteMeta(open) + `.*?` + regexp.QuoteMeta(close) + `\n*`
}

// stripBlock removes from text what BlockExpr(open, close) matches, as
// regexp.ReplaceAllString with "" does: each match starts at the run of newlines
// before the first open after the previous match and ends after the run of
// newlines following the first close after that open.
func stripBlock(text, open, close string) string {
	var b strings.Builder
	done := 0 // text[:done] is decided: matched or written
	for {
		i := strings.Index(text[done:], open)
		if i < 0 {
			break
		}
		i += done
		j := strings.Index(text[i+len(open):], close)
		if j < 0 {
			break // no close after this open, nor after any later one
		}
		start, end := i, i+len(open)+j+len(close)
		for start > done && text[start-1] == '\n' {
			start--
		}
		for end < len(text) && text[end] == '\n' {
			end++
		}
		b.WriteString(text[done:start])
		done = end
	}
	if done == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}
