package jsonscan

import (
	"bytes"
	"unicode/utf8"
)

// Skeleton limits, in bytes of the input (SkeletonOf).
const (
	// SkeletonValue is the size up to which a value is kept whole.
	SkeletonValue = 2 << 10
	// SkeletonArray is how much of an array's leading elements is kept (each
	// element condensed first); the elements after that are left out.
	SkeletonArray = 16 << 10
	// SkeletonDepth is how deep containers are condensed; deeper ones that are
	// too large become {} or [].
	SkeletonDepth = 4
	// SkeletonMax bounds the whole skeleton; members and elements after it are
	// left out.
	SkeletonMax = 1 << 20
	// SkeletonLines is how many values of a JSONL file the skeleton condenses.
	SkeletonLines = 8
)

// SkeletonOf returns a condensed copy of the JSON values at the start of data (a
// document, or the first SkeletonLines lines of a JSONL file), one a line, for
// format detection when the telling keys lie beyond the first bytes: every key of
// each root object and of the objects inside it (to SkeletonDepth) in document
// order, values up to SkeletonValue bytes whole, longer strings cut to that size
// (on a rune boundary and outside an escape, and closed), arrays kept to their
// leading elements (condensed, SkeletonArray bytes at most). Each line of the
// result is valid JSON that ScanHead reads as Complete, and its size is bounded by
// SkeletonMax plus the closing brackets. The scan reads each value once, following
// only strings and brackets (SkipValue). ok is false when data does not start with
// an object or array that ends and is well formed: nothing can be said of its keys.
func SkeletonOf(data []byte) (skel []byte, ok bool) {
	var b bytes.Buffer
	i := SkipBlank(data, 0)
	for n := 0; n < SkeletonLines && i < len(data) && b.Len() < SkeletonMax; n++ {
		if data[i] != '{' && data[i] != '[' {
			break
		}
		e := SkipValue(data, i)
		if e < 0 {
			break
		}
		start := b.Len()
		if n > 0 {
			b.WriteByte('\n')
		}
		if !condense(&b, data[i:e], 0) || !ScanHead(b.Bytes()[start:]).Complete {
			b.Truncate(start)
			break
		}
		i = SkipBlank(data, e)
	}
	return b.Bytes(), b.Len() > 0
}

// condense writes the condensed form of the value v (one whole value) to b; false
// when v is malformed.
func condense(b *bytes.Buffer, v []byte, depth int) bool {
	if len(v) <= SkeletonValue {
		b.Write(v)
		return true
	}
	switch v[0] {
	case '"':
		b.Write(cutString(v, SkeletonValue))
		return true
	case '{':
		if depth >= SkeletonDepth {
			b.WriteString("{}")
			return true
		}
		return condenseObject(b, v, depth)
	case '[':
		if depth >= SkeletonDepth {
			b.WriteString("[]")
			return true
		}
		return condenseArray(b, v, depth)
	}
	b.Write(v) // a number or literal this long is malformed; ScanHead will say so
	return true
}

// condenseObject writes every member of the object v, values condensed.
func condenseObject(b *bytes.Buffer, v []byte, depth int) bool {
	b.WriteByte('{')
	n := 0
	_, ok := members(v, 0, func(k, val Span) bool {
		if b.Len() >= SkeletonMax {
			return true // left out; the scan still checks the rest
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.Write(v[k.Start:k.End])
		b.WriteByte(':')
		return condense(b, v[val.Start:val.End], depth+1)
	})
	b.WriteByte('}')
	return ok
}

// condenseArray writes the leading elements of the array v, condensed, up to
// SkeletonArray bytes of output.
func condenseArray(b *bytes.Buffer, v []byte, depth int) bool {
	b.WriteByte('[')
	start, n := b.Len(), 0
	_, ok := walkArray(v, 0, func(vs int) (int, bool) {
		ve := SkipValue(v, vs)
		if ve < 0 {
			return 0, false
		}
		if b.Len()-start >= SkeletonArray || b.Len() >= SkeletonMax {
			return ve, true
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		return ve, condense(b, v[vs:ve], depth+1)
	})
	b.WriteByte(']')
	return ok
}

// cutString returns the JSON string s (quotes included) cut to about max bytes of
// content: not inside an escape sequence nor a UTF-8 rune, and closed.
func cutString(s []byte, max int) []byte {
	body := s[1 : len(s)-1]
	if len(body) <= max {
		return s
	}
	cut := max
	// Back off to the start of an escape sequence that the cut would split.
	for j := cut - 1; j >= 0 && j >= cut-6; j-- {
		if body[j] != '\\' {
			continue
		}
		n := 0 // backslashes ending at j
		for p := j; p >= 0 && body[p] == '\\'; p-- {
			n++
		}
		if n%2 == 1 { // body[j] opens an escape
			width := 2
			if j+1 < len(body) && body[j+1] == 'u' {
				width = 6
			}
			if j+width > cut {
				cut = j
			}
			break
		}
	}
	for cut > 0 && !utf8.RuneStart(body[cut]) {
		cut--
	}
	out := make([]byte, 0, cut+2)
	out = append(out, '"')
	out = append(out, body[:cut]...)
	return append(out, '"')
}
