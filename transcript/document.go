package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// Helpers shared by the readers of whole-document JSON formats (Gemini CLI,
// OpenHands, and the OpenAI chat-completions family in openai.go): loading and
// checking the document, lenient skipping, and the chat content and call-argument
// shapes several of them share.

// jsonError turns a JSON decoding error over data into a *ParseError naming the
// line (counted from line 1 of data, plus base) and field.
func jsonError(name string, data []byte, base int, field string, err error) *ParseError {
	pe := &ParseError{File: name, Field: field, Msg: err.Error()}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		pe.Line = base + jsonscan.Line(data, int(se.Offset))
		pe.Msg = "invalid JSON: " + se.Error()
		if se.Offset >= int64(len(bytes.TrimRight(data, " \t\r\n"))) {
			pe.Msg = "truncated JSON: " + se.Error()
		}
	case errors.As(err, &te):
		pe.Line = base + jsonscan.Line(data, int(te.Offset))
		pe.Field = jsonscan.Path(field, te.Field)
		pe.Msg = fmt.Sprintf("expected %s, found JSON %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		pe.Line = base + jsonscan.Line(data, len(data))
		pe.Msg = "truncated JSON"
	}
	return pe
}

// checkUTF8 checks that data is valid UTF-8. In strict mode it fails with a
// *ParseError naming the line of the first bad byte; lenient mode only warns (Go's
// JSON decoder then reads bad bytes as U+FFFD).
func checkUTF8(b *builder, name string, data []byte, opts Options) error {
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
	pe := &ParseError{File: name, Line: jsonscan.Line(data, off), Msg: fmt.Sprintf("invalid UTF-8 at byte %d", off)}
	if !opts.Lenient {
		return pe
	}
	b.warn("%s (read as U+FFFD)", pe.Error())
	return nil
}

// skipEntry fails with pe in strict mode; in lenient mode it counts the entry as
// skipped, records a warning and returns nil.
func skipEntry(b *builder, opts Options, pe *ParseError) error {
	if !opts.Lenient {
		return pe
	}
	b.s.Skipped++
	b.warn("skipped: %s", pe.Error())
	return nil
}

// loadDocument checks data (UTF-8, JSON syntax) and returns its JSON value (data
// without the blanks around it), registering the whole document as unit 0. Errors
// are *ParseError.
func loadDocument(b *builder, name string, data []byte, opts Options) (json.RawMessage, error) {
	if err := checkUTF8(b, name, data, opts); err != nil {
		return nil, err
	}
	if !json.Valid(data) {
		var v any
		return nil, jsonError(name, data, 0, "", json.Unmarshal(data, &v))
	}
	b.addUnit(0, len(data))
	return bytes.TrimSpace(data), nil
}

// contentParts reads a chat message content: a string, null, or a list of parts
// ({type:"text"|"input_text"|"output_text", text}, bare strings, images). It returns
// the text pieces joined with "\n", the sjson path of each piece under base, and
// whether an image part was present. ok is false when content is some other kind.
func contentParts(raw json.RawMessage, base string) (text string, paths []string, image bool, ok bool) {
	switch jsonscan.Kind(raw) {
	case 0, 'n':
		return "", nil, false, true
	case '"':
		s, _ := jsonscan.Text(raw)
		return s, []string{base}, false, true
	case '[':
	default:
		return "", nil, false, false
	}
	parts, ok := jsonscan.Array(raw)
	if !ok {
		return "", nil, false, false
	}
	var texts []string
	for i, p := range parts {
		if jsonscan.Kind(p) == '"' {
			s, _ := jsonscan.Text(p)
			texts = append(texts, s)
			paths = append(paths, jsonscan.Path(base, i))
			continue
		}
		obj, isObj := jsonscan.Loose(p)
		if !isObj {
			continue
		}
		typ, _ := jsonscan.Text(obj["type"])
		if strings.Contains(typ, "image") || obj["image_url"] != nil || obj["inlineData"] != nil {
			image = true
			continue
		}
		if s, isStr := jsonscan.Text(obj["text"]); isStr && jsonscan.Kind(obj["text"]) == '"' {
			texts = append(texts, s)
			paths = append(paths, jsonscan.Path(base, i, "text"))
		}
	}
	return strings.Join(texts, "\n"), paths, image, true
}

// argsJSON turns a function-call arguments value into Args: a JSON string holding
// JSON becomes that JSON, an object (or other value) is kept in compact form, any
// other string becomes a JSON string; missing gives {}.
func argsJSON(raw json.RawMessage) json.RawMessage {
	switch jsonscan.Kind(raw) {
	case 0, 'n':
		return json.RawMessage("{}")
	case '"':
		s, _ := jsonscan.Text(raw)
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

// commandArgs returns {"command": cmd} as JSON.
func commandArgs(cmd string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return b
}

// loadRequestObject starts reading a request body whose whole body is one JSON
// object, the single unit outputs point into (the Gemini API's and the Responses
// API's): a builder of format over data, measured with opts.Cache, and the body's
// top-level fields. A body that is not an object is a *ParseError saying that a
// body of what ("a Responses API", "a Gemini API") is one.
func loadRequestObject(format Format, name string, data []byte, opts Options, what string) (*builder, map[string]json.RawMessage, error) {
	b := newBuilder(format, name, data)
	b.measures = opts.Cache
	root, err := loadDocument(b, name, data, opts)
	if err != nil {
		return nil, nil, err
	}
	obj, ok := jsonscan.Loose(root)
	if !ok || jsonscan.Kind(root) != '{' {
		return nil, nil, &ParseError{File: name, Msg: what + " request body is a JSON object"}
	}
	return b, obj, nil
}
