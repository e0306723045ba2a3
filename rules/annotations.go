package rules

import (
	"regexp"
	"strings"
)

// Annotation is text an agent's harness adds to tool results that changes from call
// to call while the tool's own output stays the same: the duplicate rule compares
// outputs with every annotation removed (DESIGN.md step 3).
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
	// Source is the real text that shows it: a file under testdata/ or
	// ../shared/sessions, whose test (TestAnnotationsOnRealText) checks that two
	// outputs of the same call differ in it and are equal without it.
	Source string
}

// Annotations is the one table of harness annotations (DESIGN.md step 3).
var Annotations = []Annotation{
	{
		Agent:  "Claude Code 2.1.332",
		What:   "a <system-reminder> block appended to every tool result (the tokens left in the context, which change on every call; the malware note on reads)",
		Marker: "<system-reminder>",
		Re:     regexp.MustCompile(`(?s)\n*<system-reminder>.*?</system-reminder>\n*`),
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
		Agent:  "Gemini CLI 0.61.0",
		What:   "the Process Group PGID line closing every run_shell_command output (a new process group each call)",
		Marker: "Process Group PGID: ",
		Re:     regexp.MustCompile(`(?m)^Process Group PGID: \d+\n?`),
		Source: "testdata/annotations/gemini-cli-0.61.0-run_shell_command.json",
	},
}

// StripAnnotations returns text without the harness annotations of the table (the
// text itself when it holds none).
func StripAnnotations(text string) string {
	for _, a := range Annotations {
		if !strings.Contains(text, a.Marker) {
			continue
		}
		text = a.Re.ReplaceAllStringFunc(text, func(m string) string {
			if sub := a.Re.FindStringSubmatch(m); len(sub) > 1 {
				return sub[1] // the part of the match that is the tool's own
			}
			return ""
		})
	}
	return text
}
