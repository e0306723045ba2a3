package transcript

import (
	"encoding/json"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// OpenAI Responses API request bodies (POST /v1/responses, what Codex CLI sends; the
// proxy reads the live bodies with this reader):
//
//	{"model":…, "instructions": string, "input": string | [items], "tools":[…],
//	 "previous_response_id"?: string, "store", "stream", "prompt_cache_key", …}
//
// Items (the same response items a Codex rollout records, TRANSCRIPT-FORMATS.md §3):
//   - message{role: user|assistant|system|developer, content: string |
//     [input_text|output_text|input_image|input_file|refusal]}, and the short form
//     {role, content} without a type;
//   - function_call{call_id, name, arguments: JSON string, namespace?} →
//     function_call_output{call_id, output: string | [input_text|input_image|…]}; a
//     call into a namespace tool (Codex 0.171 lists each MCP server's tools as
//     {type: namespace, name: mcp__<server>, tools}) is named <namespace>__<name>;
//   - custom_tool_call{call_id, name, input} (Codex apply_patch) →
//     custom_tool_call_output{call_id, output};
//   - local_shell_call{call_id, action} → local_shell_call_output{call_id, output};
//   - compaction{encrypted_content} (the provider's compaction, inline or from
//     POST /v1/responses/compact): part of the model's turn, which it marks
//     (Message.Compaction);
//   - reasoning, web_search_call and every other item: part of the model's turn,
//     left byte for byte as they are.
//
// Steps: a run of items the model produced (assistant messages, reasoning, calls) is
// one assistant message, as in the rollout reader; the run ends at the next input
// item (a tool output, a user, developer or system message). instructions is a
// RoleSystem message; a string input is one user message. user messages holding
// Codex's injected context (<environment_context>, AGENTS.md instructions, …) are
// Meta. Output texts are located at input.N.output (a string) or its text parts
// (input.N.output.K.text); a string that is itself {"output", "metadata"} JSON is
// peeled as in the rollout reader, and a rewrite replaces the whole string. IsError
// comes from a "Process exited with code N" / "Exit code: N" header line or the
// peeled metadata's exit_code.
//
// A body with previous_response_id carries only the new items: the provider holds
// the history. It reads as it is; ResponsesContinuation reports it, and the proxy
// forwards such bodies untouched.

// detectResponses claims a JSON object with an input key (a list, or a string next
// to instructions) and neither messages nor contents: a Responses API request body.
func detectResponses(head []byte) bool {
	h := jsonscan.ScanHead(head)
	if h.Array || !h.Keys["input"] || h.Keys["messages"] || h.Keys["contents"] || h.Keys["payload"] || h.Keys["type"] {
		return false
	}
	switch jsonscan.Kind(h.Vals["input"]) {
	case '"':
		return h.Keys["model"] || h.Keys["instructions"]
	}
	items := h.Elems["input"]
	if len(items) == 0 {
		return h.Keys["model"] && (h.Keys["instructions"] || h.Keys["previous_response_id"])
	}
	for _, it := range items {
		obj, ok := jsonscan.Loose(it)
		if !ok {
			return false
		}
		typ, _ := jsonscan.Text(obj["type"])
		if typ == "" {
			if _, isRole := jsonscan.Text(obj["role"]); !isRole {
				return false
			}
		}
	}
	return true
}

// ResponsesContinuation reports whether a Responses API request body continues an
// earlier response by previous_response_id (a non-empty string at the top level):
// the provider holds the history, so the body is not the whole conversation. A body
// that is not a JSON object reports false.
func ResponsesContinuation(body []byte) bool {
	start := jsonscan.SkipSpace(body, 0)
	if start >= len(body) || body[start] != '{' {
		return false
	}
	members, _, ok := jsonscan.ScanObject(body, start)
	if !ok {
		return false
	}
	for _, m := range members {
		if m.Key == "previous_response_id" {
			s, isStr := jsonscan.Text(body[m.Value.Start:m.Value.End])
			return isStr && s != ""
		}
	}
	return false
}

// responsesReader walks the input items of one body into a builder.
type responsesReader struct {
	b   *builder
	cur *Message // the model turn being assembled
}

// readResponses reads one Responses API request body; the whole body is the single
// unit outputs point into. Errors are *ParseError naming the field; an item that is
// malformed is skipped in lenient mode.
func readResponses(name string, data []byte, opts Options) (*Session, error) {
	b, obj, err := loadRequestObject(FormatResponses, name, data, opts, "a Responses API")
	if err != nil {
		return nil, err
	}
	if raw := obj["instructions"]; jsonscan.Kind(raw) == '"' {
		if s, _ := jsonscan.Text(raw); s != "" {
			b.add(&Message{Role: RoleSystem, Text: s})
		}
	}
	input, present := obj["input"]
	switch jsonscan.Kind(input) {
	case '"':
		s, _ := jsonscan.Text(input)
		b.add(&Message{Role: RoleUser, Text: s})
		return b.finish()
	case '[':
	default:
		if !present {
			return nil, &ParseError{File: name, Field: "input", Msg: "missing"}
		}
		return nil, &ParseError{File: name, Field: "input", Msg: "neither a string nor a list of items"}
	}
	items, ok := jsonscan.Array(input)
	if !ok {
		return nil, &ParseError{File: name, Field: "input", Msg: "not a list"}
	}
	r := &responsesReader{b: b}
	for i, it := range items {
		if pe := r.item(name, i, it); pe != nil {
			if err := skipEntry(b, opts, pe); err != nil {
				return nil, err
			}
		}
	}
	r.flush()
	s, err := b.finish()
	if err != nil {
		return nil, err
	}
	s.Task = codexRequest(s.Task)
	return s, nil
}

// turn returns the model turn being assembled, starting one.
func (r *responsesReader) turn() *Message {
	if r.cur == nil {
		r.cur = &Message{Role: RoleAssistant}
	}
	return r.cur
}

// flush adds the model turn being assembled.
func (r *responsesReader) flush() {
	if r.cur != nil {
		r.b.add(r.cur)
		r.cur = nil
	}
}

// item reads input item i; it returns a *ParseError, having added nothing, when the
// item is malformed.
func (r *responsesReader) item(name string, i int, raw json.RawMessage) *ParseError {
	path := jsonscan.Path("input", i)
	bad := func(field, msg string) *ParseError {
		return &ParseError{File: name, Field: jsonscan.Path(path, field), Msg: msg}
	}
	it, ok := jsonscan.Loose(raw)
	if !ok || jsonscan.Kind(raw) != '{' {
		return bad("", "item is not a JSON object")
	}
	str := func(k string) string { s, _ := jsonscan.Text(it[k]); return s }
	typ := str("type")
	if typ == "" && it["role"] != nil {
		typ = "message"
	}
	switch typ {
	case "message":
		return r.message(it, bad)
	case "function_call", "custom_tool_call", "local_shell_call":
		return r.call(typ, it, bad)
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		return r.output(name, path, typ, it, bad)
	case "compaction":
		// The provider's encrypted compaction (inline, or from /v1/responses/compact):
		// part of the model's turn, kept byte for byte.
		r.turn().Compaction = true
	default:
		// reasoning, web_search_call, item_reference, …: the model's own items
		r.turn()
	}
	return nil
}

// call reads a function, custom-tool or local-shell call item into the current
// assistant turn.
func (r *responsesReader) call(typ string, it map[string]json.RawMessage, bad func(field, msg string) *ParseError) *ParseError {
	str := func(k string) string { s, _ := jsonscan.Text(it[k]); return s }
	var c *ToolCall
	switch typ {
	case "function_call":
		callName, ok := jsonscan.Text(it["name"])
		if !ok {
			return bad("name", "missing or not a string")
		}
		if ns := str("namespace"); ns != "" {
			// a function of a namespace tool (Codex lists an MCP server's tools as
			// {type: namespace, name: mcp__<server>}): named as Codex names MCP tools
			callName = ns + "__" + callName
		}
		c = &ToolCall{ID: str("call_id"), Name: callName, Args: argsJSON(it["arguments"])}
	case "custom_tool_call":
		callName, ok := jsonscan.Text(it["name"])
		if !ok {
			return bad("name", "missing or not a string")
		}
		args, _ := json.Marshal(str("input"))
		c = &ToolCall{ID: str("call_id"), Name: callName, Args: args}
	default: // local_shell_call
		if jsonscan.Kind(it["action"]) != '{' {
			return bad("action", "missing or not an object")
		}
		id := str("call_id")
		if id == "" {
			id = str("id")
		}
		c = &ToolCall{ID: id, Name: "local_shell", Args: argsJSON(it["action"])}
	}
	m := r.turn()
	m.Calls = append(m.Calls, c)
	return nil
}

// output reads a call's output item (at JSON path path of file name) as a tool
// message of its own.
func (r *responsesReader) output(name, path, typ string, it map[string]json.RawMessage, bad func(field, msg string) *ParseError) *ParseError {
	id, ok := jsonscan.Text(it["call_id"])
	if !ok && typ == "local_shell_call_output" {
		id, ok = jsonscan.Text(it["id"])
	}
	if !ok {
		return bad("call_id", "missing or not a string")
	}
	o, pe := codexOutput(it["output"], jsonscan.Path(path, "output"))
	if pe != nil {
		pe.File = name
		return pe
	}
	r.flush()
	o.CallID = id
	setLoc(o, 0, o.paths...)
	r.b.add(&Message{Role: RoleTool, Outputs: []*ToolOutput{o}})
	return nil
}

// message reads a message item.
func (r *responsesReader) message(it map[string]json.RawMessage, bad func(field, msg string) *ParseError) *ParseError {
	text, _, _, ok := contentParts(it["content"], "")
	if !ok {
		return bad("content", "neither a string nor a list of parts")
	}
	role, isStr := jsonscan.Text(it["role"])
	if !isStr {
		return bad("role", "missing or not a string")
	}
	switch role {
	case "assistant":
		m := r.turn()
		if m.Text != "" && text != "" {
			m.Text += "\n"
		}
		m.Text += text
	case "user":
		r.flush()
		meta := codexUserMeta(r.b.s, text)
		r.b.add(&Message{Role: RoleUser, Text: text, Meta: meta})
	case "developer", "system":
		r.flush()
		r.b.add(&Message{Role: RoleSystem, Text: text, Meta: true})
	default:
		return bad("role", "unknown message role "+jsonQuote(role))
	}
	return nil
}

// jsonQuote quotes s as a JSON string.
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
