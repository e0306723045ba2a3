package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
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
// The helpers they share with the Gemini CLI and OpenHands readers are in
// document.go.

// ---- detection ----

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
		obj, ok := jsonscan.Loose(it)
		if !ok {
			t.allRoles = false
			continue
		}
		role, isStr := jsonscan.Text(obj["role"])
		if !isStr || jsonscan.Kind(obj["role"]) != '"' {
			t.allRoles = false
		}
		switch role {
		case "tool", "function":
			t.toolish = true
		case "system", "developer":
			t.system = true
		}
		if jsonscan.Kind(obj["tool_calls"]) == '[' || jsonscan.Kind(obj["function_call"]) == '{' {
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
	h := jsonscan.ScanHead(head)
	if h.Array {
		t := chatTraitsOf(h.Items)
		return t.n > 0 && t.allRoles && !t.anthropic && !(t.bashBlocks && !t.toolish)
	}
	if !h.Keys["messages"] || h.Keys["info"] || h.Keys["trajectory_format"] || h.Keys["history"] || h.Keys["sessionId"] {
		return false
	}
	t := chatTraitsOf(h.Elems["messages"])
	return t.n > 0 && t.allRoles && !t.anthropic && (t.toolish || t.system) && !(t.bashBlocks && !t.toolish)
}

// detectMiniSWEAgent claims an object with trajectory_format "mini-swe-agent-…" or
// with info and messages keys (info first, as mini-swe-agent writes it; a head cut
// inside a huge info is recognised by its mini_version key), and a bare list of
// role-tagged messages carrying ```bash blocks and no tool calls.
func detectMiniSWEAgent(head []byte) bool {
	h := jsonscan.ScanHead(head)
	if h.Array {
		t := chatTraitsOf(h.Items)
		return t.n > 0 && t.allRoles && !t.anthropic && t.bashBlocks && !t.toolish
	}
	if f, _ := jsonscan.Text(h.Vals["trajectory_format"]); strings.HasPrefix(f, "mini-swe-agent") {
		return true
	}
	if h.Keys["trajectory"] || h.Keys["history"] {
		return false
	}
	if h.Keys["info"] && h.Keys["messages"] {
		return true
	}
	return h.Keys["info"] && len(h.Vals) == 0 && bytes.Contains(head, []byte(`"mini_version"`))
}

// detectSWEAgent claims an object with a history[] and a trajectory[], or (when the
// head ends inside a long trajectory) a trajectory[] whose first step has action and
// observation.
func detectSWEAgent(head []byte) bool {
	h := jsonscan.ScanHead(head)
	if h.Array || !h.Keys["trajectory"] {
		return false
	}
	if h.Keys["history"] {
		return true
	}
	if steps := h.Elems["trajectory"]; len(steps) > 0 {
		obj, ok := jsonscan.Loose(steps[0])
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
	return readChat(FormatOpenAI, "messages", chatOpenAI, name, data, opts, nil)
}

func readMiniSWEAgent(name string, data []byte, opts Options) (*Session, error) {
	return readChat(FormatMiniSWEAgent, "messages", chatMini, name, data, opts, miniSession)
}

func readSWEAgent(name string, data []byte, opts Options) (*Session, error) {
	s, err := readChat(FormatSWEAgent, "history", chatSWE, name, data, opts, sweSession)
	if err != nil {
		return nil, err
	}
	ResolveOpenFiles(s)
	return s, nil
}

// readChat reads a whole-document chat list of the given format, found at key in a
// root object (or the root list itself), in mode. session, when set, fills in the
// session's fields from the root and the list (prefix is the list's path, "" for a
// root list) before the messages are read, or refuses the document.
func readChat(format Format, key string, mode chatMode, name string, data []byte, opts Options,
	session func(b *builder, root json.RawMessage, msgs []json.RawMessage, prefix string) error) (*Session, error) {
	b := newBuilder(format, name, data)
	root, err := loadDocument(b, name, data, opts)
	if err != nil {
		return nil, err
	}
	msgs, prefix, err := chatList(name, root, key)
	if err != nil {
		return nil, err
	}
	if session != nil {
		if err := session(b, root, msgs, prefix); err != nil {
			return nil, err
		}
	}
	r := &chatReader{b: b, opts: opts, name: name, prefix: prefix, mode: mode}
	if err := r.readAll(msgs); err != nil {
		return nil, err
	}
	return b.finish()
}

// miniSession takes a mini-swe-agent trajectory's instance_id and
// info.config.environment.cwd.
func miniSession(b *builder, root json.RawMessage, _ []json.RawMessage, _ string) error {
	obj, ok := jsonscan.Loose(root)
	if !ok {
		return nil
	}
	b.s.ID, _ = jsonscan.Text(obj["instance_id"])
	var info struct {
		Config struct {
			Environment struct {
				Cwd json.RawMessage `json:"cwd"`
			} `json:"environment"`
		} `json:"config"`
	}
	if json.Unmarshal(obj["info"], &info) == nil {
		b.s.Cwd, _ = jsonscan.Text(info.Config.Environment.Cwd)
	}
	return nil
}

// sweCwdRe finds the working directory SWE-agent appends to its observations.
var sweCwdRe = regexp.MustCompile(`\(Current directory: ([^)\n]+)\)`)

// sweSession requires the history list of a .traj object and takes the working
// directory: the first one an observation reports (the system prompt and
// demonstrations hold placeholders and other repositories' paths).
func sweSession(b *builder, _ json.RawMessage, msgs []json.RawMessage, prefix string) error {
	if prefix == "" {
		return &ParseError{File: b.s.Name, Field: "history", Msg: "a SWE-agent trajectory is an object with a history list"}
	}
	for _, m := range msgs {
		var cm chatMsg
		if !jsonscan.Decode(m, &cm) {
			continue
		}
		role, _ := jsonscan.Text(cm.Role)
		msgType, _ := jsonscan.Text(cm.MessageType)
		if role == "system" || role == "assistant" || string(bytes.TrimSpace(cm.IsDemo)) == "true" || msgType == "demonstration" {
			continue
		}
		text, _, _, _ := contentParts(cm.Content, "")
		if mm := sweCwdRe.FindStringSubmatch(text); mm != nil && !strings.HasPrefix(mm[1], "<") {
			b.s.Cwd = strings.TrimSpace(mm[1])
			break
		}
	}
	return nil
}

// chatList finds the message list: the root array, or the root object's key.
func chatList(name string, root json.RawMessage, key string) ([]json.RawMessage, string, error) {
	switch jsonscan.Kind(root) {
	case '[':
		msgs, _ := jsonscan.Array(root)
		return msgs, "", nil
	case '{':
		obj, _ := jsonscan.Loose(root)
		raw, present := obj[key]
		if !present {
			return nil, "", &ParseError{File: name, Field: key, Msg: "missing message list"}
		}
		if jsonscan.Kind(raw) != '[' {
			return nil, "", &ParseError{File: name, Field: key, Msg: "not a list"}
		}
		msgs, ok := jsonscan.Array(raw)
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
				if err := skipEntry(r.b, r.opts, pe); err != nil {
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
	path := jsonscan.Path(r.prefix, i)
	if jsonscan.Kind(raw) != '{' {
		return r.bad(path, "message is not a JSON object")
	}
	var m chatMsg
	jsonscan.Decode(raw, &m)
	role, ok := jsonscan.Text(m.Role)
	if !ok || jsonscan.Kind(m.Role) != '"' {
		return r.bad(jsonscan.Path(path, "role"), "missing or not a string")
	}
	text, paths, image, ok := contentParts(m.Content, jsonscan.Path(path, "content"))
	if !ok {
		return r.bad(jsonscan.Path(path, "content"), "content is neither a string nor a list of parts")
	}
	msgType, _ := jsonscan.Text(m.MessageType)
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
		fn, _ := jsonscan.Text(m.Name)
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
	return []string{jsonscan.Path(path, "content")}
}

var miniBashBlockRe = regexp.MustCompile("(?s)```(?:bash|mswea_bash_command)[ \\t\\r]*\\n(.*?)\\n```")

// assistant adds an assistant message: its tool_calls, else its deprecated
// function_call, else (mini-swe-agent and SWE-agent sessions) the command its text
// or action carries, which the next message's output answers.
func (r *chatReader) assistant(path string, m chatMsg, text string) error {
	r.pending = nil
	msg := &Message{Role: RoleAssistant, Text: text}
	calls, err := r.toolCalls(path, m)
	if err != nil {
		return err
	}
	msg.Calls = calls
	var fnCall *ToolCall
	if len(msg.Calls) == 0 && jsonscan.Kind(m.FunctionCall) == '{' {
		fn, _ := jsonscan.Loose(m.FunctionCall)
		name, ok := jsonscan.Text(fn["name"])
		if !ok {
			return r.bad(jsonscan.Path(path, "function_call", "name"), "missing or not a string")
		}
		fnCall = &ToolCall{Name: name, Args: argsJSON(fn["arguments"])}
		msg.Calls = append(msg.Calls, fnCall)
		r.nocache = true
	}
	var textCall *ToolCall
	multi := false
	if len(msg.Calls) == 0 {
		if textCall, multi = r.textCall(m, text); textCall != nil {
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

// toolCalls reads the message's tool_calls (path: the message's JSON path).
func (r *chatReader) toolCalls(path string, m chatMsg) ([]*ToolCall, error) {
	tcs, ok := jsonscan.Array(m.ToolCalls)
	if !ok {
		return nil, r.bad(jsonscan.Path(path, "tool_calls"), "not a list")
	}
	var calls []*ToolCall
	for k, tc := range tcs {
		tpath := jsonscan.Path(path, "tool_calls", k)
		obj, ok := jsonscan.Loose(tc)
		if !ok {
			return nil, r.bad(tpath, "tool call is not a JSON object")
		}
		fn, ok := jsonscan.Loose(obj["function"])
		if !ok {
			return nil, r.bad(jsonscan.Path(tpath, "function"), "missing or not an object")
		}
		name, ok := jsonscan.Text(fn["name"])
		if !ok {
			return nil, r.bad(jsonscan.Path(tpath, "function", "name"), "missing or not a string")
		}
		id, _ := jsonscan.Text(obj["id"])
		calls = append(calls, &ToolCall{ID: id, Name: name, Args: argsJSON(fn["arguments"])})
	}
	return calls, nil
}

// textCall is the command an assistant message of a mini-swe-agent session (its
// first bash block; multi when it has more) or of a SWE-agent session (its action)
// carries in text; nil for other sessions.
func (r *chatReader) textCall(m chatMsg, text string) (call *ToolCall, multi bool) {
	switch r.mode {
	case chatMini:
		if blocks := miniBashBlockRe.FindAllStringSubmatch(text, -1); len(blocks) > 0 {
			return &ToolCall{Name: "bash", Args: commandArgs(blocks[0][1])}, len(blocks) > 1
		}
	case chatSWE:
		if action, _ := jsonscan.Text(m.Action); strings.TrimSpace(action) != "" {
			return &ToolCall{Name: sweCommandName(action), Args: commandArgs(action)}, false
		}
	}
	return nil, false
}

func (r *chatReader) toolResult(path string, m chatMsg, text string, paths []string, image bool) error {
	r.pending = nil
	id, ok := jsonscan.Text(m.ToolCallID)
	if !ok {
		ids, isList := jsonscan.Array(m.ToolCallIDs)
		if !isList || len(ids) == 0 {
			return r.bad(jsonscan.Path(path, "tool_call_id"), "tool message names no call")
		}
		if id, ok = jsonscan.Text(ids[0]); !ok {
			return r.bad(jsonscan.Path(path, "tool_call_ids", 0), "not a string")
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
	obj, ok := jsonscan.Loose(extra)
	if !ok {
		return 0, false
	}
	return jsonscan.Int(obj["returncode"])
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
