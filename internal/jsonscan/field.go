package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// FieldError is a decoding problem at a JSON path; readers turn it into a
// transcript.ParseError carrying their file name and line.
type FieldError struct {
	Field string // the JSON path, "messages.3.content"
	Msg   string // what was wrong
}

// Error renders "FIELD: MSG".
func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// AsFieldError returns err as a *FieldError, wrapping other errors at path p.
func AsFieldError(err error, p string) *FieldError {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	return &FieldError{p, err.Error()}
}

// F names one field for Fields: its key and where to decode it.
type F struct {
	Key string
	Dst any // *string, *bool, *float64 or *json.RawMessage
}

// Fields decodes each named field of obj (at JSON path base) with Field, stopping at
// the first error.
func Fields(obj map[string]json.RawMessage, base string, fields ...F) error {
	for _, f := range fields {
		if err := Field(obj, f.Key, base, f.Dst); err != nil {
			return err
		}
	}
	return nil
}

// Field decodes obj[key] into dst (*string, *bool, *float64, *json.RawMessage, or
// anything encoding/json decodes) when the key is present and not null, leaving dst
// alone otherwise; a value of the wrong JSON type is a *FieldError naming base.key:
// "expected a string, found JSON number".
func Field(obj map[string]json.RawMessage, key, base string, dst any) error {
	raw, ok := obj[key]
	if !ok || Null(raw) {
		return nil
	}
	var good bool
	want := "a valid value"
	switch d := dst.(type) {
	case *string:
		want = "a string"
		var s string
		if s, good = String(raw); good {
			*d = s
		}
	case *bool:
		want = "a boolean"
		switch string(bytes.TrimSpace(raw)) {
		case "true":
			*d, good = true, true
		case "false":
			*d, good = false, true
		}
	case *float64:
		want = "a number"
		good = json.Unmarshal(raw, d) == nil
	case *json.RawMessage:
		*d, good = bytes.Clone(raw), true
	default:
		good = json.Unmarshal(raw, dst) == nil
	}
	if good {
		return nil
	}
	path := key
	if base != "" {
		path = base + "." + key
	}
	return &FieldError{path, fmt.Sprintf("expected %s, found JSON %s", want, KindName(raw))}
}
