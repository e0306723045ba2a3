package transcript

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A proxy may reuse a request body's buffer for a later request once the session
// read from it is done with (server's body pool). So nothing Read makes of a request
// body may point into it: neither the session (its messages, calls, outputs) nor
// what the MessageCache keeps for later bodies (templates, the body memory). For
// every request body case of every API format: the session read from a copy dumps
// the same after the copy is overwritten, and the same body read again through the
// cache (the templates and the memory made from the overwritten copy) reads as
// the full path reads it. Rewrite is the one exception by contract: it works on
// the body and is done before the buffer is given back.
func TestReadKeepsNoBodyBytes(t *testing.T) {
	cases := bodyCases(t)
	cases = append(cases,
		bodyCase{"responses", FormatResponses, []byte(codexBody), true},
		bodyCase{"gemini", FormatGeminiAPI, []byte(geminiBody), true})
	for _, bc := range cases {
		t.Run(bc.name, func(t *testing.T) {
			c := NewMessageCache(0)
			buf := bytes.Clone(bc.data)
			s1, err := Read("body", buf, Options{Format: bc.format, Cache: c})
			if err != nil {
				return // a bad body keeps nothing: it is not forwarded as read
			}
			before := bodyDump(s1)
			for i := range buf {
				buf[i] = 'x'
			}
			// The dump's first line hashes Session.raw, which is the body itself.
			if d := cmp.Diff(before[1:], bodyDump(s1)[1:]); d != "" {
				t.Fatalf("the session changed with the body's buffer (-before +after):\n%s", d)
			}
			want, err := Read("body", bytes.Clone(bc.data), Options{Format: bc.format})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Read("body", bytes.Clone(bc.data), Options{Format: bc.format, Cache: c})
			if err != nil {
				t.Fatal(err)
			}
			if d := bodyDiff(want, got); d != "" {
				t.Fatalf("the cache kept bytes of the overwritten body (-uncached +cached):\n%s", d)
			}
			// And the next turn, which the body memory reads from its copy.
			if bc.format == FormatAnthropic {
				next := append(bytes.Clone(bc.data[:bytes.LastIndexByte(bc.data, ']')]), []byte(`,{"role":"user","content":"go on"}]}`)...)
				if _, err := Read("next", next, Options{Format: bc.format}); err != nil {
					return // the body's tail is not the messages array's end
				}
				want, _ := Read("next", bytes.Clone(next), Options{Format: bc.format})
				got, err := Read("next", next, Options{Format: bc.format, Cache: c})
				if err != nil {
					t.Fatal(err)
				}
				if d := bodyDiff(want, got); d != "" {
					t.Fatalf("next turn through the cache (-uncached +cached):\n%s", d)
				}
			}
		})
	}
}
