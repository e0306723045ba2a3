package cards

import (
	"testing"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// benchFile is the largest real session: its tool outputs are the benchmarks' text.
const benchFile = "../../shared/sessions/pi/before-compaction.jsonl"

// benchOutputs returns the texts of benchFile's tool outputs and their total bytes.
func benchOutputs(b *testing.B) ([]string, int64) {
	b.Helper()
	s, err := transcript.ReadFile(benchFile, transcript.Options{Lenient: true})
	if err != nil {
		b.Skipf("%s not readable: %v", benchFile, err)
	}
	var texts []string
	var n int64
	for _, o := range s.Outputs() {
		texts = append(texts, o.Text)
		n += int64(len(o.Text))
	}
	return texts, n
}

// BenchmarkTerms splits every tool output of the largest real session into terms
// (MB/s is output text per second).
//
//	go test ./cards -run '^$' -bench 'BenchmarkTerms|BenchmarkCorpusAdd'
func BenchmarkTerms(b *testing.B) {
	texts, n := benchOutputs(b)
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range texts {
			Terms(t)
		}
	}
}

// BenchmarkCorpusAdd adds every tool output of the largest real session to a new
// corpus, as the advisor does when each output appears.
func BenchmarkCorpusAdd(b *testing.B) {
	texts, n := benchOutputs(b)
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		c := NewCorpus()
		for _, t := range texts {
			c.Add(t)
		}
	}
}
