package replay

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
)

// cpuTime returns the process's user plus system CPU time.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplay replays every session under ../shared/sessions with the
// lexical scorer and the default config, one goroutine, sessions parsed before
// the timer starts (parsing is the transcript readers' cost, reported by
// BenchmarkReplayWithParse). Metrics: steps/s of wall time, and steps per
// CPU-second ("per core"), which stays meaningful on a busy machine.
func BenchmarkReplay(b *testing.B) { benchReplay(b, sharedSources(b)) }

// BenchmarkReplayCorpus is BenchmarkReplay over ../shared/corpus (293 files, 284
// sessions): the issue-13 goal of 5,000 steps per CPU-second with the lexical
// scorer is measured here.
func BenchmarkReplayCorpus(b *testing.B) { benchReplay(b, sourcesUnder(b, corpusDir)) }

func benchReplay(b *testing.B, srcs []*Source) {
	r := &Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New(), Lenient: true}
	steps := 0
	start, cpu0 := time.Now(), cpuTime(b)
	for b.Loop() {
		for _, src := range srcs {
			rec, err := r.Replay(context.Background(), src)
			if err != nil {
				b.Fatal(err)
			}
			steps += rec.Steps
		}
	}
	wall, cpu := time.Since(start), cpuTime(b)-cpu0
	b.ReportMetric(float64(steps)/wall.Seconds(), "steps/s")
	b.ReportMetric(float64(steps)/cpu.Seconds(), "steps/cpu-s")
}

// BenchmarkReplayWithParse is BenchmarkReplay with reading and parsing every file
// inside the timer: the end-to-end cost of `pruneadvisor replay` minus SQLite.
func BenchmarkReplayWithParse(b *testing.B) {
	files := sharedFiles(b)
	r := &Replayer{Config: advisor.DefaultConfig(), Scorer: lexical.New(), Lenient: true}
	steps := 0
	start, cpu0 := time.Now(), cpuTime(b)
	for b.Loop() {
		for _, f := range files {
			src, err := Load(f, true)
			if err != nil {
				b.Fatal(err)
			}
			rec, err := r.Replay(context.Background(), src)
			if err != nil {
				b.Fatal(err)
			}
			steps += rec.Steps
		}
	}
	wall, cpu := time.Since(start), cpuTime(b)-cpu0
	b.ReportMetric(float64(steps)/wall.Seconds(), "steps/s")
	b.ReportMetric(float64(steps)/cpu.Seconds(), "steps/cpu-s")
}
