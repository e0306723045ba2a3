package transcript

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// Gemini CLI sessions (TRANSCRIPT-FORMATS.md §4): one JSON document
// {sessionId, projectHash, startTime, lastUpdated, messages[], summary?}, messages
// typed user | gemini | info | error.
//
// Mapping:
//   - user → RoleUser (content a string or a list of {text} parts);
//   - gemini → RoleAssistant, one step per message: content is its text (thoughts
//     are not text: their subjects and descriptions are its Thinking), toolCalls[]
//     its calls (id, name, args);
//   - each gemini message whose toolCalls hold results is followed by one
//     synthesised RoleTool message carrying those results in toolCalls order: a call
//     and its result live in the same toolCalls entry,
//     result[].functionResponse.response.output (or .error, IsError; status "error"
//     or "cancelled" is IsError too). The output points at
//     messages.N.toolCalls.K.result.J.functionResponse.response.output|error, and at
//     result.J.text for plain text parts, and at ...response itself (its JSON text)
//     for a response with neither output nor error; inlineData and fileData parts
//     set HasImage. A call without a result stays unanswered;
//   - info, error and warning entries are the CLI's own notices, never sent to the
//     model: they are left out, as are entries of unknown type (with a warning).
//
// Gemini records no working directory (only a hash of it), so Session.Cwd is "" and
// relative paths stay relative. Newer builds write JSONL with $set patches; that
// form is not read here.

// detectGemini claims a JSON object whose keys include sessionId, projectHash and
// messages.
func detectGemini(head []byte) bool {
	h := jsonscan.ScanHead(head)
	return !h.Array && h.Keys["sessionId"] && h.Keys["projectHash"] && h.Keys["messages"]
}

type geminiToolCall struct {
	ID     json.RawMessage `json:"id"`
	Name   json.RawMessage `json:"name"`
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result"`
	Status json.RawMessage `json:"status"`
}

func readGemini(name string, data []byte, opts Options) (*Session, error) {
	b := newBuilder(FormatGemini, name, data)
	var doc struct {
		SessionID json.RawMessage `json:"sessionId"`
		Messages  json.RawMessage `json:"messages"`
	}
	root, err := loadDocument(b, name, data, opts)
	if err != nil {
		return nil, err
	}
	if jsonscan.Kind(root) != '{' {
		return nil, &ParseError{File: name, Msg: "a Gemini CLI session is a JSON object"}
	}
	jsonscan.Decode(root, &doc)
	b.s.ID, _ = jsonscan.Text(doc.SessionID)
	msgs, ok := jsonscan.Array(doc.Messages)
	if !ok || jsonscan.Kind(doc.Messages) != '[' {
		return nil, &ParseError{File: name, Field: "messages", Msg: "missing or not a list"}
	}
	for i, raw := range msgs {
		if err := readGeminiMessage(b, name, i, raw); err != nil {
			if err := skipEntry(b, opts, err); err != nil {
				return nil, err
			}
		}
	}
	return b.finish()
}

// readGeminiMessage adds message i; it returns a *ParseError, having added nothing,
// when the entry is malformed.
func readGeminiMessage(b *builder, name string, i int, raw json.RawMessage) *ParseError {
	path := jsonscan.Path("messages", i)
	bad := func(field, msg string) *ParseError {
		return &ParseError{File: name, Field: jsonscan.Path(path, field), Msg: msg}
	}
	obj, ok := jsonscan.Loose(raw)
	if !ok {
		return bad("", "message is not a JSON object")
	}
	typ, ok := jsonscan.Text(obj["type"])
	if !ok {
		return bad("type", "missing or not a string")
	}
	text, _, _, ok := contentParts(obj["content"], "")
	if !ok {
		return bad("content", "neither a string nor a list of parts")
	}
	at := func() time.Time { return b.timeOf(obj["timestamp"], 0, jsonscan.Path(path, "timestamp")) }
	switch typ {
	case "user":
		b.add(&Message{Role: RoleUser, Text: text, Time: at()})
		return nil
	case "gemini":
	case "info", "error", "warning":
		return nil
	default:
		b.warn("%s: message of type %q left out", path, typ)
		return nil
	}
	tcs, ok := jsonscan.Array(obj["toolCalls"])
	if !ok {
		return bad("toolCalls", "not a list")
	}
	msg := &Message{Role: RoleAssistant, Text: text, Thinking: geminiThoughts(obj["thoughts"])}
	outs, outCalls, err := geminiCalls(msg, tcs, name, path)
	if err != nil {
		return err
	}
	msg.Time = at()
	b.add(msg)
	if len(outs) > 0 {
		for j, o := range outs {
			// Read after add: calls without an id got one from the builder ("call-N").
			o.CallID = outCalls[j].ID
		}
		b.add(&Message{Role: RoleTool, Outputs: outs, Time: msg.Time})
	}
	return nil
}

// geminiCalls reads the tool calls tcs of the gemini message at path into
// msg.Calls, and returns the results they carry already, each with its call.
func geminiCalls(msg *Message, tcs []json.RawMessage, name, path string) ([]*ToolOutput, []*ToolCall, *ParseError) {
	bad := func(field, msg string) *ParseError {
		return &ParseError{File: name, Field: jsonscan.Path(path, field), Msg: msg}
	}
	var outs []*ToolOutput
	var outCalls []*ToolCall
	for k, raw := range tcs {
		tpath := jsonscan.Path("toolCalls", k)
		var tc geminiToolCall
		if !jsonscan.Decode(raw, &tc) {
			return nil, nil, bad(tpath, "tool call is not a JSON object")
		}
		toolName, ok := jsonscan.Text(tc.Name)
		if !ok {
			return nil, nil, bad(jsonscan.Path(tpath, "name"), "missing or not a string")
		}
		id, _ := jsonscan.Text(tc.ID)
		args := json.RawMessage("{}")
		if k := jsonscan.Kind(tc.Args); k == '{' || k == '[' {
			args = argsJSON(tc.Args)
		}
		call := &ToolCall{ID: id, Name: toolName, Args: args}
		msg.Calls = append(msg.Calls, call)
		o, err := geminiResult(tc, jsonscan.Path(path, tpath, "result"))
		if err != nil {
			err.File = name
			return nil, nil, err
		}
		if o != nil {
			outs = append(outs, o)
			outCalls = append(outCalls, call)
		}
	}
	return outs, outCalls, nil
}

// geminiResult reads one tool call's result list; nil when it has none yet.
func geminiResult(tc geminiToolCall, base string) (*ToolOutput, *ParseError) {
	status, _ := jsonscan.Text(tc.Status)
	parts, ok := jsonscan.Array(tc.Result)
	if !ok {
		return nil, &ParseError{Field: base, Msg: "not a list"}
	}
	if len(parts) == 0 {
		if jsonscan.Kind(tc.Result) == '[' {
			// An empty result list: the call ran and returned nothing.
			return &ToolOutput{IsError: status == "error" || status == "cancelled"}, nil
		}
		return nil, nil
	}
	o := &ToolOutput{IsError: status == "error" || status == "cancelled"}
	var texts, paths []string
	for j, p := range parts {
		obj, ok := jsonscan.Loose(p)
		if !ok {
			continue
		}
		if fr, ok := jsonscan.Loose(obj["functionResponse"]); ok {
			resp, _ := jsonscan.Loose(fr["response"])
			rpath := jsonscan.Path(base, j, "functionResponse", "response")
			switch {
			case resp["output"] != nil && jsonscan.Kind(resp["output"]) != 'n':
				texts = append(texts, geminiValueText(resp["output"]))
				paths = append(paths, jsonscan.Path(rpath, "output"))
			case resp["error"] != nil && jsonscan.Kind(resp["error"]) != 'n':
				texts = append(texts, geminiValueText(resp["error"]))
				paths = append(paths, jsonscan.Path(rpath, "error"))
				o.IsError = true
			case resp != nil || jsonscan.Kind(fr["response"]) == '"':
				// A structured response, or one a rewrite replaced by its stub.
				texts = append(texts, geminiValueText(fr["response"]))
				paths = append(paths, rpath)
			}
			continue
		}
		if obj["inlineData"] != nil || obj["fileData"] != nil {
			o.HasImage = true
			continue
		}
		if jsonscan.Kind(obj["text"]) == '"' {
			s, _ := jsonscan.Text(obj["text"])
			texts = append(texts, s)
			paths = append(paths, jsonscan.Path(base, j, "text"))
		}
	}
	o.Text = strings.Join(texts, "\n")
	setLoc(o, 0, paths...)
	return o, nil
}

// geminiValueText is a response field as the model saw it: a string's value, any
// other JSON value as its JSON text.
func geminiValueText(raw json.RawMessage) string {
	if jsonscan.Kind(raw) == '"' {
		s, _ := jsonscan.Text(raw)
		return s
	}
	return string(raw)
}

// geminiThoughts joins the subject and description of each entry of a gemini
// message's thoughts[] with "\n" (Message.Thinking); "" when there are none or the
// field is not a list of objects (thoughts are never required).
func geminiThoughts(raw json.RawMessage) string {
	elems, ok := jsonscan.Array(raw)
	if !ok || jsonscan.Kind(raw) != '[' {
		return ""
	}
	var parts []string
	for _, el := range elems {
		var th struct {
			Subject     json.RawMessage `json:"subject"`
			Description json.RawMessage `json:"description"`
		}
		if !jsonscan.Decode(el, &th) {
			continue
		}
		for _, f := range []json.RawMessage{th.Subject, th.Description} {
			if t, ok := jsonscan.Text(f); ok && t != "" {
				parts = append(parts, t)
			}
		}
	}
	return strings.Join(parts, "\n")
}
