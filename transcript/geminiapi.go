package transcript

import (
	"encoding/json"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// Gemini API request bodies (POST /v1beta/models/{model}:generateContent and
// :streamGenerateContent, what Gemini CLI sends with an API key; the proxy reads the
// live bodies with this reader):
//
//	{"contents":[{"role":"user"|"model", "parts":[part…]}],
//	 "systemInstruction": {"parts":[{"text"}]} | string, "tools", "generationConfig", …}
//
// Parts: {text, thought?, thoughtSignature?}, {functionCall:{id?, name, args}},
// {functionResponse:{id?, name, response:{output | error | content | …}}},
// inlineData, fileData, executableCode, codeExecutionResult.
//
// Mapping:
//   - a model content is one assistant message (one step): its text parts that are
//     not thoughts are its Text, its functionCall parts its calls (ID the call's id,
//     or "call-N" as the builder numbers calls without one);
//   - a user (or function) content is a user message with its text parts, and its
//     functionResponse parts are outputs; a content holding only responses is a
//     RoleTool message. A response is paired with the call of the same id, else
//     with the oldest unanswered call of the same name, else with the oldest
//     unanswered call (Gemini CLI answers calls the model sent without an id with a
//     response carrying an id of its own making);
//   - an output's text is response.output (a string, or any other JSON value as its
//     JSON text), else response.error (IsError), else the text parts of an MCP-style
//     response.content list, else the response's JSON text. Rewrite puts the stub
//     in place of response.output or .error (or the first content text); a response
//     of any other shape cannot be rewritten (the API wants an object there);
//   - the first user content's text is the Task unless it is Gemini CLI's injected
//     session context ("This is the Gemini CLI…"), which is Meta.

// detectGeminiAPI claims a JSON object with a contents list whose elements carry
// parts, and no messages or input key.
func detectGeminiAPI(head []byte) bool {
	h := jsonscan.ScanHead(head)
	if h.Array || !h.Keys["contents"] || h.Keys["messages"] || h.Keys["input"] || h.Keys["sessionId"] {
		return false
	}
	if jsonscan.Kind(h.Vals["contents"]) != 0 && jsonscan.Kind(h.Vals["contents"]) != '[' {
		return false
	}
	elems := h.Elems["contents"]
	if len(elems) == 0 {
		return h.Keys["systemInstruction"] || h.Keys["generationConfig"]
	}
	for _, el := range elems {
		obj, ok := jsonscan.Loose(el)
		if !ok {
			return false
		}
		if _, ok := obj["parts"]; !ok {
			return false
		}
	}
	return true
}

// geminiInjected opens the context Gemini CLI sends as its first user message.
var geminiInjected = []string{"This is the Gemini CLI", "<session_context>", "<environment_context>"}

// geminiAPIReader walks the contents of one body into a builder.
type geminiAPIReader struct {
	b    *builder
	name string
	// open lists the calls of the last model content not yet answered.
	open []*ToolCall
}

// readGeminiAPI reads one Gemini API request body; the whole body is the single unit
// outputs point into. Errors are *ParseError naming the field; a malformed content
// is skipped in lenient mode.
func readGeminiAPI(name string, data []byte, opts Options) (*Session, error) {
	b, obj, err := loadRequestObject(FormatGeminiAPI, name, data, opts, "a Gemini API")
	if err != nil {
		return nil, err
	}
	if sys := obj["systemInstruction"]; sys != nil {
		if text := geminiSystemText(sys); text != "" {
			b.add(&Message{Role: RoleSystem, Text: text})
		}
	}
	raw, present := obj["contents"]
	if !present {
		return nil, &ParseError{File: name, Field: "contents", Msg: "missing"}
	}
	contents, ok := jsonscan.Array(raw)
	if !ok || jsonscan.Kind(raw) != '[' {
		return nil, &ParseError{File: name, Field: "contents", Msg: "not a list"}
	}
	r := &geminiAPIReader{b: b, name: name}
	for i, c := range contents {
		if pe := r.content(i, c); pe != nil {
			if err := skipEntry(b, opts, pe); err != nil {
				return nil, err
			}
		}
	}
	return b.finish()
}

// geminiSystemText is the text of a systemInstruction: a string, or a Content's
// text parts joined with "\n".
func geminiSystemText(raw json.RawMessage) string {
	if jsonscan.Kind(raw) == '"' {
		s, _ := jsonscan.Text(raw)
		return s
	}
	obj, ok := jsonscan.Loose(raw)
	if !ok {
		return ""
	}
	parts, _ := jsonscan.Array(obj["parts"])
	var texts []string
	for _, p := range parts {
		po, ok := jsonscan.Loose(p)
		if !ok {
			continue
		}
		if s, isStr := jsonscan.Text(po["text"]); isStr && s != "" {
			texts = append(texts, s)
		}
	}
	return strings.Join(texts, "\n")
}

// content reads contents[i]; it returns a *ParseError, having added nothing, when
// the content is malformed.
func (r *geminiAPIReader) content(i int, raw json.RawMessage) *ParseError {
	path := jsonscan.Path("contents", i)
	bad := func(field, msg string) *ParseError {
		return &ParseError{File: r.name, Field: jsonscan.Path(path, field), Msg: msg}
	}
	obj, ok := jsonscan.Loose(raw)
	if !ok || jsonscan.Kind(raw) != '{' {
		return bad("", "content is not a JSON object")
	}
	role, _ := jsonscan.Text(obj["role"])
	parts, ok := jsonscan.Array(obj["parts"])
	if !ok || jsonscan.Kind(obj["parts"]) != '[' {
		return bad("parts", "missing or not a list")
	}
	decoded := make([]map[string]json.RawMessage, len(parts))
	for j, p := range parts {
		po, ok := jsonscan.Loose(p)
		if !ok || jsonscan.Kind(p) != '{' {
			return bad(jsonscan.Path("parts", j), "part is not a JSON object")
		}
		decoded[j] = po
	}
	if role == "model" {
		return r.model(path, decoded)
	}
	return r.user(path, decoded)
}

// model reads a model content: one step.
func (r *geminiAPIReader) model(path string, parts []map[string]json.RawMessage) *ParseError {
	msg := &Message{Role: RoleAssistant}
	var texts []string
	for j, p := range parts {
		if fc, ok := jsonscan.Loose(p["functionCall"]); ok {
			callName, isStr := jsonscan.Text(fc["name"])
			if !isStr {
				return &ParseError{File: r.name, Field: jsonscan.Path(path, "parts", j, "functionCall", "name"), Msg: "missing or not a string"}
			}
			id, _ := jsonscan.Text(fc["id"])
			args := json.RawMessage("{}")
			if k := jsonscan.Kind(fc["args"]); k == '{' || k == '[' {
				args = argsJSON(fc["args"])
			}
			msg.Calls = append(msg.Calls, &ToolCall{ID: id, Name: callName, Args: args})
			continue
		}
		if isThought := strings.TrimSpace(string(p["thought"])) == "true"; isThought {
			continue
		}
		if s, isStr := jsonscan.Text(p["text"]); isStr && jsonscan.Kind(p["text"]) == '"' && s != "" {
			texts = append(texts, s)
		}
	}
	msg.Text = strings.Join(texts, "")
	r.b.add(msg)
	r.open = append(r.open[:0], msg.Calls...)
	return nil
}

// user reads a user (or function) content: its text and its function responses.
func (r *geminiAPIReader) user(path string, parts []map[string]json.RawMessage) *ParseError {
	var texts []string
	var outs []*ToolOutput
	for j, p := range parts {
		if fr, ok := jsonscan.Loose(p["functionResponse"]); ok {
			o := r.response(fr, jsonscan.Path(path, "parts", j, "functionResponse"))
			outs = append(outs, o)
			continue
		}
		if p["inlineData"] != nil || p["fileData"] != nil {
			if len(outs) > 0 {
				outs[len(outs)-1].HasImage = true
			}
			continue
		}
		if s, isStr := jsonscan.Text(p["text"]); isStr && jsonscan.Kind(p["text"]) == '"' && s != "" {
			texts = append(texts, s)
		}
	}
	text := strings.Join(texts, "\n")
	m := &Message{Role: RoleUser, Text: text, Outputs: outs}
	if len(outs) > 0 && text == "" {
		m.Role = RoleTool
	}
	t := strings.TrimSpace(text)
	for _, p := range geminiInjected {
		if strings.HasPrefix(t, p) {
			m.Meta = true
		}
	}
	r.b.add(m)
	return nil
}

// response reads one functionResponse at path and pairs it with an open call.
func (r *geminiAPIReader) response(fr map[string]json.RawMessage, path string) *ToolOutput {
	id, _ := jsonscan.Text(fr["id"])
	fname, _ := jsonscan.Text(fr["name"])
	o := &ToolOutput{}
	if c := r.pair(id, fname); c != nil {
		o.CallID = c.ID
	} else {
		o.CallID = id
		if o.CallID == "" {
			o.CallID = "response:" + fname
		}
	}
	rpath := jsonscan.Path(path, "response")
	resp, isObj := jsonscan.Loose(fr["response"])
	switch {
	case !isObj:
		o.Text = geminiValueText(fr["response"])
	case resp["output"] != nil && jsonscan.Kind(resp["output"]) != 'n':
		o.Text = geminiValueText(resp["output"])
		if jsonscan.Kind(resp["output"]) == '"' {
			setLoc(o, 0, jsonscan.Path(rpath, "output"))
		}
	case resp["error"] != nil && jsonscan.Kind(resp["error"]) != 'n':
		o.Text = geminiValueText(resp["error"])
		o.IsError = true
		if jsonscan.Kind(resp["error"]) == '"' {
			setLoc(o, 0, jsonscan.Path(rpath, "error"))
		}
	case jsonscan.Kind(resp["content"]) == '[':
		text, paths, image, _ := contentParts(resp["content"], jsonscan.Path(rpath, "content"))
		o.Text, o.HasImage = text, image
		if len(paths) > 0 {
			setLoc(o, 0, paths...)
		}
		o.IsError = strings.TrimSpace(string(resp["isError"])) == "true"
	default:
		o.Text = string(fr["response"])
	}
	return o
}

// pair returns the open call a response answers (see the package comment above)
// and takes it off the open list; nil when none is open.
func (r *geminiAPIReader) pair(id, name string) *ToolCall {
	pick := -1
	for k, c := range r.open {
		if id != "" && c.ID == id {
			pick = k
			break
		}
	}
	if pick < 0 {
		for k, c := range r.open {
			if c.Name == name && (id == "" || !r.idKnown(c)) {
				pick = k
				break
			}
		}
	}
	if pick < 0 && len(r.open) > 0 {
		pick = 0
	}
	if pick < 0 {
		return nil
	}
	c := r.open[pick]
	r.open = append(r.open[:pick], r.open[pick+1:]...)
	return c
}

// idKnown reports whether c's id came from the body (not the builder's "call-N").
func (r *geminiAPIReader) idKnown(c *ToolCall) bool {
	return c.ID != "" && !strings.HasPrefix(c.ID, "call-")
}
