package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Position returns the 1-based line and column, in bytes, of byte offset off in
// data (off clamped to [0, len(data)]): the column of the byte at off, or one past
// the last byte of its line when off is the end of data.
func Position(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	line = bytes.Count(data[:off], []byte("\n")) + 1
	col = off - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}

// ErrorOffset returns the byte offset in data where err, an error of decoding data
// with encoding/json, lies: a syntax error's offending byte (json.SyntaxError's
// Offset counts it as read, so one less), just after a value of the wrong type
// (json.UnmarshalTypeError's Offset), the end of data for a document cut short
// (a Decoder's io.ErrUnexpectedEOF; Unmarshal says "unexpected end of JSON
// input", a syntax error, at the last byte); false for any other error.
func ErrorOffset(data []byte, err error) (int, bool) {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return min(max(int(syn.Offset)-1, 0), len(data)), true
	case errors.As(err, &typ):
		return min(max(int(typ.Offset), 0), len(data)), true
	case errors.Is(err, io.ErrUnexpectedEOF):
		return len(data), true
	}
	return 0, false
}
