package transcript

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// largestSession is the largest real session in ../shared/sessions (2.3 MB, 992
// messages).
var largestSession = filepath.Join("..", "..", "shared", "sessions", "pi", "before-compaction.jsonl")

// BenchmarkReadLargest reads and indexes the largest real session (parse, classify,
// pair, hash, count tokens) and reports ns per message. The token-count cache and
// the cache of o200k pieces are emptied before each read so every message is
// tokenized, as on a first read in a fresh process.
func BenchmarkReadLargest(b *testing.B) {
	data, err := os.ReadFile(largestSession)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	msgs := 0
	for b.Loop() {
		tokencount.ResetCaches()
		s, err := Read(largestSession, data, Options{})
		if err != nil {
			b.Fatal(err)
		}
		msgs = len(s.Messages)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(msgs), "ns/message")
}

// BenchmarkReadLargestWarm is the same with the token-count cache warm: what a proxy
// pays when a request re-sends a history it has seen.
func BenchmarkReadLargestWarm(b *testing.B) {
	data, err := os.ReadFile(largestSession)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Read(largestSession, data, Options{}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	msgs := 0
	for b.Loop() {
		s, err := Read(largestSession, data, Options{})
		if err != nil {
			b.Fatal(err)
		}
		msgs = len(s.Messages)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(msgs), "ns/message")
}
