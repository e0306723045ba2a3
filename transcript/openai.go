package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds the three readers that share the OpenAI chat-completions message
// shape (TRANSCRIPT-FORMATS.md §5, §6, §8) and the helpers every whole-document JSON
// reader of this package uses (Gemini CLI, OpenHands, and these three).
//
//   - "openai": a bare message list or a {messages:[...]} request body. Calls are
//     assistant tool_calls[{id, function{name, arguments}}] (arguments a JSON string)
//     and the deprecated function_call{name, arguments}; results are role "tool"
//     messages naming tool_call_id (or role "function" naming the function).
//   - "mini-swe-agent": the same list, in a {info, messages, trajectory_format} object
//     or bare. v1 text-only trajectories carry no call ids: each assistant message
//     holding a ```bash (or ```mswea_bash_command) block makes one call named "bash"
//     with Args {"command": <first block>}, and the next user message is its
//     observation. The observation IsError when its <returncode> (or
//     extra.returncode) is non-zero, when the command timed out, or when the assistant
//     message held more than one block (mini-swe-agent then runs nothing and answers
//     with a format error). v2 tool-call trajectories read like "openai".
//   - "swe-agent": the history[] of a .traj file. Calls come from tool_calls when the
//     run used function calling, else from the message's "action" text (v0.x
//     text-only): the call is named by the action's first word when that word is a
//     SWE-agent command (open, edit, create, str_replace_editor, find_file, …), and
//     "bash" otherwise (as SWE-agent's own function-calling runs name them), with
//     Args {"command": <whole action text>}; the next user message is its
//     observation. role "tool" messages name their call in the
//     plural tool_call_ids. Demonstrations (is_demo, or message_type
//     "demonstration") are injected context: they become Meta user messages with no
//     calls and no steps, whatever role they were recorded under. An observation
//     answering an edit with "Your proposed edit has introduced new syntax
//     error(s)" or "No replacement was performed" IsError: the edit was not applied.
//     Classify maps the windowed editor's commands (open, goto, scroll_*, create,
//     edit, insert) and ResolveOpenFiles, run over the finished session, names the
//     file they act on and the lines each window shows.
//
// All three register the whole document as one unit; output locations are sjson
// paths such as "messages.5.content", "history.12.content.0.text" or "3.content".

// ---- helpers shared by the whole-document JSON readers ----

// docHead is what a detector can learn from the first DetectBytes of a JSON
// document, which may be cut anywhere.
type docHead struct {
	array bool                         // the root is an array
	items []json.RawMessage            // root array: its complete leading elements
	keys  map[string]bool              // root object: every key seen (its value may be cut)
	vals  map[string]json.RawMessage   // root object: complete non-array values
	elems map[string][]json.RawMessage // root object: complete leading elements of array values
}

// docScanHead decodes as much of head's first JSON value as is complete.
func docScanHead(head []byte) docHead {
	h := docHead{keys: map[string]bool{}, vals: map[string]json.RawMessage{}, elems: map[string][]json.RawMessage{}}
	dec := json.NewDecoder(bytes.NewReader(head))
	tok, err := dec.Token()
	if err != nil {
		return h
	}
	switch tok {
	case json.Delim('['):
		h.array = true
		h.items, _ = docLeadingElems(dec)
	case json.Delim('{'):
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return h
			}
			k, ok := kt.(string)
			if !ok {
				return h
			}
			h.keys[k] = true
			rest := bytes.TrimLeft(head[dec.InputOffset():], " \t\r\n:")
			if len(rest) > 0 && rest[0] == '[' {
				if _, err := dec.Token(); err != nil {
					return h
				}
				items, done := docLeadingElems(dec)
				h.elems[k] = items
				if !done {
					return h
				}
				if _, err := dec.Token(); err != nil {
					return h
				}
				continue
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return h
			}
			h.vals[k] = raw
		}
	}
	return h
}

// docLeadingElems decodes array elements until the closing bracket (done) or until
// the input ends or breaks.
func docLeadingElems(dec *json.Decoder) (items []json.RawMessage, done bool) {
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return items, false
		}
		items = append(items, raw)
	}
	return items, true
}

// docString returns a JSON string's value, or a number's literal (ids and counts are
// sometimes written as numbers); ok is false for null, missing and other kinds.
func docString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case c == '-' || c >= '0' && c <= '9':
		return string(raw), true
	}
	return "", false
}

// docInt returns a JSON number, or a string holding one, as an int.
func docInt(raw json.RawMessage) (int, bool) {
	s, ok := docString(raw)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f != f || f > 1<<53 || f < -(1<<53) {
		return 0, false
	}
	return int(f), true
}

// docKind returns the first byte of a JSON value ('{', '[', '"', 'n', …), 0 when empty.
func docKind(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// docObject decodes raw as an object of raw values; ok is false for anything else.
func docObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	if docKind(raw) != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	return m, true
}

// docDecode fills the json.RawMessage fields of the struct dst points to from the
// JSON object raw, matching keys exactly: encoding/json matches struct tags without
// regard to case, which would set the reader apart from the sjson paths Rewrite
// uses. ok is false when raw is not an object.
func docDecode(raw json.RawMessage, dst any) bool {
	obj, ok := docObject(raw)
	if !ok {
		return false
	}
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if r, ok := obj[tag]; ok {
			v.Field(i).Set(reflect.ValueOf(r))
		}
	}
	return true
}

// docArray decodes raw as an array of raw values. null and missing give an empty
// list; ok is false for any other non-array.
func docArray(raw json.RawMessage) ([]json.RawMessage, bool) {
	switch docKind(raw) {
	case 0, 'n':
		return nil, true
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil {
			return nil, false
		}
		return a, true
	}
	return nil, false
}

// docPath joins sjson path segments, skipping empty ones.
func docPath(parts ...any) string {
	var sb strings.Builder
	for _, p := range parts {
		s := fmt.Sprint(p)
		if s == "" {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(s)
	}
	return sb.String()
}

// docLine returns the 1-based line holding byte offset off of data.
func docLine(data []byte, off int64) int {
	if off < 0 {
		off = 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}

// docJSONError turns a JSON decoding error over data into a *ParseError naming the
// line (counted from line 1 of data, plus base) and field.
func docJSONError(name string, data []byte, base int, field string, err error) *ParseError {
	pe := &ParseError{File: name, Field: field, Msg: err.Error()}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		pe.Line = base + docLine(data, se.Offset)
		pe.Msg = "invalid JSON: " + se.Error()
		if se.Offset >= int64(len(bytes.TrimRight(data, " \t\r\n"))) {
			pe.Msg = "truncated JSON: " + se.Error()
		}
	case errors.As(err, &te):
		pe.Line = base + docLine(data, te.Offset)
		pe.Field = docPath(field, te.Field)
		pe.Msg = fmt.Sprintf("expected %s, found JSON %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		pe.Line = base + docLine(data, int64(len(data)))
		pe.Msg = "truncated JSON"
	}
	return pe
}

// docUTF8 checks that data is valid UTF-8. In strict mode it fails with a
// *ParseError naming the line of the first bad byte; lenient mode only warns (Go's
// JSON decoder then reads bad bytes as U+FFFD).
func docUTF8(b *builder, name string, data []byte, opts Options) error {
	if utf8.Valid(data) {
		return nil
	}
	off := 0
	for off < len(data) {
		r, n := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	pe := &ParseError{File: name, Line: docLine(data, int64(off)), Msg: fmt.Sprintf("invalid UTF-8 at byte %d", off)}
	if !opts.Lenient {
		return pe
	}
	b.warn("%s (read as U+FFFD)", pe.Error())
	return nil
}

// docSkip fails with pe in strict mode; in lenient mode it counts the entry as
// skipped, records a warning and returns nil.
func docSkip(b *builder, opts Options, pe *ParseError) error {
	if !opts.Lenient {
		return pe
	}
	b.s.Skipped++
	b.warn("skipped: %s", pe.Error())
	return nil
}

// docLoad checks data (UTF-8, JSON syntax) and decodes it into v, registering the
// whole document as unit 0. Errors are *ParseError.
func docLoad(b *builder, name string, data []byte, opts Options, v any) error {
	if err := docUTF8(b, name, data, opts); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return docJSONError(name, data, 0, "", err)
	}
	b.addUnit(0, len(data))
	return nil
}

// docParts reads a chat message content: a string, null, or a list of parts
// ({type:"text"|"input_text"|"output_text", text}, bare strings, images). It returns
// the text pieces joined with "\n", the sjson path of each piece under base, and
// whether an image part was present. ok is false when content is some other kind.
func docParts(raw json.RawMessage, base string) (text string, paths []string, image bool, ok bool) {
	switch docKind(raw) {
	case 0, 'n':
		return "", nil, false, true
	case '"':
		s, _ := docString(raw)
		return s, []string{base}, false, true
	case '[':
	default:
		return "", nil, false, false
	}
	parts, ok := docArray(raw)
	if !ok {
		return "", nil, false, false
	}
	var texts []string
	for i, p := range parts {
		if docKind(p) == '"' {
			s, _ := docString(p)
			texts = append(texts, s)
			paths = append(paths, docPath(base, i))
			continue
		}
		obj, isObj := docObject(p)
		if !isObj {
			continue
		}
		typ, _ := docString(obj["type"])
		if strings.Contains(typ, "image") || obj["image_url"] != nil || obj["inlineData"] != nil {
			image = true
			continue
		}
		if s, isStr := docString(obj["text"]); isStr && docKind(obj["text"]) == '"' {
			texts = append(texts, s)
			paths = append(paths, docPath(base, i, "text"))
		}
	}
	return strings.Join(texts, "\n"), paths, image, true
}

// docArgs turns a function-call arguments value into Args: a JSON string holding
// JSON becomes that JSON, an object (or other value) is kept in compact form, any
// other string becomes a JSON string; missing gives {}.
func docArgs(raw json.RawMessage) json.RawMessage {
	switch docKind(raw) {
	case 0, 'n':
		return json.RawMessage("{}")
	case '"':
		s, _ := docString(raw)
		t := bytes.TrimSpace([]byte(s))
		if len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
			return json.RawMessage(t)
		}
		if len(t) == 0 {
			return json.RawMessage("{}")
		}
		q, _ := json.Marshal(s)
		return q
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return append(json.RawMessage(nil), bytes.TrimSpace(raw)...)
	}
	return buf.Bytes()
}

// docCommandArgs returns {"command": cmd} as JSON.
func docCommandArgs(cmd string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return b
}

// classifyLike classifies c as if it were a call of tool name with args, then gives c
// back its own Name and Args. Readers use it when the arguments Classify needs are
// recorded somewhere other than the call's own Args (OpenHands keeps an old edit's
// editor command in the model's raw tool call).
func classifyLike(c *ToolCall, name string, args any, cwd string) {
	raw, err := json.Marshal(args)
	if err != nil {
		raw = []byte("{}")
	}
	tmp := *c
	tmp.Name, tmp.Args = name, raw
	tmp.Classify(cwd)
	tmp.Name, tmp.Args = c.Name, c.Args
	*c = tmp
}

// ---- detection ----

func init() {
	register(reader{format: FormatOpenAI, detect: detectOpenAI, read: readOpenAI})
	register(reader{format: FormatMiniSWEAgent, detect: detectMiniSWEAgent, read: readMiniSWEAgent})
	register(reader{format: FormatSWEAgent, detect: detectSWEAgent, read: readSWEAgent})
}

// chatTraits summarises a list of chat messages for detection.
type chatTraits struct {
	n          int  // messages seen
	allRoles   bool // every element is an object with a string role
	toolish    bool // role tool/function, tool_calls or function_call present
	system     bool // a system or developer message
	bashBlocks bool // a ```bash or ```mswea_bash_command block in some content
	anthropic  bool // Anthropic content blocks (tool_use, tool_result, thinking)
}

func chatTraitsOf(items []json.RawMessage) chatTraits {
	t := chatTraits{allRoles: len(items) > 0}
	for _, it := range items {
		t.n++
		obj, ok := docObject(it)
		if !ok {
			t.allRoles = false
			continue
		}
		role, isStr := docString(obj["role"])
		if !isStr || docKind(obj["role"]) != '"' {
			t.allRoles = false
		}
		switch role {
		case "tool", "function":
			t.toolish = true
		case "system", "developer":
			t.system = true
		}
		if docKind(obj["tool_calls"]) == '[' || docKind(obj["function_call"]) == '{' {
			t.toolish = true
		}
		c := obj["content"]
		if bytes.Contains(c, []byte("```bash")) || bytes.Contains(c, []byte("```mswea_bash_command")) {
			t.bashBlocks = true
		}
		if bytes.Contains(c, []byte(`"tool_use"`)) || bytes.Contains(c, []byte(`"tool_result"`)) || bytes.Contains(c, []byte(`"thinking"`)) {
			t.anthropic = true
		}
	}
	return t
}

// detectOpenAI claims a bare list of role-tagged messages, or an object whose
// messages[] uses OpenAI-only shapes (role tool/system/developer, tool_calls), that
// neither holds Anthropic content blocks nor looks like a text-only mini-swe-agent
// trajectory (bash blocks and no tool calls), and is not a trajectory object.
func detectOpenAI(head []byte) bool {
	h := docScanHead(head)
	if h.array {
		t := chatTraitsOf(h.items)
		return t.n > 0 && t.allRoles && !t.anthropic && !(t.bashBlocks && !t.toolish)
	}
	if !h.keys["messages"] || h.keys["info"] || h.keys["trajectory_format"] || h.keys["history"] || h.keys["sessionId"] {
		return false
	}
	t := chatTraitsOf(h.elems["messages"])
	return t.n > 0 && t.allRoles && !t.anthropic && (t.toolish || t.system) && !(t.bashBlocks && !t.toolish)
}

// detectMiniSWEAgent claims an object with trajectory_format "mini-swe-agent-…" or
// with info and messages keys (info first, as mini-swe-agent writes it; a head cut
// inside a huge info is recognised by its mini_version key), and a bare list of
// role-tagged messages carrying ```bash blocks and no tool calls.
func detectMiniSWEAgent(head []byte) bool {
	h := docScanHead(head)
	if h.array {
		t := chatTraitsOf(h.items)
		return t.n > 0 && t.allRoles && !t.anthropic && t.bashBlocks && !t.toolish
	}
	if f, _ := docString(h.vals["trajectory_format"]); strings.HasPrefix(f, "mini-swe-agent") {
		return true
	}
	if h.keys["trajectory"] || h.keys["history"] {
		return false
	}
	if h.keys["info"] && h.keys["messages"] {
		return true
	}
	return h.keys["info"] && len(h.vals) == 0 && bytes.Contains(head, []byte(`"mini_version"`))
}

// detectSWEAgent claims an object with a history[] and a trajectory[], or (when the
// head ends inside a long trajectory) a trajectory[] whose first step has action and
// observation.
func detectSWEAgent(head []byte) bool {
	h := docScanHead(head)
	if h.array || !h.keys["trajectory"] {
		return false
	}
	if h.keys["history"] {
		return true
	}
	if steps := h.elems["trajectory"]; len(steps) > 0 {
		obj, ok := docObject(steps[0])
		return ok && obj["action"] != nil && obj["observation"] != nil
	}
	return false
}

// ---- reading ----

type chatMode int

const (
	chatOpenAI chatMode = iota // tool_calls / role tool only
	chatMini                   // also ```bash blocks paired with the next user message
	chatSWE                    // also SWE-agent action text, tool_call_ids, demonstrations
)

// chatReader walks one list of chat messages into a builder.
type chatReader struct {
	b       *builder
	opts    Options
	name    string
	prefix  string // sjson path of the list inside the document ("" for a bare list)
	mode    chatMode
	pending *ToolCall // text-only call waiting for its observation
	multi   bool      // mini: the pending call's message held more than one block
	byName  map[string][]*ToolCall
	// onAdd, when set, receives each message instead of the builder (the
	// request-body fast path, body.go); nocache is set while reading a message whose
	// reading depends on the messages before it (function_call and role "function").
	onAdd   func(m *Message)
	nocache bool
}

// add hands a decoded message to the builder, or to onAdd.
func (r *chatReader) add(m *Message) {
	if r.onAdd != nil {
		r.onAdd(m)
		return
	}
	r.b.add(m)
}

// chatMsg is one message; every field is kept raw so that a wrong type in a field
// the reader does not use never fails the read.
type chatMsg struct {
	Role         json.RawMessage `json:"role"`
	Content      json.RawMessage `json:"content"`
	ToolCalls    json.RawMessage `json:"tool_calls"`
	ToolCallID   json.RawMessage `json:"tool_call_id"`
	ToolCallIDs  json.RawMessage `json:"tool_call_ids"`
	Name         json.RawMessage `json:"name"`
	FunctionCall json.RawMessage `json:"function_call"`
	MessageType  json.RawMessage `json:"message_type"`
	Action       json.RawMessage `json:"action"`
	IsDemo       json.RawMessage `json:"is_demo"`
	Extra        json.RawMessage `json:"extra"`
}

// readOpenAI reads a chat-completions message list or request body. It tries
// readOpenAIBody first (body.go: one scan, per-message decoding, Options.Cache) and
// reads the document again with readOpenAIFull when that path declines.
func readOpenAI(name string, data []byte, opts Options) (*Session, error) {
	if s, ok := readOpenAIBody(name, data, opts); ok {
		return s, nil
	}
	return readOpenAIFull(name, data, opts)
}

// readOpenAIFull is readOpenAI without the fast path.
func readOpenAIFull(name string, data []byte, opts Options) (*Session, error) {
	b := newBuilder(FormatOpenAI, name, data)
	var root json.RawMessage
	if err := docLoad(b, name, data, opts, &root); err != nil {
		return nil, err
	}
	msgs, prefix, err := chatList(name, root, "messages")
	if err != nil {
		return nil, err
	}
	r := &chatReader{b: b, opts: opts, name: name, prefix: prefix, mode: chatOpenAI}
	if err := r.readAll(msgs); err != nil {
		return nil, err
	}
	return b.finish()
}

func readMiniSWEAgent(name string, data []byte, opts Options) (*Session, error) {
	b := newBuilder(FormatMiniSWEAgent, name, data)
	var root json.RawMessage
	if err := docLoad(b, name, data, opts, &root); err != nil {
		return nil, err
	}
	msgs, prefix, err := chatList(name, root, "messages")
	if err != nil {
		return nil, err
	}
	if obj, ok := docObject(root); ok {
		b.s.ID, _ = docString(obj["instance_id"])
		var info struct {
			Config struct {
				Environment struct {
					Cwd json.RawMessage `json:"cwd"`
				} `json:"environment"`
			} `json:"config"`
		}
		if json.Unmarshal(obj["info"], &info) == nil {
			b.s.Cwd, _ = docString(info.Config.Environment.Cwd)
		}
	}
	r := &chatReader{b: b, opts: opts, name: name, prefix: prefix, mode: chatMini}
	if err := r.readAll(msgs); err != nil {
		return nil, err
	}
	return b.finish()
}

// sweCwdRe finds the working directory SWE-agent appends to its observations.
var sweCwdRe = regexp.MustCompile(`\(Current directory: ([^)\n]+)\)`)

func readSWEAgent(name string, data []byte, opts Options) (*Session, error) {
	b := newBuilder(FormatSWEAgent, name, data)
	var root json.RawMessage
	if err := docLoad(b, name, data, opts, &root); err != nil {
		return nil, err
	}
	msgs, prefix, err := chatList(name, root, "history")
	if err != nil {
		return nil, err
	}
	if prefix == "" {
		return nil, &ParseError{File: name, Field: "history", Msg: "a SWE-agent trajectory is an object with a history list"}
	}
	// The working directory is the first one an observation reports (the system
	// prompt and demonstrations hold placeholders and other repositories' paths).
	for _, m := range msgs {
		var cm chatMsg
		if !docDecode(m, &cm) {
			continue
		}
		role, _ := docString(cm.Role)
		msgType, _ := docString(cm.MessageType)
		if role == "system" || role == "assistant" || string(bytes.TrimSpace(cm.IsDemo)) == "true" || msgType == "demonstration" {
			continue
		}
		text, _, _, _ := docParts(cm.Content, "")
		if mm := sweCwdRe.FindStringSubmatch(text); mm != nil && !strings.HasPrefix(mm[1], "<") {
			b.s.Cwd = strings.TrimSpace(mm[1])
			break
		}
	}
	r := &chatReader{b: b, opts: opts, name: name, prefix: prefix, mode: chatSWE}
	if err := r.readAll(msgs); err != nil {
		return nil, err
	}
	s, err := b.finish()
	if err != nil {
		return nil, err
	}
	ResolveOpenFiles(s)
	return s, nil
}

// chatList finds the message list: the root array, or the root object's key.
func chatList(name string, root json.RawMessage, key string) ([]json.RawMessage, string, error) {
	switch docKind(root) {
	case '[':
		msgs, _ := docArray(root)
		return msgs, "", nil
	case '{':
		obj, _ := docObject(root)
		raw, present := obj[key]
		if !present {
			return nil, "", &ParseError{File: name, Field: key, Msg: "missing message list"}
		}
		if docKind(raw) != '[' {
			return nil, "", &ParseError{File: name, Field: key, Msg: "not a list"}
		}
		msgs, ok := docArray(raw)
		if !ok {
			return nil, "", &ParseError{File: name, Field: key, Msg: "not a list"}
		}
		return msgs, key, nil
	}
	return nil, "", &ParseError{File: name, Msg: "expected a JSON object or a list of messages"}
}

func (r *chatReader) readAll(msgs []json.RawMessage) error {
	for i, raw := range msgs {
		if err := r.readOne(i, raw); err != nil {
			var pe *ParseError
			if errors.As(err, &pe) {
				if err := docSkip(r.b, r.opts, pe); err != nil {
					return err
				}
				continue
			}
			return err
		}
	}
	return nil
}

func (r *chatReader) bad(path, format string, args ...any) *ParseError {
	return &ParseError{File: r.name, Field: path, Msg: fmt.Sprintf(format, args...)}
}

// readOne reads message i. It returns a *ParseError, before adding anything, when
// the message is malformed.
func (r *chatReader) readOne(i int, raw json.RawMessage) error {
	path := docPath(r.prefix, i)
	if docKind(raw) != '{' {
		return r.bad(path, "message is not a JSON object")
	}
	var m chatMsg
	docDecode(raw, &m)
	role, ok := docString(m.Role)
	if !ok || docKind(m.Role) != '"' {
		return r.bad(docPath(path, "role"), "missing or not a string")
	}
	text, paths, image, ok := docParts(m.Content, docPath(path, "content"))
	if !ok {
		return r.bad(docPath(path, "content"), "content is neither a string nor a list of parts")
	}
	msgType, _ := docString(m.MessageType)
	demo := string(bytes.TrimSpace(m.IsDemo)) == "true" || msgType == "demonstration"
	switch {
	case r.mode == chatSWE && demo:
		r.pending = nil
		r.add(&Message{Role: RoleUser, Text: text, Meta: true})
	case role == "system" || role == "developer":
		r.pending = nil
		r.add(&Message{Role: RoleSystem, Text: text})
	case role == "assistant":
		return r.assistant(path, m, text)
	case role == "tool":
		return r.toolResult(path, m, text, paths, image)
	case role == "function":
		r.nocache = true
		fn, _ := docString(m.Name)
		o := &ToolOutput{CallID: "function:" + fn, Text: text, HasImage: image}
		if q := r.byName[fn]; len(q) > 0 {
			o.CallID = q[0].ID
			r.byName[fn] = q[1:]
		}
		setLoc(o, 0, r.outPaths(path, m.Content, paths)...)
		r.add(&Message{Role: RoleTool, Outputs: []*ToolOutput{o}})
	case role == "user":
		if c := r.pending; c != nil && (r.mode != chatSWE || msgType == "" || msgType == "observation") {
			r.pending = nil
			o := &ToolOutput{CallID: c.ID, Text: text, HasImage: image, IsError: r.observationFailed(c, text, m.Extra)}
			setLoc(o, 0, r.outPaths(path, m.Content, paths)...)
			r.add(&Message{Role: RoleTool, Outputs: []*ToolOutput{o}})
			return nil
		}
		r.add(&Message{Role: RoleUser, Text: text})
	default:
		r.b.warn("%s: message with role %q left out", path, role)
	}
	return nil
}

// outPaths gives the rewrite paths of an output whose content had the given text
// pieces: the pieces, or the content field itself when it held none (null, an empty
// list); none when the message has no content key, as Rewrite never adds one.
func (r *chatReader) outPaths(path string, content json.RawMessage, pieces []string) []string {
	if len(pieces) > 0 {
		return pieces
	}
	if content == nil {
		return nil
	}
	return []string{docPath(path, "content")}
}

var miniBashBlockRe = regexp.MustCompile("(?s)```(?:bash|mswea_bash_command)[ \\t\\r]*\\n(.*?)\\n```")

func (r *chatReader) assistant(path string, m chatMsg, text string) error {
	r.pending = nil
	msg := &Message{Role: RoleAssistant, Text: text}
	tcs, ok := docArray(m.ToolCalls)
	if !ok {
		return r.bad(docPath(path, "tool_calls"), "not a list")
	}
	for k, tc := range tcs {
		tpath := docPath(path, "tool_calls", k)
		obj, ok := docObject(tc)
		if !ok {
			return r.bad(tpath, "tool call is not a JSON object")
		}
		fn, ok := docObject(obj["function"])
		if !ok {
			return r.bad(docPath(tpath, "function"), "missing or not an object")
		}
		name, ok := docString(fn["name"])
		if !ok {
			return r.bad(docPath(tpath, "function", "name"), "missing or not a string")
		}
		id, _ := docString(obj["id"])
		msg.Calls = append(msg.Calls, &ToolCall{ID: id, Name: name, Args: docArgs(fn["arguments"])})
	}
	var fnCall *ToolCall
	if len(msg.Calls) == 0 && docKind(m.FunctionCall) == '{' {
		fn, _ := docObject(m.FunctionCall)
		name, ok := docString(fn["name"])
		if !ok {
			return r.bad(docPath(path, "function_call", "name"), "missing or not a string")
		}
		fnCall = &ToolCall{Name: name, Args: docArgs(fn["arguments"])}
		msg.Calls = append(msg.Calls, fnCall)
		r.nocache = true
	}
	var textCall *ToolCall
	multi := false
	if len(msg.Calls) == 0 {
		switch r.mode {
		case chatMini:
			if blocks := miniBashBlockRe.FindAllStringSubmatch(text, -1); len(blocks) > 0 {
				textCall = &ToolCall{Name: "bash", Args: docCommandArgs(blocks[0][1])}
				multi = len(blocks) > 1
			}
		case chatSWE:
			if action, _ := docString(m.Action); strings.TrimSpace(action) != "" {
				textCall = &ToolCall{Name: sweCommandName(action), Args: docCommandArgs(action)}
			}
		}
		if textCall != nil {
			msg.Calls = append(msg.Calls, textCall)
		}
	}
	r.add(msg)
	if fnCall != nil {
		if r.byName == nil {
			r.byName = map[string][]*ToolCall{}
		}
		r.byName[fnCall.Name] = append(r.byName[fnCall.Name], fnCall)
	}
	if textCall != nil {
		r.pending, r.multi = textCall, multi
	}
	return nil
}

func (r *chatReader) toolResult(path string, m chatMsg, text string, paths []string, image bool) error {
	r.pending = nil
	id, ok := docString(m.ToolCallID)
	if !ok {
		ids, isList := docArray(m.ToolCallIDs)
		if !isList || len(ids) == 0 {
			return r.bad(docPath(path, "tool_call_id"), "tool message names no call")
		}
		if id, ok = docString(ids[0]); !ok {
			return r.bad(docPath(path, "tool_call_ids", 0), "not a string")
		}
		if len(ids) > 1 {
			r.b.warn("%s: one result for %d call ids; paired with the first", path, len(ids))
		}
	}
	o := &ToolOutput{CallID: id, Text: text, HasImage: image}
	if rc, ok := chatExtraReturncode(m.Extra); ok && rc != 0 {
		o.IsError = true
	}
	if r.mode == chatSWE && sweEditFailed(text) {
		o.IsError = true
	}
	setLoc(o, 0, r.outPaths(path, m.Content, paths)...)
	r.add(&Message{Role: RoleTool, Outputs: []*ToolOutput{o}})
	return nil
}

var miniReturncodeRe = regexp.MustCompile(`<returncode>\s*(-?\d+)\s*</returncode>`)

func chatExtraReturncode(extra json.RawMessage) (int, bool) {
	obj, ok := docObject(extra)
	if !ok {
		return 0, false
	}
	return docInt(obj["returncode"])
}

// observationFailed judges a text-only observation of call c.
func (r *chatReader) observationFailed(c *ToolCall, text string, extra json.RawMessage) bool {
	switch r.mode {
	case chatMini:
		if r.multi {
			return true
		}
		if rc, ok := chatExtraReturncode(extra); ok {
			return rc != 0
		}
		head := text[:min(len(text), 200)]
		if m := miniReturncodeRe.FindStringSubmatch(head); m != nil {
			return m[1] != "0"
		}
		return strings.HasPrefix(text, "The last command <command>") && strings.Contains(head, "timed out")
	case chatSWE:
		return sweEditFailed(text)
	}
	return false
}

// sweEditFailed recognises the answers SWE-agent gives when an edit was not applied.
func sweEditFailed(text string) bool {
	return strings.HasPrefix(text, "Your proposed edit has introduced new syntax error(s)") ||
		strings.HasPrefix(text, "No replacement was performed")
}

// sweCommands are SWE-agent's own commands (v0.x default tools, windowed editor,
// v1.x tool bundles); any other action is a bash command line.
var sweCommands = map[string]bool{
	"open": true, "goto": true, "scroll_up": true, "scroll_down": true, "create": true,
	"edit": true, "insert": true, "search_dir": true, "search_file": true, "find_file": true,
	"submit": true, "str_replace_editor": true, "filemap": true, "exit_forfeit": true,
	"exit_cost": true, "exit_context": true, "exit_format": true, "skip": true,
}

// sweCommandName names a text-only SWE-agent action by its first word.
func sweCommandName(action string) string {
	f := strings.Fields(action)
	if len(f) > 0 && sweCommands[f[0]] {
		return f[0]
	}
	return "bash"
}
