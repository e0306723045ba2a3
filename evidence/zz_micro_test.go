package evidence

import (
	"testing"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

func microTexts(b *testing.B) []string {
	s, _ := transcript.ReadFile("../../shared/sessions/pi/before-compaction.jsonl", transcript.Options{Lenient: true})
	var texts []string
	for _, m := range s.Messages {
		texts = append(texts, m.Text)
		for _, o := range m.Outputs {
			texts = append(texts, o.Text)
		}
	}
	return texts
}

func BenchmarkMicroVisitNoop(b *testing.B) {
	texts := microTexts(b)
	n := 0
	for b.Loop() {
		for _, x := range texts {
			var g int32
			visitNames(x, &g, func(name string, _ int32, _ uint8) { n++ })
		}
	}
}

func BenchmarkMicroTrackerOutputsOnly(b *testing.B) {
	texts := microTexts(b)
	for b.Loop() {
		t := NewTracker()
		for _, x := range texts {
			var g int32
			t.scan(x, nil, true, false, &g, func(_ string, _ scrEntry, _ int32, _ *nameInfo) {})
		}
	}
}
