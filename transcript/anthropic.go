package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// Anthropic Messages API request bodies (TRANSCRIPT-FORMATS.md; the proxy reads the
// live bodies of POST /v1/messages with this reader):
//
//	{"model":…, "max_tokens":…, "system": string | [text blocks],
//	 "messages":[{"role":"user"|"assistant", "content": string | [blocks]}], "tools":[…], …}
//
// Blocks: text{text}, thinking{thinking,signature}, redacted_thinking, image, document,
// tool_use{id,name,input}, tool_result{tool_use_id, content: string | [text|image|document],
// is_error, cache_control}, server_tool_use, web_search_tool_result, compaction (a
// provider's compaction, which marks its message: Message.Compaction) and others. Only
// text, tool_use and tool_result enter the model; every other block is skipped and,
// because Rewrite patches values in place, left byte for byte as it was.

// fieldErr is a *jsonscan.FieldError at JSON path field.
func fieldErr(field, msg string) *jsonscan.FieldError {
	return &jsonscan.FieldError{Field: field, Msg: msg}
}

// apiBlock is one decoded content block of the Messages API shape, which Anthropic
// request bodies and Claude Code lines share.
type apiBlock struct {
	index int    // position in the content array; -1 when the content was a plain string
	typ   string // block type ("text" for plain-string content)

	text string // text blocks

	id, name string          // tool_use
	input    json.RawMessage // tool_use arguments, "{}" when absent

	callID  string    // tool_result: the tool_use id it answers
	isError bool      // tool_result: is_error
	result  apiResult // tool_result: its text pieces
}

// apiResult is the text of a tool result and where each piece sits.
type apiResult struct {
	text     string   // non-empty pieces joined with "\n"
	paths    []string // sjson paths of every text piece, relative to the unit
	hasImage bool     // the result also held image blocks
}

// apiDecodeContent decodes a content value found at JSON path base: a string (one
// text block) or an array of blocks. Unknown block types are kept with only their type.
// It returns a *jsonscan.FieldError naming the offending field.
func apiDecodeContent(raw json.RawMessage, base string) ([]apiBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		s, ok := jsonscan.String(raw)
		if !ok {
			return nil, fieldErr(base, "invalid string")
		}
		return []apiBlock{{index: -1, typ: "text", text: s}}, nil
	case '[':
	default:
		return nil, fieldErr(base, "content must be a string or an array of blocks")
	}
	elems, ok := jsonscan.Array(raw)
	if !ok {
		return nil, fieldErr(base, "invalid content array")
	}
	out := make([]apiBlock, 0, len(elems))
	for j, el := range elems {
		p := base + "." + strconv.Itoa(j)
		blk, err := apiDecodeBlock(el, p)
		if err != nil {
			return nil, err
		}
		blk.index = j
		out = append(out, blk)
	}
	return out, nil
}

// apiDecodeBlock decodes one content block at JSON path p.
func apiDecodeBlock(el json.RawMessage, p string) (apiBlock, error) {
	obj, problem := jsonscan.Object(el)
	if problem != "" {
		return apiBlock{}, fieldErr(p, problem)
	}
	typ, _ := jsonscan.String(obj["type"])
	if typ == "" {
		return apiBlock{}, fieldErr(p+".type", "content block has no type")
	}
	blk := apiBlock{typ: typ}
	switch typ {
	case "text":
		if err := jsonscan.Field(obj, "text", p, &blk.text); err != nil {
			return apiBlock{}, err
		}
	case "thinking":
		// The thinking text, when the block carries it in the clear (a block with only
		// a signature, or a malformed one, gives ""): evidence reads it as the
		// agent's own words; the block itself is never changed.
		blk.text, _ = jsonscan.String(obj["thinking"])
	case "tool_use":
		if err := jsonscan.Fields(obj, p, jsonscan.F{Key: "id", Dst: &blk.id}, jsonscan.F{Key: "name", Dst: &blk.name}); err != nil {
			return apiBlock{}, err
		}
		if blk.id == "" {
			return apiBlock{}, fieldErr(p+".id", "tool_use block without an id")
		}
		// A copy: the message cache keeps calls long after the body they came in.
		blk.input = bytes.Clone(obj["input"])
		if len(bytes.TrimSpace(blk.input)) == 0 {
			blk.input = json.RawMessage("{}")
		}
	case "tool_result":
		if err := jsonscan.Fields(obj, p, jsonscan.F{Key: "tool_use_id", Dst: &blk.callID}, jsonscan.F{Key: "is_error", Dst: &blk.isError}); err != nil {
			return apiBlock{}, err
		}
		if blk.callID == "" {
			return apiBlock{}, fieldErr(p+".tool_use_id", "tool_result block without a tool_use_id")
		}
		res, err := apiDecodeResult(obj["content"], p+".content")
		if err != nil {
			return apiBlock{}, err
		}
		blk.result = res
	}
	return blk, nil
}

// apiDecodeResult decodes a tool result's content (string | [text|image|…]) at
// JSON path p. Image blocks set hasImage; other non-text blocks are left alone.
func apiDecodeResult(raw json.RawMessage, p string) (apiResult, error) {
	raw = bytes.TrimSpace(raw)
	var res apiResult
	if len(raw) == 0 || string(raw) == "null" {
		return res, nil
	}
	switch raw[0] {
	case '"':
		var ok bool
		if res.text, ok = jsonscan.String(raw); !ok {
			return res, fieldErr(p, "invalid string")
		}
		res.paths = []string{p}
		return res, nil
	case '[':
	default:
		return res, fieldErr(p, "tool result content must be a string or an array of blocks")
	}
	elems, ok := jsonscan.Array(raw)
	if !ok {
		return res, fieldErr(p, "invalid content array")
	}
	var pieces []string
	for j, el := range elems {
		q := p + "." + strconv.Itoa(j)
		obj, problem := jsonscan.Object(el)
		if problem != "" {
			return res, fieldErr(q, problem)
		}
		typ, _ := jsonscan.String(obj["type"])
		switch typ {
		case "text":
			var s string
			if err := jsonscan.Field(obj, "text", q, &s); err != nil {
				return res, err
			}
			pieces = append(pieces, s)
			if _, present := obj["text"]; present {
				res.paths = append(res.paths, q+".text")
			}
		case "image":
			res.hasImage = true
		}
	}
	res.text = joinText(pieces)
	return res, nil
}

// joinText joins the non-empty pieces with "\n". Empty pieces are skipped so that a
// rewritten result (stub in the first piece, the others emptied) reads back as the stub.
func joinText(pieces []string) string {
	n := 0
	for _, p := range pieces {
		if p != "" {
			pieces[n] = p
			n++
		}
	}
	return strings.Join(pieces[:n], "\n")
}

// apiWrapperText reports whether a user text is injected context or a command wrapper
// rather than something the user typed as a prompt: Claude Code's slash-command and
// local-command wrappers, system reminders, background task notifications, shell-mode
// input/output, and the "[Request interrupted by user…]" markers.
func apiWrapperText(s string) bool {
	s = strings.TrimSpace(s)
	for _, p := range apiWrapperPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

var apiWrapperPrefixes = []string{
	"<command-name>", "<command-message>", "<command-args>",
	"<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
	"<system-reminder>", "<task-notification>", "<user-prompt-submit-hook>",
	"<bash-input>", "<bash-stdout>", "<bash-stderr>",
	"[Request interrupted by user",
}

// readAnthropic reads one Messages API request body. The whole object is the single
// unit outputs point into; Line is 0 for every message except in errors, where a JSON
// syntax error is located by line. It tries readAnthropicBody first (body.go: one
// scan, per-message decoding, Options.Cache) and reads the body again here, message
// by message with every check, when that path declines.
func readAnthropic(name string, data []byte, opts Options) (*Session, error) {
	if s, ok := readAnthropicBody(name, data, opts); ok {
		return s, nil
	}
	return readAnthropicFull(name, data, opts)
}

// readAnthropicFull is readAnthropic without the fast path.
func readAnthropicFull(name string, data []byte, opts Options) (*Session, error) {
	b := newBuilder(FormatAnthropic, name, data)
	req, start, end, err := readBodyObject(name, data)
	if err != nil {
		return nil, err
	}
	unit := b.addUnit(start, end)
	fail := func(fe *jsonscan.FieldError) error {
		pe := &ParseError{File: name, Field: fe.Field, Msg: fe.Msg}
		if !opts.Lenient {
			return pe
		}
		b.s.Skipped++
		b.warn("skipped %s: %s", fe.Field, fe.Msg)
		return nil
	}
	if sys := req["system"]; !jsonscan.Null(sys) {
		blocks, err := apiDecodeContent(sys, "system")
		if err != nil {
			if e := fail(jsonscan.AsFieldError(err, "system")); e != nil {
				return nil, e
			}
		} else if t := systemText(blocks); t != "" {
			b.add(&Message{Role: RoleSystem, Text: t})
		}
	}
	msgs := req["messages"]
	if jsonscan.Null(msgs) {
		return nil, &ParseError{File: name, Field: "messages", Msg: "request body has no messages array"}
	}
	elems, ok := jsonscan.Array(msgs)
	if !ok {
		return nil, &ParseError{File: name, Field: "messages", Msg: "messages must be an array of message objects"}
	}
	for i, el := range elems {
		msg, prompt, fe := apiMessage(el, "messages."+strconv.Itoa(i), unit)
		if fe != nil {
			if e := fail(fe); e != nil {
				return nil, e
			}
			continue
		}
		if msg.Role != RoleAssistant && b.s.Task == "" {
			b.s.Task = prompt
		}
		b.add(msg)
	}
	return b.finish()
}

// readBodyObject reads data as one request body, a JSON object with nothing but
// blanks around it: its top-level values and the object's byte span [start, end).
// Errors: ErrEmpty for blank data, a ParseError with the line otherwise.
func readBodyObject(name string, data []byte) (map[string]json.RawMessage, int, int, error) {
	start := jsonscan.SkipBlank(data, 0)
	if start == len(data) {
		return nil, 0, 0, fmt.Errorf("%s: %w: the file holds no data", name, ErrEmpty)
	}
	dec := json.NewDecoder(bytes.NewReader(data[start:]))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		line := jsonscan.Line(data, len(data))
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line = jsonscan.Line(data, start+int(se.Offset))
		}
		return nil, 0, 0, &ParseError{File: name, Line: line, Msg: jsonscan.Problem(err) + " (request body)"}
	}
	end := start + int(dec.InputOffset())
	if rest := jsonscan.SkipBlank(data, end); rest != len(data) {
		return nil, 0, 0, &ParseError{File: name, Line: jsonscan.Line(data, rest), Msg: "data after the request body: a body is one JSON object"}
	}
	req, problem := jsonscan.Object(raw)
	if problem != "" {
		return nil, 0, 0, &ParseError{File: name, Line: jsonscan.Line(data, start), Msg: problem}
	}
	return req, start, end, nil
}

// systemText is the text of an Anthropic system value: its text blocks joined
// (joinText).
func systemText(blocks []apiBlock) string {
	var texts []string
	for _, blk := range blocks {
		if blk.typ == "text" {
			texts = append(texts, blk.text)
		}
	}
	return joinText(texts)
}

// apiMessage decodes one element of a request body's messages array (el, at JSON
// path p) into a message not yet added to a builder, whose tool results are located
// in unit u, and returns with it the first real prompt of a user message ("" for an
// assistant message). The error names the offending field.
func apiMessage(el json.RawMessage, p string, u int) (*Message, string, *jsonscan.FieldError) {
	m, problem := jsonscan.Object(el)
	if problem != "" {
		return nil, "", fieldErr(p, problem)
	}
	role, _ := jsonscan.String(m["role"])
	if role != "user" && role != "assistant" {
		return nil, "", fieldErr(p+".role", fmt.Sprintf("role %q is neither user nor assistant", role))
	}
	blocks, err := apiDecodeContent(m["content"], p+".content")
	if err != nil {
		return nil, "", jsonscan.AsFieldError(err, p+".content")
	}
	if role == "assistant" {
		return apiAssistant(blocks, 0), "", nil
	}
	return apiUser(blocks, u), apiFirstPrompt(blocks), nil
}

// apiAssistant builds an assistant message from its blocks: text blocks make
// the Text, tool_use blocks the calls, a compaction block sets Compaction;
// thinking, server-tool and unknown blocks are skipped. A tool_use id repeated inside the same message is dropped (the builder
// warns about ids repeated across messages).
func apiAssistant(blocks []apiBlock, line int) *Message {
	m := &Message{Role: RoleAssistant, Line: line}
	var texts, thinking []string
	seen := map[string]bool{}
	for _, blk := range blocks {
		switch blk.typ {
		case "text":
			texts = append(texts, blk.text)
		case "thinking":
			if blk.text != "" {
				thinking = append(thinking, blk.text)
			}
		case "compaction":
			m.Compaction = true
		case "tool_use":
			if seen[blk.id] {
				continue
			}
			seen[blk.id] = true
			m.Calls = append(m.Calls, &ToolCall{ID: blk.id, Name: blk.name, Args: blk.input})
		}
	}
	m.Text = joinText(texts)
	m.Thinking = strings.Join(thinking, "\n")
	return m
}

// apiUser builds a user-side message: RoleTool when every block is a
// tool_result, RoleUser otherwise (text, images, and results mixed with text). Each
// result becomes an output located in unit u (u < 0: not rewritable). Meta is set when
// the text is only wrappers (system reminders, command wrappers).
func apiUser(blocks []apiBlock, u int) *Message {
	m := &Message{Role: RoleUser}
	var texts []string
	results := 0
	for _, blk := range blocks {
		switch blk.typ {
		case "text":
			texts = append(texts, blk.text)
		case "tool_result":
			results++
			o := &ToolOutput{
				CallID:   blk.callID,
				Text:     blk.result.text,
				IsError:  blk.isError,
				Block:    max(blk.index, 0),
				HasImage: blk.result.hasImage,
			}
			if u >= 0 && len(blk.result.paths) > 0 {
				setLoc(o, u, blk.result.paths...)
			}
			m.Outputs = append(m.Outputs, o)
		}
	}
	if results > 0 && results == len(blocks) {
		m.Role = RoleTool
	}
	m.Text = joinText(texts)
	if len(texts) > 0 {
		meta := true
		for _, t := range texts {
			if strings.TrimSpace(t) != "" && !apiWrapperText(t) {
				meta = false
			}
		}
		m.Meta = meta && m.Text != ""
	}
	return m
}

// apiFirstPrompt returns the first text block that is a real prompt (not a wrapper),
// or "".
func apiFirstPrompt(blocks []apiBlock) string {
	for _, blk := range blocks {
		if blk.typ == "text" && strings.TrimSpace(blk.text) != "" && !apiWrapperText(blk.text) {
			return blk.text
		}
	}
	return ""
}

// detectAnthropic recognises a Messages API request body: one JSON object with a
// messages array whose roles are only user/assistant, with at least one sign that only
// the Anthropic API has (a top-level system, stop_sequences, top_k, anthropic_version,
// anthropic_beta or thinking key; tools carrying input_schema; or a tool_use,
// tool_result, thinking, redacted_thinking, server_tool_use, document or
// source-carrying image block) and none that only OpenAI chat bodies have (roles
// system/developer/tool/function, tool_calls, tool_call_id, function_call, image_url or
// input_audio parts, function tools, max_completion_tokens, response_format…). A body
// with neither kind of sign (plain text chat) is left to the OpenAI reader. The head may
// be cut short: the decision is made on what was seen.
func detectAnthropic(head []byte) bool {
	if len(head) == 0 || head[0] != '{' {
		return false
	}
	h := jsonscan.ScanHead(head)
	var sg bodySigns
	complete := sg.weigh(&h)
	if sg.openai || !sg.sawMessages && complete {
		return false
	}
	if complete {
		// One object and nothing else: a JSONL file is not a request body.
		if rest := jsonscan.SkipBlank(head, h.End); rest != len(head) {
			return false
		}
	}
	return sg.anthropic && (sg.messages > 0 || !complete)
}

// bodySigns are the signs detectAnthropic weighs.
type bodySigns struct {
	sawMessages bool
	messages    int
	anthropic   bool
	openai      bool
}

// weigh goes through the top-level keys of h in order, noting their signs, up to the
// first value it cannot judge (cut, broken, or a messages or tools value of the
// wrong shape); it reports whether it judged the whole object.
func (sg *bodySigns) weigh(h *jsonscan.Head) bool {
	for _, key := range h.Order {
		switch key {
		case "messages":
			sg.sawMessages = true
			if _, scalar := h.Vals[key]; scalar {
				sg.openai = true // not an array
				return false
			}
			if !sg.weighMessages(h.Elems[key]) || h.Cut == key {
				return false
			}
			continue
		case "tools":
			if h.Cut == key || !sg.weighTools(h.Vals[key], h.Elems[key]) {
				return false
			}
			continue
		case "system", "stop_sequences", "top_k", "anthropic_version", "anthropic_beta", "thinking":
			sg.anthropic = true
		case "max_completion_tokens", "response_format", "functions", "function_call", "logprobs",
			"top_logprobs", "frequency_penalty", "presence_penalty", "n", "seed", "stream_options",
			"modalities", "reasoning_effort", "parallel_tool_calls", "logit_bias", "prediction", "audio":
			sg.openai = true
		}
		if h.Cut == key {
			return false
		}
	}
	return h.Complete
}

// weighTools notes the signs of the tools value (null, or the elements of an array);
// false when it is not a list of objects.
func (sg *bodySigns) weighTools(val json.RawMessage, elems []json.RawMessage) bool {
	if val != nil {
		return jsonscan.Null(val)
	}
	for _, el := range elems {
		if jsonscan.Null(el) {
			continue
		}
		t, ok := jsonscan.Loose(el)
		if !ok {
			return false
		}
		if _, ok := t["input_schema"]; ok {
			sg.anthropic = true
		}
		if _, ok := t["function"]; ok {
			sg.openai = true
		}
	}
	return true
}

// weighMessages notes the signs of the messages read in full; false at the first
// element that is not an object.
func (sg *bodySigns) weighMessages(elems []json.RawMessage) bool {
	for _, el := range elems {
		m, ok := jsonscan.Loose(el)
		if !ok && !jsonscan.Null(el) {
			return false
		}
		sg.messages++
		switch role, _ := jsonscan.String(m["role"]); role {
		case "user", "assistant":
		default:
			sg.openai = true
		}
		for _, k := range []string{"tool_calls", "tool_call_id", "function_call", "name", "refusal", "audio"} {
			if _, ok := m[k]; ok {
				sg.openai = true
			}
		}
		sg.weighBlocks(m["content"])
	}
	return true
}

// weighBlocks notes the signs of a message's content blocks, when its content is a
// list of objects.
func (sg *bodySigns) weighBlocks(content json.RawMessage) {
	if jsonscan.Kind(content) != '[' {
		return
	}
	elems, _ := jsonscan.Array(content)
	blocks := make([]map[string]json.RawMessage, 0, len(elems))
	for _, el := range elems {
		blk, ok := jsonscan.Loose(el)
		if !ok && !jsonscan.Null(el) {
			return
		}
		blocks = append(blocks, blk)
	}
	for _, blk := range blocks {
		typ, _ := jsonscan.String(blk["type"])
		switch typ {
		case "tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
			"web_search_tool_result", "document", "search_result", "mcp_tool_use", "mcp_tool_result":
			sg.anthropic = true
		case "image":
			if _, ok := blk["source"]; ok {
				sg.anthropic = true
			}
		case "image_url", "input_audio", "file", "refusal", "input_text", "output_text":
			sg.openai = true
		}
	}
}
