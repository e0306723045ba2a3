package advisor_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestCompactionSummarySizes reads the real compacted sessions again through the
// transcript readers (Message.AgentCompaction) and checks the summary sizes the
// table's compaction model uses.
func TestCompactionSummarySizes(t *testing.T) {
	sizes := map[string][]int{}
	for _, f := range []string{
		"../../shared/sessions/claude-code/3af9b1a7-6512-4883-ad18-320658ced099.jsonl",
		"../../shared/sessions/pi/session.jsonl",
		"../../shared/sessions/pi/before-compaction.jsonl",
	} {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range s.Messages {
			if m.AgentCompaction {
				if !m.Meta {
					t.Errorf("%s line %d: a compaction summary that is not Meta", f, m.Line)
				}
				sizes[advisor.AgentOf(s.Format)] = append(sizes[advisor.AgentOf(s.Format)], tokencount.Count(m.Text))
			}
		}
	}
	want := map[string][]int{advisor.AgentClaude: {4369}, advisor.AgentPi: {1064, 1113, 963}}
	if d := cmp.Diff(want, sizes); d != "" {
		t.Fatalf("compaction summaries (-want +got):\n%s", d)
	}
	mean := func(xs ...int) int {
		sum := 0
		for _, x := range xs {
			sum += x
		}
		return int(math.Round(float64(sum) / float64(len(xs))))
	}
	for name, c := range map[string][2]int{
		"ClaudeSummaryTokens": {advisor.ClaudeSummaryTokens, mean(sizes[advisor.AgentClaude]...)},
		"PiSummaryTokens":     {advisor.PiSummaryTokens, mean(sizes[advisor.AgentPi]...)},
		"MeanSummaryTokens":   {advisor.MeanSummaryTokens, mean(append(sizes[advisor.AgentClaude], sizes[advisor.AgentPi]...)...)},
	} {
		if c[0] != c[1] {
			t.Errorf("%s = %d, the sessions say %d", name, c[0], c[1])
		}
	}
	if advisor.CompactionPoints[advisor.AgentClaude].SummaryTokens != advisor.ClaudeSummaryTokens || advisor.CompactionPoints[advisor.AgentPi].SummaryTokens != advisor.PiSummaryTokens {
		t.Errorf("the table's rows do not use the measured sizes")
	}
}

func TestAgentOf(t *testing.T) {
	for f, want := range map[transcript.Format]string{
		transcript.FormatClaudeCode: advisor.AgentClaude, transcript.FormatCodex: advisor.AgentCodex, transcript.FormatResponses: advisor.AgentCodex,
		transcript.FormatPi: advisor.AgentPi, transcript.FormatGemini: advisor.AgentGemini, transcript.FormatGeminiAPI: advisor.AgentGemini,
		transcript.FormatOpenAI: "", transcript.FormatAnthropic: "", transcript.FormatMiniSWEAgent: "", transcript.FormatSWEAgent: "", transcript.FormatOpenHands: "",
	} {
		if got := advisor.AgentOf(f); got != want {
			t.Errorf("AgentOf(%s) = %q, want %q", f, got, want)
		}
	}
	if len(transcript.Formats()) != 11 {
		t.Errorf("%d formats: give advisor.AgentOf's table the new one", len(transcript.Formats()))
	}
}
