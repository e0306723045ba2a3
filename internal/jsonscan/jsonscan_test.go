package jsonscan

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestSkipValue(t *testing.T) {
	tests := []struct {
		in   string
		want int // end, -1 when none
	}{
		{`"abc" x`, 5},
		{`"a\"b" x`, 6},
		{`"a\\" x`, 5},
		{`"a\\\"" x`, 7},
		{`"\\\\" x`, 6},
		{`"unterminated\"`, -1},
		{`{"a":[1,{"b":"}"}]} x`, 19},
		{`[[],[[]]],`, 9},
		{`[1,2`, -1},
		{`123,`, 3},
		{`true}`, 4},
		{`null`, 4},
		{`}`, -1},
		{``, -1},
	}
	for _, tt := range tests {
		if got := SkipValue([]byte(tt.in), 0); got != tt.want {
			t.Errorf("SkipValue(%q) = %d; want %d", tt.in, got, tt.want)
		}
	}
}

// FuzzUnquote: Unquote unquotes as encoding/json does, where it does not decline,
// and declines only strings with a \u escape or invalid UTF-8.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\nb\u00e9\\"`, `"\ud83d"`, `"\u0000"`, `"x\/y"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		got, ok := Unquote(raw)
		var want string
		err := json.Unmarshal(raw, &want)
		if ok && (err != nil || got != want) {
			t.Fatalf("Unquote(%q) = %q; encoding/json %q, %v", raw, got, want, err)
		}
		if !ok && err == nil && raw[0] == '"' && raw[len(raw)-1] == '"' && utf8.Valid(raw) && !bytes.Contains(raw, []byte(`\u`)) {
			t.Fatalf("Unquote declined %q", raw)
		}
	})
}

// checkValue compares the decoders on the valid JSON value raw with encoding/json,
// and recurses into objects and arrays; it returns how many values it checked.
func checkValue(t *testing.T, raw []byte) int {
	t.Helper()
	// json.Valid, not Unmarshal into any: a number out of float64's range
	// (1E700) is valid JSON that Unmarshal into any refuses.
	if !json.Valid(raw) {
		t.Fatalf("not valid JSON: %.200q", raw)
	}
	n := 1
	var s string
	isString := Kind(raw) == '"' && json.Unmarshal(raw, &s) == nil
	if got, ok := String(raw); ok != isString || ok && got != s {
		t.Fatalf("String(%.200q) = %q, %v; encoding/json %q, %v", raw, got, ok, s, isString)
	}
	var obj map[string]json.RawMessage
	isObj := json.Unmarshal(raw, &obj) == nil && obj != nil
	loose, ok := Loose(raw)
	if ok != isObj {
		t.Fatalf("Loose(%.200q): ok %v; encoding/json %v", raw, ok, isObj)
	}
	if isObj {
		if d := cmp.Diff(compact(t, obj), compact(t, loose)); d != "" {
			t.Fatalf("Loose(%.200q) (-encoding/json +Loose):\n%s", raw, d)
		}
		strict, problem := Object(raw)
		if dup := countKeys(raw) != len(obj); dup != (problem != "") {
			t.Fatalf("Object(%.200q): problem %q, a key repeats: %v", raw, problem, dup)
		} else if !dup && !cmp.Equal(compact(t, strict), compact(t, obj)) {
			t.Fatalf("Object(%.200q) differs from encoding/json", raw)
		}
		for _, val := range obj {
			n += checkValue(t, val)
		}
	}
	var arr []json.RawMessage
	isArr := bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) && json.Unmarshal(raw, &arr) == nil
	if got, ok := Array(raw); isArr && (!ok || len(got) != len(arr)) {
		t.Fatalf("Array(%.200q) = %d elements, %v; encoding/json %d", raw, len(got), ok, len(arr))
	} else if isArr {
		for i := range arr {
			if !bytes.Equal(bytes.TrimSpace(got[i]), bytes.TrimSpace(arr[i])) {
				t.Fatalf("Array(%.200q)[%d] = %q; encoding/json %q", raw, i, got[i], arr[i])
			}
			n += checkValue(t, arr[i])
		}
	}
	return n
}

// compact renders each value of obj compacted, for comparison.
func compact(t *testing.T, obj map[string]json.RawMessage) map[string]string {
	t.Helper()
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			t.Fatalf("value of %q is not valid JSON: %.200q", k, v)
		}
		out[k] = b.String()
	}
	return out
}

// countKeys counts the keys of the object raw as written, with encoding/json's
// tokenizer.
func countKeys(raw []byte) int {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	n := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return n
		}
		n++
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return n
		}
	}
	return n
}

// TestDecodersRealSessions compares Object, Loose, Array and String with
// encoding/json on every JSON value (recursively) of every line and document of the
// real sessions.
func TestDecodersRealSessions(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "sessions", "*", "*"))
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if json.Valid(data) {
			n += checkValue(t, data)
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			dec := json.NewDecoder(strings.NewReader(line))
			for {
				var v json.RawMessage
				if dec.Decode(&v) != nil {
					break
				}
				n += checkValue(t, v)
			}
		}
	}
	if n < 100000 {
		t.Errorf("only %d values checked", n)
	}
}

// FuzzDecoders: on any valid JSON, Object, Loose, Array and String decode as
// encoding/json does.
func FuzzDecoders(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,{"c":"d"}]}`, `{"a":1,"a":2}`, `{"t\u0079pe":"x","type":"y"}`,
		`["\ud800",{"\u00e9":null}]`, "{\"k\":\"\xff\"}", ` { "x" : [ ] } `, `"s"`, `12`, `null`, `1E700`, `{"n":[-1e999]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		checkValue(t, raw)
	})
}

// TestScanHead checks what detectors see of cut and broken heads.
func TestScanHead(t *testing.T) {
	type view struct {
		Object, Array, Complete bool
		Items                   int
		Order                   []string
		Vals                    map[string]string
		Elems                   map[string]int
		Cut                     string
	}
	see := func(h Head) view {
		v := view{Object: h.Object, Array: h.Array, Complete: h.Complete, Items: len(h.Items), Order: h.Order, Cut: h.Cut}
		if h.Object {
			v.Vals, v.Elems = map[string]string{}, map[string]int{}
			for k, x := range h.Vals {
				v.Vals[k] = string(x)
			}
			for k, x := range h.Elems {
				v.Elems[k] = len(x)
			}
		}
		return v
	}
	tests := []struct {
		head string
		want view
	}{
		{`{"a":"x","b":[1,2],"c":{"d":1}}`, view{Object: true, Complete: true, Order: []string{"a", "b", "c"},
			Vals: map[string]string{"a": `"x"`, "c": `{"d":1}`}, Elems: map[string]int{"b": 2}}},
		{`{"a":"x","b":[1,{"c":`, view{Object: true, Order: []string{"a", "b"}, Vals: map[string]string{"a": `"x"`},
			Elems: map[string]int{"b": 1}, Cut: "b"}},
		{`{"a":"long text cut`, view{Object: true, Order: []string{"a"}, Vals: map[string]string{}, Elems: map[string]int{}, Cut: "a"}},
		{`{"a":tru,"b":1}`, view{Object: true, Order: []string{"a"}, Vals: map[string]string{}, Elems: map[string]int{}, Cut: "a"}},
		{`{"a":1 "b":2}`, view{Object: true, Order: []string{"a"}, Vals: map[string]string{"a": "1"}, Elems: map[string]int{}}},
		{`{"a\u0062":1}`, view{Object: true, Complete: true, Order: []string{"ab"}, Vals: map[string]string{"ab": "1"}, Elems: map[string]int{}}},
		{`[{"x":1},{"y":[2]},{"z"`, view{Array: true, Items: 2}},
		{`[1,2]  `, view{Array: true, Complete: true, Items: 2}},
		{`[1,,2]`, view{Array: true, Items: 1}},
		{`"just a string"`, view{}},
		{`hello`, view{}},
	}
	for _, tt := range tests {
		h := ScanHead([]byte(tt.head))
		if d := cmp.Diff(tt.want, see(h)); d != "" {
			t.Errorf("ScanHead(%q) (-want +got):\n%s", tt.head, d)
		}
		if h.Complete && strings.TrimSpace(tt.head[h.End:]) != "" {
			t.Errorf("ScanHead(%q): End %d is not the end of the value", tt.head, h.End)
		}
	}
}
