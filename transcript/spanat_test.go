package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// checkSpanAt compares spanAt and setString on the valid JSON b and path p with
// gjson.Get and sjson.SetBytesOptions (what Rewrite called before spanAt); it
// reports whether spanAt answered (exact).
func checkSpanAt(t *testing.T, b []byte, p string) bool {
	t.Helper()
	start, end, found, exact := spanAt(b, p)
	if !exact {
		return false
	}
	r := gjson.GetBytes(b, p)
	if found != r.Exists() {
		t.Fatalf("path %q in %.200q: spanAt found=%v, gjson %v", p, b, found, r.Exists())
	}
	if !found {
		return true
	}
	if start != r.Index || string(b[start:end]) != r.Raw {
		t.Fatalf("path %q in %.200q: spanAt %d..%d %.80q, gjson at %d %.80q", p, b, start, end, b[start:end], r.Index, r.Raw)
	}
	for _, s := range []string{"", "S", `[pruned: Bash ls; recall("o_7f3a") restores it] <&>`, "é\x7f\n"} {
		want, werr := sjson.SetBytesOptions(b, p, s, setOpts)
		got, gerr := setString(b, p, s)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("path %q in %.200q, set %q: setString %.200q (%v), sjson %.200q (%v)", p, b, s, got, gerr, want, werr)
		}
	}
	return true
}

// jsonPaths returns the gjson paths of the values in the JSON value r (prefix: its
// own path), found with gjson's ForEach, up to depth levels and max paths, each also
// with a component that names nothing appended.
func jsonPaths(r gjson.Result, prefix string, depth int, paths []string, max int) []string {
	if depth == 0 || !r.IsObject() && !r.IsArray() {
		return paths
	}
	i := 0
	r.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		if r.IsArray() {
			key = strconv.Itoa(i)
		}
		i++
		p := key
		if prefix != "" {
			p = prefix + "." + key
		}
		paths = append(paths, p, p+".zz", p+".0")
		paths = jsonPaths(v, p, depth-1, paths, max)
		return len(paths) < max
	})
	return paths
}

// TestSpanAtMatchesGjson compares spanAt with gjson (and setString with sjson) for
// every path of every JSON document in ../testdata and every line of the JSONL
// sessions in ../shared/sessions (their first 200 lines), and on edge cases.
func TestSpanAtMatchesGjson(t *testing.T) {
	cases := []struct {
		doc, path string
		exact     bool
	}{
		{`{"a":{"x":1},"a":{"b":2}}`, "a.b", true}, // gjson follows the second "a"
		{`{"a":"s","a":{"b":[1,{"c":"d"}]}}`, "a.b.1.c", true},
		{`{"a":[1,2]}`, "a.x", true},   // a key on an array: nothing
		{`{"a":[1,2]}`, "a.01", false}, // gjson reads 01 as 1
		{`{"a":[1,2]}`, "a.#", false},  // gjson's array length
		{`{"a\u0062":1}`, "ab", false}, // an escaped key
		{`{"a":1}`, "a*", false},       // a wildcard
		{` [ {"a" : "x\"y" } , 2 ]`, "0.a", true},
		{`{"0":{"1":true}}`, "0.1", true}, // digits on an object are keys
		{`{"a":{"b":null}}`, "a.b", true},
		{`{"a":{"b":-1.5e3}}`, "a.b", true},
		{`"x"`, "a", false},
	}
	for _, c := range cases {
		if got := checkSpanAt(t, []byte(c.doc), c.path); got != c.exact {
			t.Errorf("%s %q: exact=%v, want %v", c.doc, c.path, got, c.exact)
		}
	}

	var docs [][]byte
	files, _ := filepath.Glob("../testdata/*/*.json")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && json.Valid(b) {
			docs = append(docs, b)
		}
	}
	lines, _ := filepath.Glob("../../shared/sessions/*/*.jsonl")
	for _, f := range lines {
		docs = append(docs, validLines(t, f, 200)...)
	}
	if len(docs) < 100 {
		t.Fatalf("only %d documents found", len(docs))
	}
	checked := 0
	for _, b := range docs {
		for _, p := range jsonPaths(gjson.ParseBytes(b), "", 7, nil, 3000) {
			if checkSpanAt(t, b, p) {
				checked++
			}
		}
	}
	if checked < 10000 {
		t.Fatalf("spanAt answered only %d paths", checked)
	}
	t.Logf("%d documents, %d paths compared", len(docs), checked)
}

// validLines returns the first n lines of the file that are valid JSON.
func validLines(t *testing.T, path string, n int) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for i := 0; i < n && sc.Scan(); i++ {
		if b := bytes.TrimSpace(sc.Bytes()); json.Valid(b) {
			out = append(out, bytes.Clone(b))
		}
	}
	return out
}

// FuzzSpanAt compares spanAt and setString with gjson and sjson on any valid JSON
// and any path.
func FuzzSpanAt(f *testing.F) {
	f.Add([]byte(`{"a":{"x":1},"a":{"b":2}}`), "a.b")
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"a\"b"}]}]}]}`), "messages.0.content.0.content.0.text")
	f.Add([]byte(`[[],{},"",0,{"k":[null]}]`), "4.k.0")
	f.Fuzz(func(t *testing.T, b []byte, p string) {
		if !json.Valid(b) || strings.Count(p, ".") > 20 {
			return
		}
		checkSpanAt(t, b, p)
	})
}
