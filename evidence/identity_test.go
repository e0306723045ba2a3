package evidence

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"testing"

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
