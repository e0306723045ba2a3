package transcript

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// Codex CLI rollouts (TRANSCRIPT-FORMATS.md §3), one JSON object per line, in two
// forms:
//   - current: {timestamp, type, payload}, type session_meta | turn_context |
//     response_item | event_msg | compacted; output locations are "payload.…";
//   - legacy: a first line {id, timestamp, instructions, git}, {"record_type":…}
//     lines, and bare response items ({"type":"message"…}); locations are "output…".
//
// Both forms may be mixed or start mid-session; each line is judged on its own.
//
// Steps: one model call is one assistant turn. The response items a model call
// produces (reasoning, assistant messages, function_call, custom_tool_call,
// local_shell_call, web_search_call) are written one per line with nothing of the
// model's input in between, so a run of such items is one assistant message (one
// step), whatever its length: a reasoning item followed by three function_calls is
// one step with three calls. The run ends at the next input item (a tool output, a
// user or developer message) or compaction; event_msg and turn_context lines end
// nothing. The message's Line is the run's first line.
//
// Messages:
//   - user messages are RoleUser; those holding injected context
//     (<environment_context>, <user_instructions>, "# AGENTS.md instructions",
//     <permissions instructions>, …) are Meta; developer and system messages are
//     Meta RoleSystem; a compacted line's summary is a Meta user message;
//   - each function_call_output / custom_tool_call_output line is one RoleTool
//     message with one output, located at the line's output field. An output string
//     that is itself JSON {output, metadata} (custom tool outputs, the argv shell
//     tool) is peeled: Text is its "output" and IsError comes from
//     metadata.exit_code; a Rewrite replaces the whole string with the stub.
//     Otherwise IsError comes from a "Process exited with code N" or "Exit code: N"
//     header line. Content-item lists ({type:input_text,text}, input_image) and
//     {content, success} objects are read too;
//   - web_search_call items are server-side and have no output: they make no call.
//   - the base instructions (session_meta, the legacy header) are not messages.
//
// Calls: function_call{name, arguments (a JSON string), call_id} with Args the
// decoded arguments; custom_tool_call{name, input, call_id} with Args the input as a
// JSON string (the patch, for apply_patch); local_shell_call{call_id, action} named
// "local_shell" with Args = action. Classify maps them (exec_command, shell argv
// with workdir, apply_patch, local_shell).
//
// Session: ID from session_meta (or the legacy header), Cwd from session_meta,
// turn_context or the first <cwd> of an environment_context message; Task is the
// first event_msg user_message, else the first non-Meta user message; a VS Code
// prompt is cut to the text after "## My request for Codex:".

// codexWrapperTypes are the type values of the current {timestamp, type, payload} form.
var codexWrapperTypes = map[string]bool{
	"session_meta": true, "turn_context": true, "response_item": true, "event_msg": true, "compacted": true,
}

// codexItemTypes are the response item types the legacy form writes bare.
var codexItemTypes = map[string]bool{
	"message": true, "reasoning": true, "function_call": true, "function_call_output": true,
	"custom_tool_call": true, "custom_tool_call_output": true, "local_shell_call": true, "web_search_call": true,
}

// detectCodex claims content whose first line is a {timestamp, type, payload}
// object with a Codex line type, or a legacy header {id, timestamp, instructions}
// without a type, or a bare response item carrying a call_id or an
// input_text/output_text content part.
func detectCodex(head []byte) bool {
	h := jsonscan.ScanHead(codexHead(head))
	if h.Array {
		return false
	}
	typ, hasType := jsonscan.Text(h.Vals["type"])
	if h.Keys["payload"] && h.Keys["timestamp"] {
		return hasType && codexWrapperTypes[typ]
	}
	if !h.Keys["type"] && h.Keys["id"] && h.Keys["timestamp"] && h.Keys["instructions"] {
		return true
	}
	if hasType && codexItemTypes[typ] && !h.Keys["uuid"] && !h.Keys["sessionId"] {
		if h.Keys["call_id"] {
			return true
		}
		for _, p := range h.Elems["content"] {
			part, _ := jsonscan.Loose(p)
			if t, _ := jsonscan.Text(part["type"]); t == "input_text" || t == "output_text" {
				return true
			}
		}
	}
	return false
}

// codexHead is what detectCodex judges: head, or the first whole record of its
// first line when that line is torn (jsonlUntorn).
func codexHead(head []byte) []byte {
	line := head
	if i := bytes.IndexByte(head, lineSep(head)); i >= 0 {
		line = head[:i]
	}
	line = bytes.TrimSpace(line)
	if u := jsonlUntorn(line); len(u) != len(line) {
		return u
	}
	return head
}

type codexReader struct {
	b    *builder
	name string
	opts Options
	cur  *Message        // the assistant turn being assembled
	task string          // first event_msg user_message
	ts   json.RawMessage // the timestamp of the line being read, raw
}

// at returns the time of line n, the line being read.
func (r *codexReader) at(n int) time.Time { return r.b.timeOf(r.ts, n, "timestamp") }

func readCodex(name string, data []byte, opts Options) (*Session, error) {
	r := &codexReader{b: newBuilder(FormatCodex, name, data), name: name, opts: opts}
	q := jsonlQueue{lines: jsonlSplit(data)}
	for ln, ok := q.pop(); ok; ln, ok = q.pop() {
		pe := r.line(ln.no, ln.start, ln.end)
		if pe == nil {
			continue
		}
		if raw := data[ln.start:ln.end]; !json.Valid(raw) {
			// A torn line: the whole records after the fragment are read.
			mended, err := jsonlMended(ln, raw, pe.Msg, func(msg string) error {
				return skipEntry(r.b, opts, &ParseError{File: name, Line: ln.no, Msg: msg})
			})
			if err != nil {
				return nil, err
			}
			q.push(mended)
			continue
		}
		if err := skipEntry(r.b, opts, pe); err != nil {
			return nil, err
		}
	}
	r.flush()
	if r.task != "" {
		r.b.s.Task = codexRequest(r.task)
	}
	s, err := r.b.finish()
	if err != nil {
		return nil, err
	}
	s.Task = codexRequest(s.Task)
	return s, nil
}

// line reads one non-blank line, raw[start:stop]. It returns a *ParseError, having
// added nothing, when the line is malformed.
func (r *codexReader) line(n, start, stop int) *ParseError {
	raw := r.b.s.raw[start:stop]
	bad := func(field, msg string) *ParseError {
		return &ParseError{File: r.name, Line: n, Field: field, Msg: msg}
	}
	if !utf8.Valid(raw) {
		return bad("", "invalid UTF-8")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		if json.Valid(raw) {
			return bad("", "line is not a JSON object")
		}
		return jsonError(r.name, raw, n-1, "", err)
	}
	if obj == nil {
		return bad("", "line is not a JSON object")
	}
	typ, _ := jsonscan.Text(obj["type"])
	r.ts = obj["timestamp"]
	switch {
	case obj["payload"] != nil && codexWrapperTypes[typ]:
		payload, ok := jsonscan.Loose(obj["payload"])
		if !ok {
			return bad("payload", "not an object")
		}
		return r.wrapped(n, start, stop, typ, payload)
	case obj["payload"] != nil:
		r.b.warn("line %d: record type %q left out", n, typ)
	case obj["record_type"] != nil:
	case typ != "":
		return r.item(n, start, stop, obj, "")
	case obj["id"] != nil && obj["timestamp"] != nil:
		if r.b.s.ID == "" {
			r.b.s.ID, _ = jsonscan.Text(obj["id"])
		}
	default:
		r.b.warn("line %d: unrecognised line left out", n)
	}
	return nil
}

func (r *codexReader) wrapped(n, start, stop int, typ string, p map[string]json.RawMessage) *ParseError {
	str := func(k string) string { s, _ := jsonscan.Text(p[k]); return s }
	switch typ {
	case "session_meta":
		if r.b.s.ID == "" {
			r.b.s.ID = str("id")
		}
		if r.b.s.Cwd == "" {
			r.b.s.Cwd = str("cwd")
		}
	case "turn_context":
		if r.b.s.Cwd == "" {
			r.b.s.Cwd = str("cwd")
		}
	case "event_msg":
		if str("type") == "user_message" && r.task == "" {
			r.task = strings.TrimSpace(str("message"))
		}
	case "compacted":
		r.flush()
		if msg := str("message"); msg != "" {
			r.b.add(&Message{Role: RoleUser, Text: msg, Meta: true, Line: n, Time: r.at(n), AgentCompaction: true})
		}
	case "response_item":
		return r.item(n, start, stop, p, "payload")
	}
	return nil
}

// turn returns the assistant message being assembled, starting one at line n.
func (r *codexReader) turn(n int) *Message {
	if r.cur == nil {
		r.cur = &Message{Role: RoleAssistant, Line: n, Time: r.at(n)}
	}
	return r.cur
}

// flush adds the assistant message being assembled.
func (r *codexReader) flush() {
	if r.cur != nil {
		r.b.add(r.cur)
		r.cur = nil
	}
}

// codexInjected are the openings of user messages Codex injects as context.
var codexInjected = []string{
	"<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<permissions instructions>",
	"<INSTRUCTIONS>", "<turn_aborted>", "<user_shell_command>",
}

// codexUserMeta reports whether a user message's text is one Codex injects as
// context (codexInjected), and sets s.Cwd from an <environment_context> block when
// s has none yet: what the session-file and the Responses request readers both do
// with a user message.
func codexUserMeta(s *Session, text string) bool {
	t := strings.TrimSpace(text)
	meta := false
	for _, p := range codexInjected {
		if strings.HasPrefix(t, p) {
			meta = true
		}
	}
	if s.Cwd == "" && strings.HasPrefix(t, "<environment_context>") {
		if mm := codexCwdRe.FindStringSubmatch(t); mm != nil {
			s.Cwd = strings.TrimSpace(mm[1])
		}
	}
	return meta
}

var codexCwdRe = regexp.MustCompile(`<cwd>([^<]+)</cwd>`)

// item reads one response item; base is its sjson path inside the line ("payload"
// or "" for bare items): a message (message), a call (call), or a call's output
// (output). Reasoning and web searches belong to the assistant's turn; other types
// are left out.
func (r *codexReader) item(n, start, stop int, it map[string]json.RawMessage, base string) *ParseError {
	v := codexItem{it: it, n: n, base: base}
	switch typ := v.str("type"); typ {
	case "message":
		return r.message(v)
	case "reasoning", "web_search_call":
		r.turn(n)
	case "function_call", "custom_tool_call", "local_shell_call":
		return r.call(v, typ)
	case "function_call_output", "custom_tool_call_output":
		return r.output(v, start, stop)
	}
	return nil
}

// codexItem is one response item, with its line's number and its path in the line.
type codexItem struct {
	it   map[string]json.RawMessage
	n    int
	base string
}

// str is the text of field k, "" when absent or not text.
func (v codexItem) str(k string) string { s, _ := jsonscan.Text(v.it[k]); return s }

// bad is the error for the item's field.
func (r *codexReader) bad(v codexItem, field, msg string) *ParseError {
	return &ParseError{File: r.name, Line: v.n, Field: jsonscan.Path(v.base, field), Msg: msg}
}

// message reads a message item: an assistant's text joins the turn, a user's
// message (injected context is Meta; the environment context gives the session's
// working directory) and a developer's or system's are messages of their own.
func (r *codexReader) message(v codexItem) *ParseError {
	n := v.n
	text, _, _, ok := contentParts(v.it["content"], "")
	if !ok {
		return r.bad(v, "content", "neither a string nor a list of parts")
	}
	switch role := v.str("role"); role {
	case "assistant":
		m := r.turn(n)
		if m.Text != "" && text != "" {
			m.Text += "\n"
		}
		m.Text += text
	case "user":
		r.flush()
		meta := codexUserMeta(r.b.s, text)
		r.b.add(&Message{Role: RoleUser, Text: text, Meta: meta, Line: n, Time: r.at(n)})
	case "developer", "system":
		r.flush()
		r.b.add(&Message{Role: RoleSystem, Text: text, Meta: true, Line: n, Time: r.at(n)})
	default:
		return r.bad(v, "role", "unknown message role "+strconv.Quote(role))
	}
	return nil
}

// call reads a call item of type typ into the assistant's turn: a function call
// (JSON arguments), a custom tool call (its input, as a JSON string) or a local
// shell call (its action object).
func (r *codexReader) call(v codexItem, typ string) *ParseError {
	var c *ToolCall
	switch typ {
	case "function_call", "custom_tool_call":
		name, ok := jsonscan.Text(v.it["name"])
		if !ok {
			return r.bad(v, "name", "missing or not a string")
		}
		c = &ToolCall{ID: v.str("call_id"), Name: name}
		if typ == "custom_tool_call" {
			c.Args, _ = json.Marshal(v.str("input"))
		} else {
			c.Args = argsJSON(v.it["arguments"])
		}
	default: // local_shell_call
		if jsonscan.Kind(v.it["action"]) != '{' {
			return r.bad(v, "action", "missing or not an object")
		}
		c = &ToolCall{ID: v.str("call_id"), Name: "local_shell", Args: argsJSON(v.it["action"])}
		if c.ID == "" {
			c.ID = v.str("id")
		}
	}
	m := r.turn(v.n)
	m.Calls = append(m.Calls, c)
	return nil
}

// output reads a call's output item, the tool message of its own line (start,
// stop: the unit Rewrite patches).
func (r *codexReader) output(v codexItem, start, stop int) *ParseError {
	id, ok := jsonscan.Text(v.it["call_id"])
	if !ok {
		return r.bad(v, "call_id", "missing or not a string")
	}
	o, pe := codexOutput(v.it["output"], jsonscan.Path(v.base, "output"))
	if pe != nil {
		pe.File, pe.Line = r.name, v.n
		return pe
	}
	r.flush()
	o.CallID = id
	setLoc(o, r.b.addUnit(start, stop), o.paths...)
	r.b.add(&Message{Role: RoleTool, Outputs: []*ToolOutput{o}, Line: v.n, Time: r.at(v.n)})
	return nil
}

var codexExitRe = regexp.MustCompile(`(?m)^(?:Process exited with code|Exit code:)\s*(-?\d+)\s*$`)

// codexOutput reads an output field; the returned output's paths are set (relative
// to the line) and must be registered with setLoc by the caller.
func codexOutput(raw json.RawMessage, path string) (*ToolOutput, *ParseError) {
	o := &ToolOutput{}
	switch jsonscan.Kind(raw) {
	case 0, 'n':
		return o, nil
	case '"':
		s, _ := jsonscan.Text(raw)
		o.Text, o.paths = s, []string{path}
		if inner, ok := codexPeel(s); ok {
			o.Text = inner.text
			o.IsError = inner.failed
			return o, nil
		}
		head := s
		if i := strings.Index(s, "\nOutput:\n"); i >= 0 {
			head = s[:i]
		} else {
			head = s[:min(len(s), 400)]
		}
		if m := codexExitRe.FindStringSubmatch(head); m != nil {
			o.IsError = m[1] != "0"
		}
		return o, nil
	case '[':
		text, paths, image, _ := contentParts(raw, path)
		o.Text, o.paths, o.HasImage = text, paths, image
		return o, nil
	case '{':
		obj, _ := jsonscan.Loose(raw)
		text, paths, image, ok := contentParts(obj["content"], jsonscan.Path(path, "content"))
		if !ok {
			return nil, &ParseError{Field: jsonscan.Path(path, "content"), Msg: "neither a string nor a list of parts"}
		}
		o.Text, o.paths, o.HasImage = text, paths, image
		o.IsError = strings.TrimSpace(string(obj["success"])) == "false"
		return o, nil
	}
	return nil, &ParseError{Field: path, Msg: "output is neither a string, a list nor an object"}
}

// codexPeeled is the inside of a {output, metadata} output string.
type codexPeeled struct {
	text   string
	failed bool
}

// codexPeel reads an output string holding {"output": …, "metadata":
// {"exit_code": N, …}}.
func codexPeel(s string) (codexPeeled, bool) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "{") || !strings.Contains(t, `"output"`) {
		return codexPeeled{}, false
	}
	var v struct {
		Output   *string `json:"output"`
		Metadata *struct {
			ExitCode json.RawMessage `json:"exit_code"`
		} `json:"metadata"`
	}
	if json.Unmarshal([]byte(t), &v) != nil || v.Output == nil || v.Metadata == nil {
		return codexPeeled{}, false
	}
	code, ok := jsonscan.Int(v.Metadata.ExitCode)
	return codexPeeled{text: *v.Output, failed: ok && code != 0}, true
}

// codexRequest cuts a VS Code prompt ("# Context from my IDE setup: … ## My
// request for Codex: …") to the request.
func codexRequest(task string) string {
	const marker = "## My request for Codex:"
	if i := strings.Index(task, marker); i >= 0 {
		return strings.TrimSpace(task[i+len(marker):])
	}
	return task
}
