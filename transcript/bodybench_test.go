package transcript

import (
	"fmt"
	"testing"
)

// BenchmarkReadBody200k reads Anthropic bodies of 80 turns and more (bodyBig: about
// 850 KB and 230,000 o200k tokens) through one MessageCache, as the proxy does:
//
//   - steady: the next request of a conversation (one more turn, the cache_control
//     marker moved to it), 20 requests a conversation, the first of each untimed;
//   - cold: the first request of a conversation never seen (every text new to the
//     cache and the token-count cache; the cache of o200k pieces warm, as in a
//     proxy that has been serving);
//   - rewrite: Session.Rewrite of a steady request with every other result of the
//     turns before the last three stubbed (about 40 stubs, the same ones as the
//     request before plus the new ones).
//
// The bodies are built with the timer stopped.
func BenchmarkReadBody200k(b *testing.B) {
	const turns, perConversation = 80, 20
	read := func(b *testing.B, c *MessageCache, body []byte) *Session {
		s, err := Read("body", body, Options{Format: FormatAnthropic, Cache: c})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	stubsOf := func(s *Session, n int) map[string]string {
		stubs := map[string]string{}
		for k := 1; k <= n-3; k += 2 {
			stubs[fmt.Sprintf("t%d", k)] = fmt.Sprintf("[pruned: read /f%d.go, 2,700 tokens; recall(\"o_%d\") restores it]", k, k)
		}
		return stubs
	}
	// steady-recycled is steady with each session given back (Session.Recycle) once
	// rewritten, as the proxy does.
	for _, name := range []string{"steady", "steady-recycled", "rewrite"} {
		recycle := name == "steady-recycled"
		if recycle {
			name = "steady"
		}
		b.Run(map[bool]string{false: name, true: "steady-recycled"}[recycle], func(b *testing.B) {
			c := NewMessageCache(0)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				conv, n := 7000+i/perConversation, turns+1+i%perConversation
				if i%perConversation == 0 {
					s := read(b, c, bodyBig(conv, turns))
					if _, err := s.Rewrite(stubsOf(s, turns)); err != nil {
						b.Fatal(err)
					}
					if recycle {
						s.Recycle()
					}
				}
				body := bodyBig(conv, n)
				if name == "steady" {
					b.StartTimer()
				}
				s := read(b, c, body)
				stubs := stubsOf(s, n)
				b.StartTimer()
				if name == "rewrite" {
					if _, err := s.Rewrite(stubs); err != nil {
						b.Fatal(err)
					}
				}
				if name == "steady" {
					b.StopTimer()
					if _, err := s.Rewrite(stubs); err != nil {
						b.Fatal(err)
					}
					if recycle {
						s.Recycle()
					}
					b.StartTimer()
				}
			}
		})
	}
	b.Run("cold", func(b *testing.B) {
		c := NewMessageCache(0)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			body := bodyBig(9000+i, turns)
			b.StartTimer()
			read(b, c, body)
		}
	})
}
