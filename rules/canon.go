package rules

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// canonArgs returns JSON arguments in a canonical form, so the same arguments
// written differently compare equal: exactly what json.Marshal gives for the value
// json.Unmarshal decodes into an `any` (object keys sorted, a repeated key's last
// value kept, no insignificant space, numbers as float64 prints them, strings with
// encoding/json's escapes); non-JSON arguments are used as they are (trimmed).
//
// It makes the form in one walk over the checked text instead of building the
// `any` tree and encoding it (the tree cost 10% of the advisor's indexing in a
// replay): plain strings and integers of up to 15 digits are copied as they are,
// strings are decoded and encoded as encoding/json does, and only strings with \u
// escapes and other numbers go through encoding/json (FuzzCanonArgs compares the
// two routes).
func canonArgs(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if !json.Valid(t) {
		return string(t)
	}
	c := canonizer{in: t}
	c.skipSpace()
	if !c.value() || c.fail {
		return string(t)
	}
	return string(c.out)
}

// canonizer walks text json.Valid accepted, appending the canonical form to out;
// fail is set when a number does not fit a float64 (json.Unmarshal refuses it).
type canonizer struct {
	in   []byte
	pos  int
	out  []byte
	buf  []byte // a string's decoded text
	fail bool
}

// member is one key and value of an object, the value in canonical form (a span of
// the canonizer's out).
type member struct {
	key        string
	start, end int
}

// peek returns the byte at pos, or 0 past the end of the text (outside a string,
// text json.Valid accepted holds no 0 byte, so 0 matches no case of the walk).
func (c *canonizer) peek() byte {
	if c.pos < len(c.in) {
		return c.in[c.pos]
	}
	return 0
}

func (c *canonizer) skipSpace() {
	for {
		switch c.peek() {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at pos; false when the text is not
// what json.Valid promised (never, but the walk stays safe).
func (c *canonizer) value() bool {
	switch b := c.peek(); {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		_, ok := c.str(true)
		return ok
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	default:
		return c.number()
	}
}

func (c *canonizer) literal(s string) bool {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(s)) {
		return false
	}
	c.pos += len(s)
	c.out = append(c.out, s...)
	return true
}

// object appends the members sorted by their decoded keys (as encoding/json sorts a
// map's), keeping the last of a repeated key (as json.Unmarshal into a map does).
func (c *canonizer) object() bool {
	c.pos++ // {
	start := len(c.out)
	var ms []member
	for {
		c.skipSpace()
		if c.peek() == '}' {
			c.pos++
			break
		}
		key, ok := c.str(false)
		if !ok {
			return false
		}
		c.skipSpace()
		if c.peek() != ':' {
			return false
		}
		c.pos++
		c.skipSpace()
		vs := len(c.out)
		if !c.value() {
			return false
		}
		ms = append(ms, member{key: key, start: vs, end: len(c.out)})
		c.skipSpace()
		if c.peek() == ',' {
			c.pos++
		}
	}
	// stable, so of equal keys the last written is last: kept by the loop below
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	values := slices.Clone(c.out[start:])
	c.out = append(c.out[:start], '{')
	for i, m := range ms {
		if i+1 < len(ms) && ms[i+1].key == m.key {
			continue
		}
		if c.out[len(c.out)-1] != '{' {
			c.out = append(c.out, ',')
		}
		c.out = appendString(c.out, []byte(m.key))
		c.out = append(c.out, ':')
		c.out = append(c.out, values[m.start-start:m.end-start]...)
	}
	c.out = append(c.out, '}')
	return true
}

func (c *canonizer) array() bool {
	c.pos++ // [
	c.out = append(c.out, '[')
	for n := 0; ; n++ {
		c.skipSpace()
		if c.peek() == ']' {
			c.pos++
			break
		}
		if n > 0 {
			c.out = append(c.out, ',')
		}
		if !c.value() {
			return false
		}
		c.skipSpace()
		if c.peek() == ',' {
			c.pos++
		}
	}
	c.out = append(c.out, ']')
	return true
}

// str reads the string at pos and, with emit, appends its canonical form; without
// emit (a key) it returns the string decoded. A string of printable ASCII without
// '"', '\\', '<', '>' or '&' is its own canonical form; one whose escapes are all
// of one character is decoded here; one with \u escapes (or, for a key, invalid
// UTF-8) goes through encoding/json.
func (c *canonizer) str(emit bool) (string, bool) {
	if c.peek() != '"' {
		return "", false
	}
	plain, esc := true, false
	end := c.pos + 1
	for ; end < len(c.in); end++ {
		b := c.in[end]
		if b == '"' {
			break
		}
		if b == '\\' {
			esc = true
			end++ // the escaped byte (json.Valid checked the escape)
			continue
		}
		if b < 0x20 || b >= utf8.RuneSelf || b == '<' || b == '>' || b == '&' {
			plain = false
		}
	}
	if end >= len(c.in) {
		return "", false
	}
	tok := c.in[c.pos : end+1]
	c.pos = end + 1
	if plain && !esc {
		if emit {
			c.out = append(c.out, tok...)
			return "", true
		}
		return string(tok[1 : len(tok)-1]), true
	}
	s, ok := c.unescape(tok[1 : len(tok)-1])
	if !ok || (!emit && !utf8.Valid(s)) {
		var v string
		if err := json.Unmarshal(tok, &v); err != nil {
			return "", false
		}
		s = []byte(v)
	}
	if emit {
		c.out = appendString(c.out, s)
		return "", true
	}
	return string(s), true
}

// unescape decodes the one-character escapes of a string's text; false when it
// holds a \u escape.
func (c *canonizer) unescape(in []byte) ([]byte, bool) {
	if bytes.IndexByte(in, '\\') < 0 {
		return in, true
	}
	c.buf = c.buf[:0]
	for i := 0; i < len(in); i++ {
		b := in[i]
		if b != '\\' || i+1 >= len(in) {
			c.buf = append(c.buf, b)
			continue
		}
		i++
		switch in[i] {
		case '"', '\\', '/':
			c.buf = append(c.buf, in[i])
		case 'b':
			c.buf = append(c.buf, '\b')
		case 'f':
			c.buf = append(c.buf, '\f')
		case 'n':
			c.buf = append(c.buf, '\n')
		case 'r':
			c.buf = append(c.buf, '\r')
		case 't':
			c.buf = append(c.buf, '\t')
		default:
			return nil, false
		}
	}
	return c.buf, true
}

// appendString appends s, decoded from a JSON string, as encoding/json encodes it (its appendString with
// HTML escaping): '"' and '\\' and \b \f \n \r \t escaped by one character, other
// control bytes and '<', '>', '&' as \u00XX, U+2028 and U+2029 as \u2028 and
// \u2029; each byte of invalid UTF-8 becomes U+FFFD, as json.Unmarshal replaces it
// before encoding/json sees the string.
func appendString(out, s []byte) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			out = append(out, s[start:i]...)
			switch b {
			case '"', '\\':
				out = append(out, '\\', b)
			case '\b':
				out = append(out, '\\', 'b')
			case '\f':
				out = append(out, '\\', 'f')
			case '\n':
				out = append(out, '\\', 'n')
			case '\r':
				out = append(out, '\\', 'r')
			case '\t':
				out = append(out, '\\', 't')
			default:
				out = append(out, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, s[start:i]...)
			out = append(out, "\uFFFD"...) // json.Unmarshal's replacement
		case r == '\u2028' || r == '\u2029':
			out = append(out, s[start:i]...)
			out = append(out, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// exactInteger matches an integer of up to 15 digits, without leading zeros: a
// float64 holds it exactly and encoding/json prints it digit for digit ("-0"
// included, which it prints "-0").
var exactInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,14})$`)

// number appends the number at pos as encoding/json prints its float64: an integer
// exactInteger matches is copied; any other is parsed and printed by encoding/json.
func (c *canonizer) number() bool {
	end := c.pos
	for end < len(c.in) && strings.IndexByte("+-0123456789.eE", c.in[end]) >= 0 {
		end++
	}
	tok := c.in[c.pos:end]
	if end == c.pos {
		return false
	}
	c.pos = end
	if exactInteger.Match(tok) {
		c.out = append(c.out, tok...)
		return true
	}
	var f float64
	if err := json.Unmarshal(tok, &f); err != nil {
		c.fail = true // out of float64's range: json.Unmarshal would refuse the whole
		return true
	}
	enc, err := json.Marshal(f)
	if err != nil {
		c.fail = true
		return true
	}
	c.out = append(c.out, enc...)
	return true
}
