package advisor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// benchSession returns a synthetic OpenAI-format session of 1 + 2·steps messages: a
// user task, then per step an assistant message with a sentence and one tool call
// and its result. A quarter of the results are 40-token shell outputs, half are
// 600-token file reads, a quarter 300-token search results; every 10th step edits
// the file read 3 steps before and the next step reads it again, so the superseded
// rule fires.
func benchSession(tb testing.TB, steps int) *transcript.Session {
	tb.Helper()
	lines := func(topic string, n int) string {
		var b strings.Builder
		for j := 0; j < n; j++ {
			fmt.Fprintf(&b, "%s line %d: value_%d = %d\n", topic, j, j*7, j*j)
		}
		return b.String()
	}
	c := newChat("Refactor the billing module and keep the tests green")
	for i := 1; i <= steps; i++ {
		text := fmt.Sprintf("Step %d: looking at the next piece.", i)
		switch {
		case i%10 == 0:
			p := fmt.Sprintf("/src/pkg%d/file%d.go", (i-3)%50, i-3)
			c.call(text, "Edit", fmt.Sprintf(`{"file_path":%q,"old_string":"a","new_string":"b"}`, p), "The file has been updated.")
		case i%10 == 1 && i > 10:
			p := fmt.Sprintf("/src/pkg%d/file%d.go", (i-4)%50, i-4)
			c.read(text, p, lines(fmt.Sprintf("file%d v2", i-4), 50))
		case i%4 == 0:
			c.call(text, "Bash", fmt.Sprintf(`{"command":"go test ./pkg%d/..."}`, i%50), lines(fmt.Sprintf("ok pkg%d", i), 3))
		case i%4 == 3:
			c.call(text, "Grep", fmt.Sprintf(`{"pattern":"func Test%d","path":"/src"}`, i), lines(fmt.Sprintf("match%d", i), 25))
		default:
			c.read(text, fmt.Sprintf("/src/pkg%d/file%d.go", i%50, i), lines(fmt.Sprintf("file%d", i), 50))
		}
	}
	return c.session(tb, fmt.Sprintf("bench-%d.json", steps))
}

// benchScorers are the per-step benchmark's scorer set-ups, all without a model:
// rules only; a constant 0.1 (every candidate pruned: pending, then rewrites every
// 5% of the budget); a constant 0.9 with a budget the session never reaches (every
// candidate asked once, kept, never re-asked).
var benchScorers = []struct {
	name   string
	scorer func() advisor.Scorer
	window int
	budget int // tokens; 0: the window's default fraction
}{
	{"rules", func() advisor.Scorer { return nil }, 200_000, 0},
	{"const0.1", func() advisor.Scorer { return constScorer(0.1) }, 200_000, 0},
	{"const0.9", func() advisor.Scorer { return constScorer(0.9) }, 10_000_000, 0},
	// The default scorer: its cards carry the use history and signals.
	{"fitted", func() advisor.Scorer { s, _ := fitted.NewDefault(); return s }, 200_000, 0},
	// The same over a 20,000-token budget in a window whose hard limit the session
	// never reaches: every step over the budget, never past the hard limit (the
	// over-budget candidates, over_budget_cutoff).
	{"fitted-over-budget", func() advisor.Scorer { s, _ := fitted.NewDefault(); return s }, 10_000_000, 20_000},
}

// stepRun is how many consecutive steps BenchmarkAdviseStep times after each
// priming: the session grows by 2·stepRun messages over a run (40 messages).
const stepRun = 20

// BenchmarkAdviseStep measures ONE additional Advise call on a session whose first
// N messages are already indexed: the new step adds an assistant message and its
// tool result. The advisor is primed to N messages step by step (untimed), then the
// next stepRun steps are timed one by one; then it is primed afresh. Besides ns/op
// (the mean, GC included) it reports the median step, which ignores the outliers
// another process on the machine causes. Goal: <= 1 ms at N = 400 and <= 1.3x
// growth from 100 to 3,200 messages.
//
//	go test ./advisor -run '^$' -bench BenchmarkAdviseStep -benchtime 400x
func BenchmarkAdviseStep(b *testing.B) {
	for _, sc := range benchScorers {
		for _, n := range []int{100, 400, 1600, 3200} {
			b.Run(fmt.Sprintf("%s/N=%d", sc.name, n), func(b *testing.B) {
				k := n / 2 // steps already taken: messages[:1+2k] hold ~n messages
				s := benchSession(b, k+stepRun)
				cfg := advisor.DefaultConfig()
				cfg.ContextWindow, cfg.Budget = sc.window, sc.budget
				ctx := context.Background()
				view := *s
				var adv *advisor.Advisor
				end := 0
				times := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if i%stepRun == 0 {
						b.StopTimer()
						adv = newAdvisor(b, cfg, sc.scorer(), advisor.NewMemoryStore(), newClock())
						for end = 1; end <= 1+2*k; end += 2 {
							view.Messages = s.Messages[:end]
							if _, err := adv.Advise(ctx, &view); err != nil {
								b.Fatal(err)
							}
						}
						b.StartTimer()
					}
					view.Messages = s.Messages[:end]
					end += 2
					start := time.Now()
					if _, err := adv.Advise(ctx, &view); err != nil {
						b.Fatal(err)
					}
					times = append(times, time.Since(start))
				}
				slices.Sort(times)
				b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns")
			})
		}
	}
}

// BenchmarkSimulate measures a whole step-by-step run over a session of N messages
// (what `pruneadvisor advise` does), reported per step: the amortized per-step cost,
// rewrites and store reads included.
//
//	go test ./advisor -run '^$' -bench BenchmarkSimulate -benchtime 5x
func BenchmarkSimulate(b *testing.B) {
	for _, sc := range benchScorers {
		for _, n := range []int{400, 3200} {
			b.Run(fmt.Sprintf("%s/N=%d", sc.name, n), func(b *testing.B) {
				s := benchSession(b, n/2)
				cfg := advisor.DefaultConfig()
				cfg.ContextWindow, cfg.Budget = sc.window, sc.budget
				simBench(b, s, cfg, sc.scorer)
			})
		}
	}
}

// BenchmarkSimulateLargestSession runs the lexical scorer over the largest real
// session (pi/before-compaction.jsonl), as `pruneadvisor advise --scorer lexical`
// does, reported per step.
//
//	go test ./advisor -run '^$' -bench BenchmarkSimulateLargestSession -benchtime 5x
func BenchmarkSimulateLargestSession(b *testing.B) {
	s, err := transcript.ReadFile(sessionsDir+"/pi/before-compaction.jsonl", transcript.Options{Lenient: true})
	if err != nil {
		b.Skip(err)
	}
	simBench(b, s, advisor.DefaultConfig(), func() advisor.Scorer { return lexical.New() })
}

func simBench(b *testing.B, s *transcript.Session, cfg advisor.Config, scorer func() advisor.Scorer) {
	ctx := context.Background()
	var ends []int
	for i, m := range s.Messages {
		if m.Role == transcript.RoleAssistant {
			ends = append(ends, i)
		}
	}
	ends = append(ends, len(s.Messages))
	view := *s
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		adv := newAdvisor(b, cfg, scorer(), advisor.NewMemoryStore(), newClock())
		for _, end := range ends {
			view.Messages = s.Messages[:end]
			if _, err := adv.Advise(ctx, &view); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ends)), "ns/step")
	b.ReportMetric(float64(len(ends)), "steps")
}
