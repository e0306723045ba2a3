package rules

import (
	"testing"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// BenchmarkAddSession indexes every message of the largest real session into a new
// Index (MB/s is tool output text per second).
//
//	go test ./rules -run '^$' -bench BenchmarkAddSession
func BenchmarkAddSession(b *testing.B) {
	file := sessionsDir + "/pi/before-compaction.jsonl"
	s, err := transcript.ReadFile(file, transcript.Options{Lenient: true})
	if err != nil {
		b.Skipf("%s not readable: %v", file, err)
	}
	var n int64
	for _, o := range s.Outputs() {
		n += int64(len(o.Text))
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		x := NewIndex()
		for _, m := range s.Messages {
			x.Add(m)
		}
	}
}
