package advisor

import (
	"testing"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// BenchmarkIndex runs the advisor's index phase over the whole of the largest real
// session at once (what the first proxied request of a session does), with a new
// state each time (MB/s is tool output text per second).
//
//	go test ./advisor -run '^$' -bench BenchmarkIndex
func BenchmarkIndex(b *testing.B) {
	file := "../../shared/sessions/pi/before-compaction.jsonl"
	s, err := transcript.ReadFile(file, transcript.Options{Lenient: true})
	if err != nil {
		b.Skipf("%s not readable: %v", file, err)
	}
	var n int64
	for _, o := range s.Outputs() {
		n += int64(len(o.Text))
	}
	a, err := New(DefaultConfig(), nil, NewMemoryStore())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		st := newState(SessionKey(s))
		sp := &stepState{s: s, msgs: s.Messages, T: len(s.Messages)}
		a.index(st, sp)
	}
}
