package rules

import (
	"encoding/json"
	"testing"
)

// A lone byte 0x80 (the first byte that is not ASCII: a continuation byte with
// nothing to continue) in a string of the arguments, value or key, is read as
// json.Unmarshal reads it, U+FFFD ("\xef\xbf\xbd"): the arguments are the same as
// those with U+FFFD written out, as encoding/json compares them.
func TestCanonArgsReadsLoneContinuationByteAsReplacement(t *testing.T) {
	for in, want := range map[string]string{
		"{\"s\":\"a\x80b\"}":  "{\"s\":\"a\xef\xbf\xbdb\"}",
		"{\"k\x80\":1}":       "{\"k\xef\xbf\xbd\":1}",
		"[\"\x80\",\"\x80\"]": "[\"\xef\xbf\xbd\",\"\xef\xbf\xbd\"]",
	} {
		if got := canonArgs(json.RawMessage(in)); got != want {
			t.Errorf("canonArgs(%q) = %q; want %q", in, got, want)
		}
		if got := canonArgsByTree(json.RawMessage(in)); got != want {
			t.Errorf("encoding/json's route on %q = %q; want %q", in, got, want)
		}
	}
}

// Escapes in the arguments are read as encoding/json reads them whatever letters
// stand around them: in "at\/" the "t" after "a" is a letter, not a tab, and
// the escaped slash is a slash. Each canonical form is written out by hand.
func TestCanonArgsReadsEscapesAmongEscapeLetters(t *testing.T) {
	for in, want := range map[string]string{
		`{"s":"at\/"}`:       `{"s":"at/"}`,
		`{"s":"bn\/rf"}`:     `{"s":"bn/rf"}`,
		`{"s":"\"quoted\""}`: `{"s":"\"quoted\""}`,
		`{"nt\/":1}`:         `{"nt/":1}`,
	} {
		if got := canonArgs(json.RawMessage(in)); got != want {
			t.Errorf("canonArgs(%q) = %q; want %q", in, got, want)
		}
		if got := canonArgsByTree(json.RawMessage(in)); got != want {
			t.Errorf("encoding/json's route on %q = %q; want %q", in, got, want)
		}
	}
}

// A 16-digit integer past 2^53 is read as float64 rounds it, as encoding/json
// reads it: 9999999999999999 is the float64 1e16, written 10000000000000000, so
// the two are the same argument (worked out: the float64 nearest to it is 10^16,
// whose neighbours are 2 apart there).
func TestCanonArgsReadsLongIntegersAsFloat64(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":9999999999999999}`:  `{"id":10000000000000000}`,
		`{"id":-9999999999999999}`: `{"id":-10000000000000000}`,
		`{"id":999999999999999}`:   `{"id":999999999999999}`,
	} {
		if got := canonArgs(json.RawMessage(in)); got != want {
			t.Errorf("canonArgs(%q) = %q; want %q", in, got, want)
		}
		if got := canonArgsByTree(json.RawMessage(in)); got != want {
			t.Errorf("encoding/json's route on %q = %q; want %q", in, got, want)
		}
	}
}

// A string of nothing but HTML characters ("<", ">", "&": shell operators, say)
// is written escaped, as encoding/json writes it, like any string that holds them.
func TestCanonArgsEscapesStringsOfOnlyHTMLCharacters(t *testing.T) {
	for in, want := range map[string]string{
		`{"op":"<"}`:  `{"op":"\u003c"}`,
		`{"op":">>"}`: `{"op":"\u003e\u003e"}`,
		`{"op":"&&"}`: `{"op":"\u0026\u0026"}`,
		`{"<":1}`:     `{"\u003c":1}`,
	} {
		if got := canonArgs(json.RawMessage(in)); got != want {
			t.Errorf("canonArgs(%q) = %q; want %q", in, got, want)
		}
		if got := canonArgsByTree(json.RawMessage(in)); got != want {
			t.Errorf("encoding/json's route on %q = %q; want %q", in, got, want)
		}
	}
}
