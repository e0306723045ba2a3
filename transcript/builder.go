package transcript

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/tidwall/gjson"
)

// builder assembles a Session in order. Readers create one, register the raw JSON
// units outputs live in, and add messages as they are decoded; the builder numbers
// steps, pairs results with calls by id, classifies calls, and indexes each message
// once (tokens, hash).
type builder struct {
	s       *Session
	pending map[string][]*ToolCall // unanswered calls by id, oldest first
	seenIDs map[string]int         // how many calls used each id
	outKeys map[string]int         // how many outputs used each key
	step    int
	// measures, when set, gives output texts' tokens and hashes measured before
	// (MessageCache.measured); the readers of openai-responses and gemini-api set it.
	measures *MessageCache
	slab     slab // the values of messages copied from cached templates
	// marks and sysN are what a request body's session keeps for Recycle (carry):
	// the state before each message of its messages array, and how many messages
	// came before the array.
	marks []linkMark
	sysN  int
}

func newBuilder(format Format, name string, raw []byte) *builder {
	return &builder{
		s:       &Session{Format: format, Name: name, raw: raw},
		pending: map[string][]*ToolCall{},
		seenIDs: map[string]int{},
		outKeys: map[string]int{},
	}
}

// addUnit registers raw[start:end] as a JSON value outputs may point into and
// returns its index.
func (b *builder) addUnit(start, end int) int {
	b.s.units = append(b.s.units, unit{start, end})
	return len(b.s.units) - 1
}

// warn records a non-fatal problem.
func (b *builder) warn(format string, args ...any) {
	b.s.Warnings = append(b.s.Warnings, fmt.Sprintf(format, args...))
}

// add appends m: numbers it, registers its calls (classifying each against the
// session cwd unless the reader already set an Action), pairs its outputs with
// pending calls, and counts its tokens. Outputs must have unit/paths set by the
// reader (use setLoc) when the reader supports Rewrite.
func (b *builder) add(m *Message) {
	b.measure(m)
	b.link(m)
}

// measure does the part of add that depends only on m and the session cwd: it
// classifies the calls that have no Action yet, and sets each output's Hash and
// Tokens and the message's Tokens. A message measured once (and copied, see
// msgTemplate) can be linked into later sessions without measuring it again.
func (b *builder) measure(m *Message) {
	tokens := tokencount.Count(m.Text)
	for _, c := range m.Calls {
		if c.Action == "" {
			c.Classify(b.s.Cwd)
		}
		tokens += tokencount.Count(string(c.Args))
	}
	for _, o := range m.Outputs {
		o.Tokens, o.Hash = b.measures.measured(o.Text)
		tokens += o.Tokens
	}
	m.Tokens = tokens
}

// link does the rest of add for a measured message: numbering, call registration
// and pairing.
func (b *builder) link(m *Message) {
	s := b.s
	m.Index = len(s.Messages)
	if m.Role == RoleAssistant {
		b.step++
	}
	m.Step = b.step
	for _, c := range m.Calls {
		c.Message = m.Index
		c.Step = m.Step
		if c.ID == "" {
			c.ID = fmt.Sprintf("call-%d", len(s.Calls)+1)
		}
		if b.seenIDs[c.ID] > 0 {
			b.warn("%scall id %q used again", where(m), c.ID)
		}
		b.seenIDs[c.ID]++
		s.Calls = append(s.Calls, c)
		b.pending[c.ID] = append(b.pending[c.ID], c)
	}
	for i, o := range m.Outputs {
		o.Message = m.Index
		if o.Block == 0 && i > 0 {
			o.Block = i
		}
		b.outKeys[o.CallID]++
		o.Key = o.CallID
		if n := b.outKeys[o.CallID]; n > 1 {
			o.Key = fmt.Sprintf("%s#%d", o.CallID, n)
		}
		if q := b.pending[o.CallID]; len(q) > 0 {
			c := q[0]
			b.pending[o.CallID] = q[1:]
			c.Output = o
			o.Call = c
			o.Step = c.Step
			if o.Unchanged || c.Action == toolcall.ActionRead && isUnchangedStub(o.Text) {
				o.Unchanged = true
			}
		} else {
			o.Step = m.Step
			s.Orphans = append(s.Orphans, o)
			b.warn("%stool result for call id %q has no earlier call", where(m), o.CallID)
		}
	}
	s.Messages = append(s.Messages, m)
}

// where prefixes a warning about m with its source line ("line 12: "); whole-document
// formats have no line (Message.Line 0), and the warning's call id locates it.
func where(m *Message) string {
	if m.Line > 0 {
		return fmt.Sprintf("line %d: ", m.Line)
	}
	return ""
}

// setLoc points o at the text pieces inside unit u that Rewrite replaces.
func setLoc(o *ToolOutput, u int, paths ...string) {
	o.unit = u + 1
	o.paths = paths
}

// finish returns the session; it fails with ErrEmpty when nothing was read.
func (b *builder) finish() (*Session, error) {
	s := b.s
	if len(s.Messages) == 0 {
		return nil, fmt.Errorf("%s: %w: no messages", s.Name, ErrEmpty)
	}
	if s.Task == "" {
		for _, m := range s.Messages {
			if m.Role == RoleUser && !m.Meta && strings.TrimSpace(m.Text) != "" {
				s.Task = m.Text
				break
			}
		}
	}
	return s, nil
}

// isUnchangedStub recognises the "file unchanged since last read" answers agents give
// instead of re-sending a file (Claude Code, pi).
func isUnchangedStub(text string) bool {
	if len(text) > 400 {
		return false
	}
	t := strings.ToLower(text)
	return strings.Contains(t, "unchanged since last read") || strings.Contains(t, "file unchanged since")
}

// timeOf returns the time a timestamp field records (see parseTime), in UTC. raw is
// the field's JSON value, line the source line (0 for whole-document formats) and
// field its path: inside the line for line-oriented formats, from the document's root
// otherwise. An absent or null field gives the zero time; any other value that does
// not parse gives the zero time and a warning naming file, line and field (for a
// whole-document format the line is looked up from the path).
func (b *builder) timeOf(raw json.RawMessage, line int, field string) time.Time {
	if jsonscan.Null(raw) {
		return time.Time{}
	}
	s, ok := jsonscan.Unquote(raw)
	if !ok {
		s, ok = jsonscan.String(raw)
	}
	if ok {
		if t, ok := parseTime(s); ok {
			return t
		}
	}
	if line == 0 {
		if r := gjson.GetBytes(b.s.raw, field); r.Exists() {
			line = jsonscan.Line(b.s.raw, r.Index)
		}
	}
	pe := &ParseError{File: b.s.Name, Line: line, Field: field, Msg: string(raw) + " is not an RFC 3339 date and time; the message's time is left unknown"}
	b.warn("%s", pe.Error())
	return time.Time{}
}

// Layouts parseTime accepts: RFC 3339 with optional fractional seconds, and the same
// without a zone (Python's naive datetime.isoformat(), which OpenHands writes).
const (
	timeLayout      = time.RFC3339Nano
	timeLayoutNaive = "2006-01-02T15:04:05.999999999"
)

// parseTime parses a recorded timestamp: RFC 3339 ("2026-01-16T02:02:52.742Z",
// "2025-12-09T00:53:29+01:00"), as Claude Code, pi, Codex CLI and Gemini CLI write
// it, or an ISO 8601 date and time without a zone ("2025-01-27T22:44:56.900854",
// OpenHands), read as UTC. The result is in UTC.
func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		if t, err = time.Parse(timeLayoutNaive, s); err != nil {
			return time.Time{}, false
		}
	}
	return t.UTC(), true
}
