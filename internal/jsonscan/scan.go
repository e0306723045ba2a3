// Package jsonscan is the one family of JSON helpers transcript's readers share: a
// byte scanner that finds the extent of JSON values without decoding them, the
// decoders of single values built on it (objects by exact key, arrays, strings,
// numbers as text), field decoding with errors that name the field, and the view of
// a document's first bytes that format detection needs. Both the request-body fast
// path (which scans a body once and decodes only the messages it has not seen) and
// the full read of every format use these functions.
//
// The decoders expect valid JSON: every reader validates its input once, where it
// reads it (a JSONL line, a whole document, a request-body message), and decodes
// the values inside with this package. On valid JSON the scanner is exact; on other
// input it may return any extent, so what it skips must be checked first (json.Valid)
// or known valid. ScanHead is the exception: it reads the possibly cut, possibly
// broken start of a file and validates what it keeps.
//
// Keys are matched exactly, as the API, JSON.parse and the gjson/sjson paths Rewrite
// uses match them; encoding/json matches struct fields without regard to case.
package jsonscan

import "bytes"

// Span is the byte range [Start, End) of a JSON value inside a larger input.
type Span struct{ Start, End int }

// Member is one member of an object: its key, unquoted, and the span of its value.
type Member struct {
	Key   string
	Value Span
}

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the first index at or after i that is not JSON whitespace.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && IsSpace(data[i]) {
		i++
	}
	return i
}

// bom is the UTF-8 byte order mark.
var bom = []byte("\xef\xbb\xbf")

// SkipBlank returns the first index at or after i that is neither JSON whitespace
// nor a UTF-8 byte order mark (files written on Windows may start with one).
func SkipBlank(data []byte, i int) int {
	for i < len(data) {
		switch {
		case IsSpace(data[i]):
			i++
		case bytes.HasPrefix(data[i:], bom):
			i += len(bom)
		default:
			return i
		}
	}
	return i
}

// SkipString returns the index just after the string that opens at data[i] ('"'),
// or -1 when it does not end. The string's content is not checked.
func SkipString(data []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// SkipValue returns the index just after the JSON value that starts at data[i], or
// -1. It follows strings and brackets only: on valid JSON the end is exact; on other
// input it may return any end, so what it skips must be checked (or known valid).
func SkipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return SkipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				e := SkipString(data, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	case '}', ']', ',', ':':
		return -1
	}
	j := i
	for j < len(data) && !IsSpace(data[j]) && data[j] != ',' && data[j] != '}' && data[j] != ']' && data[j] != ':' {
		j++
	}
	return j
}

// walkObject walks the object that opens at data[i] ('{'), checking the bytes
// between members: for each member it calls key with the span of the key (quotes
// included) as soon as the key is read, then value with the index where the value
// starts, which skips the value and returns the index after it. It returns the index
// after the object; ok is false when the object is malformed, cut short, or a
// callback returns false. Every object walk of the package goes through it.
func walkObject(data []byte, i int, key func(Span) bool, value func(start int) (end int, ok bool)) (end int, ok bool) {
	j := SkipSpace(data, i+1)
	if j < len(data) && data[j] == '}' {
		return j + 1, true
	}
	for {
		if j >= len(data) || data[j] != '"' {
			return 0, false
		}
		ke := SkipString(data, j)
		if ke < 0 || !key(Span{j, ke}) {
			return 0, false
		}
		j = SkipSpace(data, ke)
		if j >= len(data) || data[j] != ':' {
			return 0, false
		}
		ve, ok := value(SkipSpace(data, j+1))
		if !ok {
			return 0, false
		}
		var more bool
		if j, more, ok = after(data, ve, '}'); !ok || !more {
			return j, ok
		}
	}
}

// walkArray is walkObject for the array that opens at data[i] ('['): elem is called
// with the index where each element starts, skips it and returns the index after it.
func walkArray(data []byte, i int, elem func(start int) (end int, ok bool)) (end int, ok bool) {
	j := SkipSpace(data, i+1)
	if j < len(data) && data[j] == ']' {
		return j + 1, true
	}
	for {
		ve, ok := elem(j)
		if !ok {
			return 0, false
		}
		var more bool
		if j, more, ok = after(data, ve, ']'); !ok || !more {
			return j, ok
		}
	}
}

// after reads what follows a member or element that ends at data[i] in a container
// that closes with end: a comma (more, next is where the next one starts) or end
// (next is the index after the container); ok is false for anything else.
func after(data []byte, i int, end byte) (next int, more, ok bool) {
	j := SkipSpace(data, i)
	switch {
	case j >= len(data):
		return 0, false, false
	case data[j] == ',':
		return SkipSpace(data, j+1), true, true
	case data[j] == end:
		return j + 1, false, true
	}
	return 0, false, false
}

// members walks the object at data[i], calling fn with each key's span and its
// value's span (found with SkipValue).
func members(data []byte, i int, fn func(key, value Span) bool) (end int, ok bool) {
	var key Span
	return walkObject(data, i, func(k Span) bool { key = k; return true }, func(vs int) (int, bool) {
		ve := SkipValue(data, vs)
		return ve, ve >= 0 && fn(key, Span{vs, ve})
	})
}

// Members calls fn with the span of each member's key (quotes included) and of its
// value, in order, for the object that opens at data[i] ('{'), until fn returns
// false. Like SkipValue it expects valid JSON: on other input it stops where the
// object stops making sense.
func Members(data []byte, i int, fn func(key, value Span) bool) {
	members(data, i, fn)
}

// Elements is Members for the array that opens at data[i] ('['): fn gets the span
// of each element.
func Elements(data []byte, i int, fn func(value Span) bool) {
	walkArray(data, i, func(vs int) (int, bool) {
		ve := SkipValue(data, vs)
		return ve, ve >= 0 && fn(Span{vs, ve})
	})
}

// ScanObject walks the object that opens at data[i] ('{'), checking the bytes
// between its members, and returns its members in order and the index after it. ok
// is false when the object is malformed, or a key is escaped, holds a control or
// non-ASCII byte, or occurs twice: a caller that gets false reads the input another
// way (the request-body fast path leaves such a body to the full reader, which
// decides what it means). Values are not checked.
func ScanObject(data []byte, i int) (ms []Member, end int, ok bool) {
	end, ok = members(data, i, func(k, v Span) bool {
		key := data[k.Start+1 : k.End-1]
		for _, c := range key {
			if c < 0x20 || c >= 0x80 || c == '\\' {
				return false
			}
		}
		for _, m := range ms {
			if m.Key == string(key) {
				return false
			}
		}
		ms = append(ms, Member{string(key), v})
		return true
	})
	if !ok {
		return nil, 0, false
	}
	return ms, end, true
}

// ScanArray returns the spans of the elements of the array that opens at data[i]
// ('['), and the index after it, checking the bytes between elements; ok is false
// when it is malformed. Elements are not checked.
func ScanArray(data []byte, i int) (elems []Span, end int, ok bool) {
	end, ok = walkArray(data, i, func(vs int) (int, bool) {
		ve := SkipValue(data, vs)
		if ve < 0 {
			return 0, false
		}
		elems = append(elems, Span{vs, ve})
		return ve, true
	})
	if !ok {
		return nil, 0, false
	}
	return elems, end, true
}

// ScanArrayRest continues ScanArray after an element of an array that ends at
// data[i]: it returns the spans of the elements after it and the index after the
// array, checking the bytes between them; ok is false when they are malformed.
// Elements are not checked.
func ScanArrayRest(data []byte, i int) (elems []Span, end int, ok bool) {
	j, more, ok := after(data, i, ']')
	for ok && more {
		ve := SkipValue(data, j)
		if ve < 0 {
			return nil, 0, false
		}
		elems = append(elems, Span{j, ve})
		j, more, ok = after(data, ve, ']')
	}
	if !ok {
		return nil, 0, false
	}
	return elems, j, true
}

// Line returns the 1-based line of byte offset off in data (clamped to data).
func Line(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}
