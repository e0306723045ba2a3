package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// ErrorOffset points at the offending byte of a syntax error, the end of a
// mistyped value and the end of a document cut short; Position turns an offset
// into a line and column (counted here by hand).
func TestErrorOffsetAndPosition(t *testing.T) {
	var v struct{ N int }
	tests := []struct {
		name      string
		data      string
		line, col int
		ok        bool
	}{
		// The second ',' is byte 17 of line 2.
		{"syntax", "{\n  \"cutoff\": 0.1,,\n}", 2, 17, true},
		// The string value "x" ends at byte 8 of line 1 (`{"N": "x"`).
		{"type", `{"N": "x"}`, 1, 10, true},
		// Cut short (a Decoder's io.ErrUnexpectedEOF): one past the last byte
		// of line 2 (`  "N": 5`, 8 bytes).
		{"cut short", "{\n  \"N\": 5", 2, 9, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := json.NewDecoder(strings.NewReader(tt.data)).Decode(&v)
			off, ok := ErrorOffset([]byte(tt.data), err)
			line, col := Position([]byte(tt.data), off)
			if ok != tt.ok || line != tt.line || col != tt.col {
				t.Errorf("%v: offset %d (%v) = %d:%d; want %d:%d", err, off, ok, line, col, tt.line, tt.col)
			}
		})
	}
	if _, ok := ErrorOffset(nil, errors.New("disk full")); ok {
		t.Error("ErrorOffset placed an error that is not a decoding one")
	}
}
