package evidence

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// oldCmdHash is cmdHash as it was before the compact-JSON fast path: the reference.
func oldCmdHash(c *transcript.ToolCall) uint64 {
	h := fnv.New64a()
	h.Write([]byte(c.Name))
	h.Write([]byte{0})
	var buf bytes.Buffer
	if err := json.Compact(&buf, c.Args); err == nil {
		h.Write(buf.Bytes())
	} else {
		h.Write(bytes.TrimSpace(c.Args))
	}
	return h.Sum64()
}

// argCases are arguments at the edges of the fast path: white space inside and
// outside strings, escaped quotes and backslashes, text that is not JSON, Unicode
// spaces at the ends, unterminated strings.
var argCases = []string{
	``, ` `, `{}`, `{"a":1}`, `{"a": 1}`, " {\"a\":1}", "{\"a\":1}\n", `{"a":"x y"}`,
	`{"a":"x\" y"}`, `{"a":"x\\"," b":2}`, `{"a":"x\\" ,"b":2}`, `not json`, `not json `,
	"\u00a0{\"a\":1}", "{\"a\":1}\u0085", `{"a":"unterminated `, `"abc`, `"abc `, `[1, 2]`,
	`[1,2]`, "{\"a\":\"tab\there\"}", "{\"a\":\"\\u0020\"}", `{"a":1}{"b":2}`, `{"a":1} {"b":2}`,
	"\v{}", "{}\f", `{"a":"\\\"" }`,
}

func TestCmdHashMatchesOld(t *testing.T) {
	var calls []*transcript.ToolCall
	for _, a := range argCases {
		calls = append(calls, &transcript.ToolCall{Name: "Bash", Args: json.RawMessage(a)})
	}
	files := sessionfiles.Sample("../../shared")
	real := 0
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			continue
		}
		for _, m := range s.Messages {
			calls = append(calls, m.Calls...)
			real += len(m.Calls)
		}
	}
	if real < 5000 {
		t.Errorf("only %d real calls read", real)
	}
	var buf bytes.Buffer
	for _, c := range calls {
		if got, want := cmdHashOf(c, &buf), oldCmdHash(c); got != want {
			t.Errorf("cmdHash(%s %.80q) = %x, the old hash %x", c.Name, c.Args, got, want)
		}
	}
}

func FuzzCmdHash(f *testing.F) {
	for _, a := range argCases {
		f.Add(a)
	}
	var buf bytes.Buffer
	f.Fuzz(func(t *testing.T, args string) {
		c := &transcript.ToolCall{Name: "t", Args: json.RawMessage(args)}
		if got, want := cmdHashOf(c, &buf), oldCmdHash(c); got != want {
			t.Errorf("cmdHash(%q) = %x, the old hash %x", args, got, want)
		}
	})
}

// emission is one call of an emitFunc.
type emission struct {
	name  string
	group int32
	flags uint8
}

// emissions returns what visit emits for text, in order, and the group counter after.
func emissions(visit func(string, *int32, emitFunc), text string) ([]emission, int32) {
	var out []emission
	var g int32
	visit(text, &g, func(name string, group int32, flags uint8) {
		out = append(out, emission{name, group, flags})
	})
	return out, g
}

// tokenizerCases are texts at the edges of the word-run fast path: runs of word
// bytes at MinNameLen and MaxNameLen, punctuation at their ends, drive paths,
// quotes and fences around words, bytes >= 0x80 inside runs.
var tokenizerCases = []string{
	"", "abcd", "abc", "abcd.", ".abcd", "-abcd-", "./abcd", "../abcd/", "a/b/cdef.go",
	"C:\\x\\yyyy", "C:/x/yyyy", "xC:\\abc", strings.Repeat("a", MaxNameLen), strings.Repeat("b", MaxNameLen+1),
	"Found the Config in parseConfig and MAX_SIZE", "`code word` 'quoted' \"double\"",
	"```\nfenced words here\n```\nprose words there", "naïve café wordsé", "~/home~", "1234 12345 3.14159",
	"word_with_under ABCD Abcd aBcd", "it's don't \"unterminated", "x\"abcd\"y `abcd`",
}

func TestVisitNamesMatchesRef(t *testing.T) {
	texts := append([]string(nil), tokenizerCases...)
	for _, f := range sessionfiles.Sample("../../shared") {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			continue
		}
		for _, m := range s.Messages {
			texts = append(texts, m.Text)
			for _, o := range m.Outputs {
				texts = append(texts, o.Text)
			}
			for _, c := range m.Calls {
				texts = append(texts, string(c.Args))
			}
		}
	}
	if len(texts) < 20000 {
		t.Errorf("only %d texts read", len(texts))
	}
	names := 0
	for _, x := range texts {
		got, gg := emissions(visitNames, x)
		want, wg := emissions(refVisitNames, x)
		names += len(want)
		if d := cmp.Diff(want, got, cmp.AllowUnexported(emission{})); d != "" || gg != wg {
			t.Fatalf("visitNames(%.200q) differs from the reference (groups %d, want %d):\n%s", x, gg, wg, d)
		}
	}
	t.Logf("%d texts, %d names emitted", len(texts), names)
}

func FuzzVisitNames(f *testing.F) {
	for _, x := range tokenizerCases {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, gg := emissions(visitNames, text)
		want, wg := emissions(refVisitNames, text)
		if d := cmp.Diff(want, got, cmp.AllowUnexported(emission{})); d != "" || gg != wg {
			t.Errorf("visitNames(%q) differs from the reference (groups %d, want %d):\n%s", text, gg, wg, d)
		}
	})
}
