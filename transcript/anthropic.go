package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Anthropic Messages API request bodies (TRANSCRIPT-FORMATS.md; the proxy reads the
// live bodies of POST /v1/messages with this reader):
//
//	{"model":…, "max_tokens":…, "system": string | [text blocks],
//	 "messages":[{"role":"user"|"assistant", "content": string | [blocks]}], "tools":[…], …}
//
// Blocks: text{text}, thinking{thinking,signature}, redacted_thinking, image, document,
// tool_use{id,name,input}, tool_result{tool_use_id, content: string | [text|image|document],
// is_error, cache_control}, server_tool_use, web_search_tool_result and others. Only text,
// tool_use and tool_result enter the model; every other block is skipped and, because
// Rewrite patches values in place, left byte for byte as it was.

func init() {
	register(reader{format: FormatAnthropic, detect: detectAnthropic, read: readAnthropic})
}

// apiFieldError is a decoding problem at a JSON path; readers turn it into a *ParseError
// carrying their file name and line.
type apiFieldError struct {
	field string
	msg   string
}

func (e *apiFieldError) Error() string { return e.field + ": " + e.msg }

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
// It returns a *apiFieldError naming the offending field.
func apiDecodeContent(raw json.RawMessage, base string) ([]apiBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, &apiFieldError{base, "invalid string: " + err.Error()}
		}
		return []apiBlock{{index: -1, typ: "text", text: s}}, nil
	case '[':
	default:
		return nil, &apiFieldError{base, "content must be a string or an array of blocks"}
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, &apiFieldError{base, "invalid content array: " + err.Error()}
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
	obj, problem := apiObject(el)
	if problem != "" {
		return apiBlock{}, &apiFieldError{p, problem}
	}
	typ, _ := apiString(obj["type"])
	if typ == "" {
		return apiBlock{}, &apiFieldError{p + ".type", "content block has no type"}
	}
	blk := apiBlock{typ: typ}
	switch typ {
	case "text":
		if err := apiField(obj, "text", p, &blk.text); err != nil {
			return apiBlock{}, err
		}
	case "tool_use":
		if err := apiFields(obj, p, apiF{"id", &blk.id}, apiF{"name", &blk.name}); err != nil {
			return apiBlock{}, err
		}
		if blk.id == "" {
			return apiBlock{}, &apiFieldError{p + ".id", "tool_use block without an id"}
		}
		blk.input = obj["input"]
		if len(bytes.TrimSpace(blk.input)) == 0 {
			blk.input = json.RawMessage("{}")
		}
	case "tool_result":
		if err := apiFields(obj, p, apiF{"tool_use_id", &blk.callID}, apiF{"is_error", &blk.isError}); err != nil {
			return apiBlock{}, err
		}
		if blk.callID == "" {
			return apiBlock{}, &apiFieldError{p + ".tool_use_id", "tool_result block without a tool_use_id"}
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
		if err := json.Unmarshal(raw, &res.text); err != nil {
			return res, &apiFieldError{p, "invalid string: " + err.Error()}
		}
		res.paths = []string{p}
		return res, nil
	case '[':
	default:
		return res, &apiFieldError{p, "tool result content must be a string or an array of blocks"}
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return res, &apiFieldError{p, "invalid content array: " + err.Error()}
	}
	var pieces []string
	for j, el := range elems {
		q := p + "." + strconv.Itoa(j)
		obj, problem := apiObject(el)
		if problem != "" {
			return res, &apiFieldError{q, problem}
		}
		typ, _ := apiString(obj["type"])
		switch typ {
		case "text":
			var s string
			if err := apiField(obj, "text", q, &s); err != nil {
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
	res.text = apiJoin(pieces)
	return res, nil
}

// apiObject decodes raw as a JSON object with its keys exactly as written.
// encoding/json matches struct fields case-insensitively ("Content" fills Content),
// while the API, JSON.parse and the gjson/sjson paths Rewrite uses do not; reading
// through maps keeps the reader and Rewrite looking at the same values. For the same
// reason an object with a repeated key is refused: the map keeps the last value, gjson
// finds the first. problem is "" on success, else what was wrong (invalid or truncated
// JSON, another JSON type, a repeated key).
func apiObject(raw []byte) (obj map[string]json.RawMessage, problem string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] != '{' && json.Valid(raw) {
		return nil, "expected a JSON object, found a JSON " + apiKind(raw)
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, apiJSONProblem(err)
	}
	if obj == nil {
		return nil, "expected a JSON object, found a JSON null"
	}
	if apiCountKeys(raw) != len(obj) {
		return nil, "a key occurs twice in the object"
	}
	return obj, ""
}

// apiCountKeys counts the keys at the top level of the valid JSON object raw, as
// written (two spellings of one key count twice).
func apiCountKeys(raw []byte) int {
	depth, n := 0, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			j := i + 1
			for j < len(raw) && raw[j] != '"' {
				if raw[j] == '\\' {
					j++
				}
				j++
			}
			if depth == 1 {
				k := j + 1
				for k < len(raw) && apiBlank(raw[k]) {
					k++
				}
				if k < len(raw) && raw[k] == ':' {
					n++
				}
			}
			i = j
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	return n
}

func apiBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// apiF names one field for apiFields: its key and where to decode it.
type apiF struct {
	key string
	dst any // *string, *bool, *float64 or *json.RawMessage
}

// apiFields decodes each named field of obj (at JSON path base) with apiField.
func apiFields(obj map[string]json.RawMessage, base string, fields ...apiF) error {
	for _, f := range fields {
		if err := apiField(obj, f.key, base, f.dst); err != nil {
			return err
		}
	}
	return nil
}

// apiField decodes obj[key] into dst when the key is present and not null; a value
// of the wrong JSON type is an *apiFieldError naming base.key.
func apiField(obj map[string]json.RawMessage, key, base string, dst any) error {
	raw, ok := obj[key]
	if !ok || apiNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		want := "a valid value"
		switch dst.(type) {
		case *string:
			want = "a string"
		case *bool:
			want = "a boolean"
		case *float64:
			want = "a number"
		}
		path := key
		if base != "" {
			path = base + "." + key
		}
		return &apiFieldError{path, fmt.Sprintf("expected %s, found JSON %s", want, apiKind(raw))}
	}
	return nil
}

// apiNull reports whether raw is absent or the JSON null.
func apiNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// apiKind names the JSON type of raw.
func apiKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// apiJoin joins the non-empty pieces with "\n". Empty pieces are skipped so that a
// rewritten result (stub in the first piece, the others emptied) reads back as the stub.
func apiJoin(pieces []string) string {
	n := 0
	for _, p := range pieces {
		if p != "" {
			pieces[n] = p
			n++
		}
	}
	return strings.Join(pieces[:n], "\n")
}

// apiString returns the Go string of a JSON string value and true; false for any
// other value (absent, null, number, object…).
func apiString(r json.RawMessage) (string, bool) {
	r = bytes.TrimSpace(r)
	if len(r) == 0 || r[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(r, &s) != nil {
		return "", false
	}
	return s, true
}

// apiJSONProblem describes why a whole line or document failed to decode as an object.
func apiJSONProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "expected a JSON object, found a JSON " + te.Value
		}
		return fmt.Sprintf("field %s: expected %s, found JSON %s", te.Field, te.Type, te.Value)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON input") {
		return "invalid JSON: unexpected end of input (truncated?)"
	}
	return "invalid JSON: " + err.Error()
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
	start := apiSkipSpace(data, 0)
	if start == len(data) {
		return nil, fmt.Errorf("%s: %w: the file holds no data", name, ErrEmpty)
	}
	dec := json.NewDecoder(bytes.NewReader(data[start:]))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		line := 0
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line = apiLineAt(data, start+int(se.Offset))
		} else {
			line = apiLineAt(data, len(data))
		}
		return nil, &ParseError{File: name, Line: line, Msg: apiJSONProblem(err) + " (request body)"}
	}
	end := start + int(dec.InputOffset())
	if rest := apiSkipSpace(data, end); rest != len(data) {
		return nil, &ParseError{File: name, Line: apiLineAt(data, rest), Msg: "data after the request body: a body is one JSON object"}
	}
	req, problem := apiObject(raw)
	if problem != "" {
		return nil, &ParseError{File: name, Line: apiLineAt(data, start), Msg: problem}
	}
	unit := b.addUnit(start, end)

	fail := func(fe *apiFieldError) error {
		pe := &ParseError{File: name, Field: fe.field, Msg: fe.msg}
		if !opts.Lenient {
			return pe
		}
		b.s.Skipped++
		b.warn("skipped %s: %s", fe.field, fe.msg)
		return nil
	}

	if sys := req["system"]; !apiNull(sys) {
		blocks, err := apiDecodeContent(sys, "system")
		if err != nil {
			if e := fail(apiAsFieldError(err, "system")); e != nil {
				return nil, e
			}
		} else {
			var texts []string
			for _, blk := range blocks {
				if blk.typ == "text" {
					texts = append(texts, blk.text)
				}
			}
			if t := apiJoin(texts); t != "" {
				b.add(&Message{Role: RoleSystem, Text: t})
			}
		}
	}

	msgs := req["messages"]
	if apiNull(msgs) {
		return nil, &ParseError{File: name, Field: "messages", Msg: "request body has no messages array"}
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(msgs, &elems); err != nil {
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

// apiMessage decodes one element of a request body's messages array (el, at JSON
// path p) into a message not yet added to a builder, whose tool results are located
// in unit u, and returns with it the first real prompt of a user message ("" for an
// assistant message). The error names the offending field.
func apiMessage(el json.RawMessage, p string, u int) (*Message, string, *apiFieldError) {
	m, problem := apiObject(el)
	if problem != "" {
		return nil, "", &apiFieldError{p, problem}
	}
	role, _ := apiString(m["role"])
	if role != "user" && role != "assistant" {
		return nil, "", &apiFieldError{p + ".role", fmt.Sprintf("role %q is neither user nor assistant", role)}
	}
	blocks, err := apiDecodeContent(m["content"], p+".content")
	if err != nil {
		return nil, "", apiAsFieldError(err, p+".content")
	}
	if role == "assistant" {
		return apiAssistant(blocks, 0), "", nil
	}
	return apiUser(blocks, u), apiFirstPrompt(blocks), nil
}

// apiAsFieldError returns err as a *apiFieldError, wrapping other errors at path p.
func apiAsFieldError(err error, p string) *apiFieldError {
	var fe *apiFieldError
	if errors.As(err, &fe) {
		return fe
	}
	return &apiFieldError{p, err.Error()}
}

// apiAssistant builds an assistant message from its blocks: text blocks make
// the Text, tool_use blocks the calls; thinking, server-tool and unknown blocks are
// skipped. A tool_use id repeated inside the same message is dropped (the builder
// warns about ids repeated across messages).
func apiAssistant(blocks []apiBlock, line int) *Message {
	m := &Message{Role: RoleAssistant, Line: line}
	var texts []string
	seen := map[string]bool{}
	for _, blk := range blocks {
		switch blk.typ {
		case "text":
			texts = append(texts, blk.text)
		case "tool_use":
			if seen[blk.id] {
				continue
			}
			seen[blk.id] = true
			m.Calls = append(m.Calls, &ToolCall{ID: blk.id, Name: blk.name, Args: blk.input})
		}
	}
	m.Text = apiJoin(texts)
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
	m.Text = apiJoin(texts)
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

// apiSkipSpace returns the first index at or after i that is not JSON whitespace or a
// UTF-8 byte order mark.
func apiSkipSpace(data []byte, i int) int {
	for i < len(data) {
		switch {
		case data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n':
			i++
		case bytes.HasPrefix(data[i:], []byte("\xef\xbb\xbf")):
			i += 3
		default:
			return i
		}
	}
	return i
}

// apiLineAt returns the 1-based line of byte offset off in data.
func apiLineAt(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	return bytes.Count(data[:off], []byte("\n")) + 1
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
	sc := &apiBodyScan{dec: json.NewDecoder(bytes.NewReader(head))}
	sc.dec.UseNumber()
	complete := sc.scan()
	if sc.openai || !sc.sawMessages && complete {
		return false
	}
	if complete {
		// One object and nothing else: a JSONL file is not a request body.
		if rest := apiSkipSpace(head, int(sc.dec.InputOffset())); rest != len(head) {
			return false
		}
	}
	return sc.anthropic && (sc.messages > 0 || !complete)
}

// apiBodyScan walks the top level of a request body with a token decoder, noting the
// signs detectAnthropic weighs.
type apiBodyScan struct {
	dec         *json.Decoder
	sawMessages bool
	messages    int
	anthropic   bool
	openai      bool
}

// scan reports whether the whole object was read (false when the head ended early or
// the JSON broke).
func (sc *apiBodyScan) scan() bool {
	if t, err := sc.dec.Token(); err != nil || t != json.Delim('{') {
		sc.openai = true // not an object at all: reject
		return true
	}
	for sc.dec.More() {
		kt, err := sc.dec.Token()
		if err != nil {
			return false
		}
		key, _ := kt.(string)
		switch key {
		case "messages":
			sc.sawMessages = true
			if !sc.scanMessages() {
				return false
			}
			continue
		case "tools":
			var tools []map[string]json.RawMessage
			if err := sc.dec.Decode(&tools); err != nil {
				return false
			}
			for _, t := range tools {
				if _, ok := t["input_schema"]; ok {
					sc.anthropic = true
				}
				if _, ok := t["function"]; ok {
					sc.openai = true
				}
			}
			continue
		case "system", "stop_sequences", "top_k", "anthropic_version", "anthropic_beta", "thinking":
			sc.anthropic = true
		case "max_completion_tokens", "response_format", "functions", "function_call", "logprobs",
			"top_logprobs", "frequency_penalty", "presence_penalty", "n", "seed", "stream_options",
			"modalities", "reasoning_effort", "parallel_tool_calls", "logit_bias", "prediction", "audio":
			sc.openai = true
		}
		if !apiSkipValue(sc.dec) {
			return false
		}
	}
	_, err := sc.dec.Token() // the closing brace
	return err == nil
}

// scanMessages walks the messages array; false when the head ended inside it.
func (sc *apiBodyScan) scanMessages() bool {
	t, err := sc.dec.Token()
	if err != nil {
		return false
	}
	if t != json.Delim('[') {
		sc.openai = true
		return false
	}
	for sc.dec.More() {
		var m map[string]json.RawMessage
		if err := sc.dec.Decode(&m); err != nil {
			return false
		}
		sc.messages++
		role, _ := apiString(m["role"])
		switch role {
		case "user", "assistant":
		default:
			sc.openai = true
		}
		for _, k := range []string{"tool_calls", "tool_call_id", "function_call", "name", "refusal", "audio"} {
			if _, ok := m[k]; ok {
				sc.openai = true
			}
		}
		c := bytes.TrimSpace(m["content"])
		if len(c) == 0 || c[0] != '[' {
			continue
		}
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(c, &blocks) != nil {
			continue
		}
		for _, blk := range blocks {
			typ, _ := apiString(blk["type"])
			switch typ {
			case "tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
				"web_search_tool_result", "document", "search_result", "mcp_tool_use", "mcp_tool_result":
				sc.anthropic = true
			case "image":
				if _, ok := blk["source"]; ok {
					sc.anthropic = true
				}
			case "image_url", "input_audio", "file", "refusal", "input_text", "output_text":
				sc.openai = true
			}
		}
	}
	_, err = sc.dec.Token() // the closing bracket
	return err == nil
}

// apiSkipValue consumes one JSON value from dec; false when the input ends or breaks.
func apiSkipValue(dec *json.Decoder) bool {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
		if depth == 0 {
			return true
		}
	}
}
