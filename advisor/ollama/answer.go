package ollama

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

// ParseAnswer validates the model's content against keys and returns one value per
// key, in order. The content must be one JSON object (surrounding whitespace
// allowed) holding each key exactly once, no other key, and values that are JSON
// numbers equal to an integer in [0, 100] (JSON Schema's "integer": 40 and 40.0
// both pass; 101, -1, 1e308, 40.5, "40" and null do not). Repeated keys are caught
// by walking the tokens (encoding/json would keep the last). Errors wrap
// ErrInvalidAnswer and quote the offending part.
func ParseAnswer(content string, keys []string) ([]int, error) {
	p := newAnswerParser(content, keys)
	if err := p.open(); err != nil {
		return nil, err
	}
	for p.dec.More() {
		if err := p.entry(); err != nil {
			return nil, err
		}
	}
	if err := p.close(); err != nil {
		return nil, err
	}
	if err := p.complete(); err != nil {
		return nil, err
	}
	return p.vals, nil
}

// answerParser walks the tokens of one answer for ParseAnswer.
type answerParser struct {
	content string
	keys    []string
	index   map[string]int // key to its place in keys
	dec     *json.Decoder
	vals    []int  // by key, the values read
	seen    []bool // by key, whether it came
}

func newAnswerParser(content string, keys []string) *answerParser {
	p := &answerParser{content: content, keys: keys, index: make(map[string]int, len(keys)),
		dec: json.NewDecoder(strings.NewReader(content)), vals: make([]int, len(keys)), seen: make([]bool, len(keys))}
	for i, k := range keys {
		p.index[k] = i
	}
	p.dec.UseNumber()
	return p
}

// bad is an error wrapping ErrInvalidAnswer that says what is wrong and quotes the
// answer.
func (p *answerParser) bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s in %s", ErrInvalidAnswer, fmt.Sprintf(format, args...), snippet(p.content))
}

// open reads the '{' the answer must start with.
func (p *answerParser) open() error {
	tok, err := p.dec.Token()
	if err != nil {
		return p.bad("not JSON (%v)", err)
	}
	if tok != json.Delim('{') {
		return p.bad("not a JSON object (starts with %v)", tok)
	}
	return nil
}

// entry reads one key and its value: a key of keys not seen before, and an integer
// from 0 to 100.
func (p *answerParser) entry() error {
	tok, err := p.dec.Token()
	if err != nil {
		return p.bad("not JSON (%v)", err)
	}
	key, _ := tok.(string)
	i, ok := p.index[key]
	if !ok {
		return p.bad("unknown id %q", key)
	}
	if p.seen[i] {
		return p.bad("id %q repeated", key)
	}
	p.seen[i] = true
	tok, err = p.dec.Token()
	if err != nil {
		return p.bad("not JSON (%v)", err)
	}
	num, ok := tok.(json.Number)
	if !ok {
		return p.bad("value of %q is %v, not a number", key, describe(tok))
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || f < 0 || f > 100 {
		return p.bad("value of %q is %s, not an integer from 0 to 100", key, num)
	}
	p.vals[i] = int(f)
	return nil
}

// close reads the object's '}' and checks that nothing follows it.
func (p *answerParser) close() error {
	if _, err := p.dec.Token(); err != nil {
		return p.bad("not JSON (%v)", err)
	}
	if tok, err := p.dec.Token(); err != io.EOF {
		if err != nil {
			return p.bad("text after the object (%v)", err)
		}
		return p.bad("text after the object (%v)", describe(tok))
	}
	return nil
}

// complete checks that every key came.
func (p *answerParser) complete() error {
	var missing []string
	for i, ok := range p.seen {
		if !ok {
			missing = append(missing, p.keys[i])
		}
	}
	if len(missing) > 0 {
		return p.bad("ids missing: %s", strings.Join(missing, ", "))
	}
	return nil
}

// describe names a JSON token for an error message: null, a delimiter in quotes,
// a quoted string, or the value as printed.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return "'" + v.String() + "'"
	case string:
		return strconv.Quote(v)
	}
	return fmt.Sprint(tok)
}

// snippet quotes at most 120 characters of s for an error message.
func snippet(s string) string { return strconv.Quote(cards.Cut(s, 120)) }
