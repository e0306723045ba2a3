package toolcall

import (
	"regexp"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
)

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

// Failed reports whether text, the output that came back for the call, says the
// call did not do what it asked: a non-zero exit status in the agent's own words
// (Claude Code's "Exit code N", pi's "Command exited with code N", Codex's "Process
// exited with code N" and {"metadata":{"exit_code":N}}, mini-swe-agent's
// <returncode>, Gemini's "Exit Code: N"), for edits and writes a refusal such as
// "String to replace not found" or "Could not find the exact text" (editFailures),
// and for read tools an error where the content should start (readFailures). The
// reader's own failure flag is not here: package transcript's ToolOutput.Failed
// adds it. The rules use it so that a failed edit supersedes nothing and a failed
// read shows nothing.
func (c *Classification) Failed(text string) bool {
	t := text
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
