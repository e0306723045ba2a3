package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind returns the first byte of a JSON value ('{', '[', '"', 'n', 't', 'f', '-' or a
// digit), 0 when raw is empty or blank.
func Kind(raw []byte) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// KindName names the JSON type of raw: "string", "object", "array", "boolean",
// "null", "number", or "nothing" when raw is empty.
func KindName(raw []byte) string {
	switch Kind(raw) {
	case 0:
		return "nothing"
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

// Null reports whether raw is absent (empty) or the JSON null.
func Null(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// Unquote unquotes the valid JSON value raw when it is a string, as encoding/json
// does, without allocating beyond the result; ok is false for another JSON type, and
// for strings holding a UTF-16 surrogate escape or invalid UTF-8, which it leaves to
// encoding/json (String does that).
func Unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if !utf8.Valid(in) {
		return "", false
	}
	i := bytes.IndexByte(in, '\\')
	if i < 0 {
		return string(in), true
	}
	// A strings.Builder: its buffer is not zeroed first, and String hands it over
	// without the copy string(out) made (together 1.7 of the 4 ms a first request's
	// 800 KB of tool results took to unquote). Its size is an upper bound of the
	// result, so it never grows: each escape is at least one byte shorter unquoted
	// and holds at most two backslashes. What it holds beyond the result (half a
	// byte per escape) stays with the string.
	var out strings.Builder
	out.Grow(len(in) - bytes.Count(in, backslash)/2)
	for {
		out.Write(in[:i])
		in = in[i:]
		if len(in) < 2 {
			return "", false
		}
		switch c := in[1]; c {
		case '"', '\\', '/':
			out.WriteByte(c)
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, ok := hex4(in[2:])
			if !ok || r >= 0xD800 && r < 0xE000 {
				return "", false
			}
			out.WriteRune(r)
			in = in[4:]
		default:
			return "", false
		}
		in = in[2:]
		if i = bytes.IndexByte(in, '\\'); i < 0 {
			out.Write(in)
			return out.String(), true
		}
	}
}

// backslash is what Unquote counts to size its result.
var backslash = []byte{'\\'}

// hex4 reads the four hexadecimal digits (either case) that b starts with, as
// strconv.ParseUint(b[:4], 16, 32) reads them; false when b is shorter or one of
// them is not a digit.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// String returns the value of the JSON string raw, as encoding/json decodes it
// (invalid UTF-8 and lone surrogates become U+FFFD); ok is false for any other
// value (absent, null, number, object…).
func String(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if s, ok := Unquote(raw); ok {
		return s, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Text returns a JSON string's value, or a number's literal (ids and counts are
// sometimes written as numbers); ok is false for null, missing and other kinds.
func Text(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"':
		return String(raw)
	case c == '-' || c >= '0' && c <= '9':
		return string(raw), true
	}
	return "", false
}

// Int returns a JSON number, or a string holding one, as an int; ok is false for
// anything else, NaN, and values beyond ±2^53.
func Int(raw []byte) (int, bool) {
	s, ok := Text(raw)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f != f || f > 1<<53 || f < -(1<<53) {
		return 0, false
	}
	return int(f), true
}

// decodeObject decodes the object raw (surrounding blanks trimmed) into a map of its
// values by exact key, unquoted as encoding/json unquotes keys; with strict, a key
// that occurs twice (after unquoting) fails it, else the last value wins. ok is false
// when raw is not a well-formed object.
func decodeObject(raw []byte, strict bool) (obj map[string]json.RawMessage, dup, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false, false
	}
	obj = map[string]json.RawMessage{}
	end, ok := members(raw, 0, func(k, v Span) bool {
		key, ok := String(raw[k.Start:k.End])
		if !ok {
			return false
		}
		if _, seen := obj[key]; seen {
			dup = true
			if strict {
				return false
			}
		}
		obj[key] = raw[v.Start:v.End:v.End]
		return true
	})
	if !ok && dup {
		return nil, true, false
	}
	if !ok || end != len(raw) {
		return nil, false, false
	}
	return obj, false, true
}

// Object decodes raw as a JSON object of raw values by exact key. An object with a
// repeated key is refused: a map would keep one value while gjson (and so Rewrite)
// finds the first. problem is "" on success, else what was wrong: another JSON type
// ("expected a JSON object, found a JSON string"), a repeated key, or, for input
// that is not valid JSON, encoding/json's complaint (see Problem). The values are
// sub-slices of raw.
func Object(raw []byte) (obj map[string]json.RawMessage, problem string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] != '{' && json.Valid(raw) {
		return nil, "expected a JSON object, found a JSON " + KindName(raw)
	}
	obj, dup, ok := decodeObject(raw, true)
	switch {
	case ok:
		return obj, ""
	case dup:
		return nil, "a key occurs twice in the object"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, Problem(err)
	}
	return nil, "invalid JSON object"
}

// Loose decodes raw as a JSON object of raw values by exact key; when a key repeats
// the last value wins, as in encoding/json. ok is false for anything but an object.
// The values are sub-slices of raw.
func Loose(raw []byte) (map[string]json.RawMessage, bool) {
	obj, _, ok := decodeObject(raw, false)
	return obj, ok
}

// Array decodes raw as a JSON array of raw values (sub-slices of raw). null and
// missing give an empty list; ok is false for any other non-array.
func Array(raw []byte) ([]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	switch Kind(raw) {
	case 0, 'n':
		return nil, true
	case '[':
		spans, end, ok := ScanArray(raw, 0)
		if !ok || end != len(raw) {
			return nil, false
		}
		out := make([]json.RawMessage, len(spans))
		for i, s := range spans {
			out[i] = raw[s.Start:s.End:s.End]
		}
		return out, true
	}
	return nil, false
}

// Decode fills the json.RawMessage fields of the struct dst points to from the JSON
// object raw, by their json tags, matching keys exactly (Loose). ok is false when raw
// is not an object.
func Decode(raw []byte, dst any) bool {
	obj, ok := Loose(raw)
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

// Path joins gjson/sjson path segments (any values, printed with fmt), skipping
// empty ones: Path("messages", 3, "content") is "messages.3.content".
func Path(parts ...any) string {
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

// Problem describes why encoding/json failed to decode a line or document as an
// object: "expected a JSON object, found a JSON array", "field F: expected T, found
// JSON K", "invalid JSON: unexpected end of input (truncated?)" or "invalid JSON:
// <the decoder's message>".
func Problem(err error) string {
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
