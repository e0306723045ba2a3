// Package widetext recognises UTF-16 and UTF-32 text, by its byte-order mark or by
// where the NULs of its first characters fall (Sniff), and converts it to UTF-8
// (Text.Decode): package transcript reads session files a Windows tool wrote wide
// through it.
package widetext

import (
	"bytes"
	"fmt"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// Text is a UTF-16 or UTF-32 encoding a session file may come in (Windows tools
// write UTF-16 with a byte-order mark): transcript's readers take UTF-8, so its
// Read and Detect convert such content first.
type Text struct {
	name string // "UTF-16LE", "UTF-32BE", ...
	bom  bool   // the content starts with its byte-order mark
	enc  encoding.Encoding
}

// Sniff tells whether data is UTF-16 or UTF-32 text: by its byte-order mark, or,
// without one, by where the NULs fall in its first four bytes, as RFC 4627 section 3
// reads JSON text (whose first two characters are ASCII), provided at least a third of
// its first 64 bytes are NUL (so binary data is not taken for text). nil for anything
// else, UTF-8 included.
func Sniff(data []byte) *Text {
	le16 := func(bom bool) *Text {
		return &Text{"UTF-16LE", bom, unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM)}
	}
	be16 := func(bom bool) *Text {
		return &Text{"UTF-16BE", bom, unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM)}
	}
	le32 := func(bom bool) *Text {
		return &Text{"UTF-32LE", bom, utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM)}
	}
	be32 := func(bom bool) *Text {
		return &Text{"UTF-32BE", bom, utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM)}
	}
	switch {
	case bytes.HasPrefix(data, []byte{0xff, 0xfe, 0, 0}):
		return le32(true)
	case bytes.HasPrefix(data, []byte{0, 0, 0xfe, 0xff}):
		return be32(true)
	case bytes.HasPrefix(data, []byte{0xff, 0xfe}):
		return le16(true)
	case bytes.HasPrefix(data, []byte{0xfe, 0xff}):
		return be16(true)
	case len(data) < 4:
		return nil
	}
	head := data[:min(len(data), 64)]
	if 3*bytes.Count(head, []byte{0}) < len(head) {
		return nil
	}
	nul := func(i int) bool { return data[i] == 0 }
	switch {
	case !nul(0) && nul(1) && nul(2) && nul(3):
		return le32(false)
	case nul(0) && nul(1) && nul(2) && !nul(3):
		return be32(false)
	case !nul(0) && nul(1):
		return le16(false)
	case nul(0) && !nul(1):
		return be16(false)
	}
	return nil
}

// Decode converts data (with its byte-order mark, if any) to UTF-8, without a
// byte-order mark; a sequence that is not valid in the encoding becomes U+FFFD.
// The error, from the decoder, names the encoding.
func (w *Text) Decode(data []byte) ([]byte, error) {
	out, err := w.enc.NewDecoder().Bytes(data)
	if err != nil {
		return nil, fmt.Errorf("converting %s to UTF-8: %w", w.name, err)
	}
	return bytes.TrimPrefix(out, []byte("\xef\xbb\xbf")), nil
}

// String describes the encoding for a message: "UTF-16LE text (with a byte-order mark)".
func (w *Text) String() string {
	if w.bom {
		return w.name + " text (with a byte-order mark)"
	}
	return w.name + " text (no byte-order mark)"
}
