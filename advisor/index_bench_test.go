package advisor

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// BenchmarkIndex runs the advisor's index phase over the whole of the largest real
// session at once (what the first proxied request of a session does), with a new
// state each time. MB/s is tool output text per second of wall time; cpu-ns/op
// and MB/cpu-s count the process's CPU time instead, which another process on the
// machine disturbs less.
//
//	go test ./advisor -run '^$' -bench BenchmarkIndex
func BenchmarkIndex(b *testing.B) { benchIndex(b, 64, 0) }

// BenchmarkIndexDigest is BenchmarkIndex at the default digest budget (128
// tokens), fixed and growing to 6% of a long output (Config.DigestShare 0.06,
// which keeps twice each long output's own budget of its names): what a digest
// that grows with the output costs the index phase.
//
//	go test ./advisor -run '^$' -bench BenchmarkIndexDigest -benchmem -benchtime 10x
func BenchmarkIndexDigest(b *testing.B) {
	for _, share := range []float64{0, 0.06} {
		b.Run(fmt.Sprintf("share=%g", share), func(b *testing.B) { benchIndex(b, 128, share) })
	}
}

// benchIndex indexes the largest real session with a new state of digest budget
// digestTokens and digest share share each time, reporting wall and CPU rates.
func benchIndex(b *testing.B, digestTokens int, share float64) {
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
	cpu := cpuTime(b)
	for b.Loop() {
		st := newState(SessionKey(s), fitted.DefaultBackground(), digestTokens, share, 200, 3)
		sp := &stepState{s: s, msgs: s.Messages, T: len(s.Messages)}
		a.index(st, sp)
	}
	perOp := float64(cpuTime(b)-cpu) / float64(b.N)
	b.ReportMetric(perOp, "cpu-ns/op")
	b.ReportMetric(float64(n)/perOp*1e3, "MB/cpu-s")
}

// cpuTime returns the process's user plus system CPU time.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
