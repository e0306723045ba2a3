// Package transcript holds the one session model every other package works on, and
// the readers that turn the files coding agents write (Claude Code, pi, Codex CLI,
// Gemini CLI, OpenAI chat-completions incl. mini-swe-agent and SWE-agent, OpenHands,
// Anthropic Messages request bodies) into it. Field-level descriptions of each format
// are in ../shared/docs/TRANSCRIPT-FORMATS.md; the vocabulary is docs/DESIGN.md's.
package transcript

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
	"unsafe"

	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

// Sentinel errors returned (wrapped) by the readers.
var (
	// ErrUnknownFormat means no reader recognised the content; the wrapping error lists
	// the formats tried.
	ErrUnknownFormat = errors.New("unknown session format")
	// ErrEmpty means the input held no session at all (an empty file, or only blanks).
	ErrEmpty = errors.New("empty session")
	// ErrMalformed means a line, entry or field could not be parsed; the wrapping
	// *ParseError names file, line and field.
	ErrMalformed = errors.New("malformed session")
	// ErrReleased means Rewrite was asked of a session whose original bytes were
	// released (Session.ReleaseBytes).
	ErrReleased = errors.New("session bytes released")
)

// ParseError locates one malformed piece of input. It unwraps to ErrMalformed.
type ParseError struct {
	File  string // file name as given to the reader
	Line  int    // 1-based line for line-oriented formats; 0 when unknown
	Field string // JSON path of the offending field, "" when the whole line is bad
	Msg   string // what was wrong
}

// Error renders "FILE:LINE: field F: MSG", leaving out the parts that are unknown.
func (e *ParseError) Error() string {
	s := e.File
	if e.Line > 0 {
		s += fmt.Sprintf(":%d", e.Line)
	}
	if e.Field != "" {
		s += ": field " + e.Field
	}
	return s + ": " + e.Msg
}

// Unwrap lets errors.Is(err, ErrMalformed) hold.
func (e *ParseError) Unwrap() error { return ErrMalformed }

// Format names one transcript format. The values are what `--format` accepts.
type Format string

// The formats with a reader.
const (
	FormatClaudeCode   Format = "claude-code"      // ~/.claude/projects/*/<session>.jsonl
	FormatPi           Format = "pi"               // ~/.pi/agent/sessions/*/*.jsonl, v1-v3
	FormatCodex        Format = "codex"            // ~/.codex/sessions/**/rollout-*.jsonl, wrapped and legacy
	FormatGemini       Format = "gemini-cli"       // ~/.gemini/tmp/*/chats/session-*.json
	FormatOpenAI       Format = "openai"           // chat-completions message list or {messages:[...]}
	FormatMiniSWEAgent Format = "mini-swe-agent"   // *.traj.json with messages[]
	FormatSWEAgent     Format = "swe-agent"        // *.traj with history[]
	FormatOpenHands    Format = "openhands"        // event list (V0 trajectory.json)
	FormatAnthropic    Format = "anthropic"        // Messages API request body
	FormatResponses    Format = "openai-responses" // OpenAI Responses API request body (Codex CLI)
	FormatGeminiAPI    Format = "gemini-api"       // Gemini API generateContent request body (Gemini CLI)
)

// Role is a message's author as the session records it, normalised.
type Role string

// Roles. Tool results are RoleTool whatever the format calls them (Anthropic and
// Claude Code put them in user messages; those become RoleTool messages when they
// hold only tool results, and keep RoleUser when they also hold user text).
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Retention is a caller's hint attached to a message when it is appended (docs/DESIGN.md
// step 2). The zero value behaves as RetentionNormal.
type Retention string

// Retention classes.
const (
	RetentionNormal     Retention = "normal"     // the advisor decides
	RetentionKeep       Retention = "keep"       // never a candidate
	RetentionDisposable Retention = "disposable" // a candidate whatever its score; rules and size still apply
)

// Session is one agent conversation in the normalised model.
type Session struct {
	Format Format // which reader produced it
	Name   string // file name (or caller-given name) used in errors
	ID     string // the session id the file records, "" when it has none
	Cwd    string // working directory the agent ran in, "" when unknown
	// Task is the user's request that started the current task: the first real user
	// prompt (not injected context, not a command wrapper).
	Task string
	// Messages in conversation order, after dropping rewind-abandoned branches and
	// merging split assistant lines.
	Messages []*Message
	// Calls lists every tool call in order of appearance.
	Calls []*ToolCall
	// Skipped counts malformed lines skipped in lenient mode.
	Skipped int
	// Warnings holds one line per skipped or suspicious piece of input (lenient mode,
	// duplicate call ids, results without a call).
	Warnings []string
	// Orphans are tool outputs whose call id matches no call; they stay in the
	// message list but are never paired with a call.
	Orphans []*ToolOutput
	// CompactTrigger is the context size, in input tokens, at which the request
	// asks the provider to compact (CompactTrigger), 0 when it asks none. The
	// proxy sets it from the request body; the advisor takes it as the agent's
	// compaction point.
	CompactTrigger int
	// ToolTokens is the tokens of the request's tool definitions (tokencount.Tools),
	// which the provider counts as input and no message holds; 0 for session
	// files. The proxy sets it from the request body; the advisor takes it off
	// the hard limit, which is measured against the messages.
	ToolTokens int

	raw      []byte // the original bytes, for Rewrite
	units    []unit // the JSON values in raw that outputs point into
	released bool   // ReleaseBytes dropped raw and units
	// cache is the MessageCache the session was read with (request bodies), where
	// Rewrite keeps patched messages; nil when none.
	cache *MessageCache
	// memo is the body memory the session's body was recorded in (request bodies
	// read with a cache), where Rewrite finds the stubs the previous body got; nil
	// when none.
	memo *memoRef
	// carry is what Recycle hands to the memo for the next read (carry.go); nil
	// when the session was not read from a request body with a cache.
	carry *carry
}

// ReleaseBytes drops the session's original bytes, which only Rewrite needs: a
// caller that reads a session only to walk its messages (replay, which may read a
// file of hundreds of megabytes) then keeps no copy of the file beside them.
// Rewrite fails with ErrReleased afterwards; everything else is unchanged.
func (s *Session) ReleaseBytes() {
	s.raw, s.units, s.released, s.memo, s.carry = nil, nil, true, nil, nil
}

// unit is one JSON value inside Session.raw: a line of a JSONL file, one of two
// objects sharing a line, or the whole document.
type unit struct{ start, end int }

// Steps returns the number of steps (assistant messages) in the session.
func (s *Session) Steps() int {
	n := 0
	for _, m := range s.Messages {
		if m.Role == RoleAssistant {
			n++
		}
	}
	return n
}

// Outputs returns every tool output in message order.
func (s *Session) Outputs() []*ToolOutput {
	var out []*ToolOutput
	for _, m := range s.Messages {
		out = append(out, m.Outputs...)
	}
	return out
}

// Unanswered returns the calls that never got a result.
func (s *Session) Unanswered() []*ToolCall {
	var out []*ToolCall
	for _, c := range s.Calls {
		if c.Output == nil {
			out = append(out, c)
		}
	}
	return out
}

// Message is one message of a session. Assistant messages are steps.
type Message struct {
	Index int  // position in Session.Messages
	Step  int  // for an assistant message its step number (from 1); otherwise the step of the last assistant message before it (0 before the first)
	Role  Role // normalised author
	// Text is the message's own words: user prompt, assistant text (not thinking, not
	// tool calls). For a tool message it is empty; the outputs hold the text.
	Text string
	// Thinking is an assistant message's thinking as the format records it in
	// plain text (Claude Code and Anthropic thinking blocks, pi thinking blocks,
	// Gemini CLI thoughts' subjects and descriptions), joined with "\n"; "" where
	// the format records none or only a signature. It is not in Tokens and never
	// rewritten: the later-use evidence reads it as the agent's own words (package
	// evidence).
	Thinking  string
	Calls     []*ToolCall   // tool calls an assistant message made, in block order
	Outputs   []*ToolOutput // tool results the message carries, in block order
	Line      int           // 1-based source line where the message starts, 0 for whole-document formats
	Retention Retention     // caller's hint, "" = normal
	Tokens    int           // o200k_base tokens of Text plus the calls' arguments and the outputs' text
	Meta      bool          // injected context (system reminders, environment blocks), not a real user prompt
	// Compaction reports that the message holds a provider's compaction, opaque and
	// kept byte for byte: an Anthropic compaction block (compact_20260112 context
	// editing, or on-demand compaction) or an OpenAI Responses compaction item. The
	// provider reads the context from the latest one on and ignores what is before.
	Compaction bool
	// AgentCompaction reports that the message is the agent's own compaction
	// summary (Claude Code's isCompactSummary user line, pi's compaction entry or
	// compactionSummary message, Codex's compacted line): the agent compacted its
	// context here and went on from this summary (docs/DESIGN.md "Compaction: what
	// pruning is for"). The message is also Meta.
	AgentCompaction bool
	// CompactionKept is, for an AgentCompaction message, how many of the messages
	// just before it the compaction kept in the agent's context: the messages from
	// Index-CompactionKept to Index-1 stayed, every earlier one was dropped (the
	// later-use evidence credits no use to an output it dropped: package evidence).
	// pi records where its kept tail starts (the compaction entry's
	// firstKeptEntryIndex, an index into the file's entries counting the header as
	// 0, or firstKeptEntryId); a reference the reader cannot place keeps every
	// message, with a warning. Claude Code and Codex keep none (their summary and,
	// for Codex, recent user messages, which hold no tool output): 0. pi's
	// compactionSummary message records no boundary: every message is kept.
	CompactionKept int
	// Time is when the message was written, as the format records it, in UTC; the
	// zero time means unknown. Claude Code and Codex CLI: the line's timestamp (an
	// assistant message merged from several lines takes the first line's); pi: the
	// entry's timestamp; Gemini CLI: the message's timestamp (the tool-result message
	// the reader adds after a gemini message takes that message's); OpenHands: the
	// event's timestamp (the action's that started a merged assistant message), which
	// OpenHands writes without a zone and which is read as UTC. Zero for formats that
	// record none (OpenAI chat bodies, mini-swe-agent, SWE-agent, Anthropic request
	// bodies), for a message whose source has no timestamp, and for one that does not
	// parse (Session.Warnings then names file, line and field). See parseTime for the
	// accepted forms.
	Time time.Time
}

// ToolCall is one call the model made.
type ToolCall struct {
	ID      string          // call id as the session records it; synthesised ("call-N") where the format has none
	Name    string          // tool name as the agent called it
	Args    json.RawMessage // arguments as JSON; for text-only trajectories a JSON string holding the command
	Message int             // index of the assistant message that made the call
	Step    int             // that message's step

	// Classification is the normalised action with the files and lines the call
	// touches (Action, Path, Range, Content, Command, Summary, Paths, Ops; with
	// FileOps and Failed): set by Classify, refined by readers from structured
	// results.
	toolcall.Classification

	Output *ToolOutput // the result, nil while unanswered
}

// ToolOutput is the text that came back for one call.
type ToolOutput struct {
	// Key identifies the output within its session: the call id, suffixed "#2", "#3"
	// when a call id repeats. Stable across reads of the same file.
	Key     string
	CallID  string    // the call id the result names
	Call    *ToolCall // nil for orphans
	Text    string    // the text the model saw (text blocks joined with "\n")
	IsError bool      // the result reported failure (is_error, non-zero exit where the format records it, a structured failure)
	// Unchanged marks a read whose result was an "unchanged since last read" stub:
	// it keeps the earlier read alive (docs/DESIGN.md step 3).
	Unchanged bool
	Message   int    // index of the message that carries it
	Block     int    // index of its block in that message's content (0 for single-content formats)
	Step      int    // step of the call that produced it
	Tokens    int    // o200k_base tokens of Text
	Hash      string // hex SHA-256 of Text
	HasImage  bool   // the result also held image blocks (left untouched by stubs)

	unit  int      // 1 + index into Session.units; 0 when the output cannot be rewritten
	paths []string // gjson/sjson paths, inside the unit, of each text piece of the result
	// elem, when elem.end > 0, is the span, relative to the unit's start, of the JSON
	// value at path elemPath (the message that carries the output), and every path
	// starts with elemPath + ".": Rewrite then patches that value alone instead of
	// the whole unit. Zero when the reader did not record it.
	elem     unit
	elemPath string
}

// TextHash returns the hex SHA-256 of s, the content hash used for outputs.
func TextHash(s string) string {
	// Hashed in place: []byte(s) would copy the text (a tool output, up to
	// megabytes) for a function that only reads it.
	h := sha256.Sum256(unsafe.Slice(unsafe.StringData(s), len(s)))
	return hex.EncodeToString(h[:])
}

// sortedKeys is a small helper for deterministic map iteration.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
