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
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s in %s", ErrInvalidAnswer, fmt.Sprintf(format, args...), snippet(content))
	}
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k] = i
	}
	dec := json.NewDecoder(strings.NewReader(content))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, bad("not JSON (%v)", err)
	}
	if tok != json.Delim('{') {
		return nil, bad("not a JSON object (starts with %v)", tok)
	}
	vals := make([]int, len(keys))
	seen := make([]bool, len(keys))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("not JSON (%v)", err)
		}
		key, _ := tok.(string)
		i, ok := index[key]
		if !ok {
			return nil, bad("unknown id %q", key)
		}
		if seen[i] {
			return nil, bad("id %q repeated", key)
		}
		seen[i] = true
		tok, err = dec.Token()
		if err != nil {
			return nil, bad("not JSON (%v)", err)
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, bad("value of %q is %v, not a number", key, describe(tok))
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || f < 0 || f > 100 {
			return nil, bad("value of %q is %s, not an integer from 0 to 100", key, num)
		}
		vals[i] = int(f)
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("not JSON (%v)", err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, bad("text after the object (%v)", err)
		}
		return nil, bad("text after the object (%v)", describe(tok))
	}
	var missing []string
	for i, ok := range seen {
		if !ok {
			missing = append(missing, keys[i])
		}
	}
	if len(missing) > 0 {
		return nil, bad("ids missing: %s", strings.Join(missing, ", "))
	}
	return vals, nil
}

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
