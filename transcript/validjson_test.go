package transcript

import (
	"encoding/json"
	"strings"
	"testing"
)

// validJSONCases are values on both sides of the grammar's edges (numbers,
// escapes, literals, whitespace, trailing bytes, control characters, invalid
// UTF-8, nesting around encoding/json's limit), each with json.Valid's verdict,
// checked by hand against RFC 8259.
var validJSONCases = []struct {
	in   string
	want bool
}{
	{``, false}, {` `, false}, {`{}`, true}, {` [ ] `, true}, {`{"a":1}`, true},
	{`{"a":1,}`, false}, {`[1,]`, false}, {`[,1]`, false}, {`{"a" 1}`, false}, {`{1:2}`, false},
	{`0`, true}, {`-0`, true}, {`01`, false}, {`-`, false}, {`1.`, false}, {`.5`, false},
	{`1.5e+3`, true}, {`1e`, false}, {`1E-0`, true}, {`+1`, false}, {`1x`, false},
	{`true`, true}, {`tru`, false}, {`truex`, false}, {`null`, true}, {`nul`, false}, {`false`, true},
	{`"a\u00e9\n"`, true}, {`"\u00g0"`, false}, {`"\x"`, false}, {"\"a\tb\"", false},
	{"\"\xff\xfe\"", true}, {`"abc`, false}, {`{"a":"b"} x`, false}, {"{}\r\n\t", true},
	{"\v{}", false}, {`{"a":[1,{"b":null}]}`, true}, {`[1 2]`, false}, {`{"a":1 "b":2}`, false},
	{strings.Repeat("[", 9999) + strings.Repeat("]", 9999), true},
	{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), true},
	{strings.Repeat("[", 10001) + strings.Repeat("]", 10001), false},
	{`[` + strings.Repeat(`"[{",`, 10000) + `1]`, true},
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range validJSONCases {
		in := []byte(c.in)
		if got := json.Valid(in); got != c.want {
			t.Fatalf("json.Valid(%.40q) = %v, the table says %v", c.in, got, c.want)
		}
		if got := validJSON(in); got != c.want {
			t.Errorf("validJSON(%.40q) = %v, want %v (json.Valid's)", c.in, got, c.want)
		}
	}
}

// FuzzValidJSON checks that validJSON gives json.Valid's verdict on any input.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validJSONCases {
		if len(c.in) < 200 {
			f.Add([]byte(c.in))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := validJSON(in), json.Valid(in); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", in, got, want)
		}
	})
}
