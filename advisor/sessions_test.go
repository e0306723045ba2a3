package advisor_test

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/tokencount"

	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/backoff"
	"github.com/pruneadvisor/pruneadvisor/recall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// sessionsDir holds the real sessions (never copied into the repository).
const sessionsDir = "../../shared/sessions"

// realSessions lists every session file under sessionsDir.
func realSessions(t testing.TB) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(sessionsDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "LICENSES" {
			return filepath.SkipDir
		}
		if !d.IsDir() && !strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		sessionfiles.Missing(t, "no real sessions: %v", err)
	}
	sort.Strings(files)
	return files
}

// sessionRun is what one simulated run over a real session measured.
type sessionRun struct {
	steps, outputs, asked, asks, pruned, rewrites int
}

// runReal simulates adv over s step by step and checks, at every step, that every
// message keeps its outputs (same keys, same order, one result per call) and that
// a stub, once sent, is sent byte-identical at every later step. It returns the
// last plan and messages.
func runReal(t *testing.T, adv *advisor.Advisor, s *transcript.Session, store *advisor.MemoryStore) (advisor.Plan, []*transcript.Message, sessionRun) {
	t.Helper()
	var run sessionRun
	sent := map[string]string{}
	r := newRunner(t, adv, s)
	var plan advisor.Plan
	var out []*transcript.Message
	for !r.done() {
		view := *s
		view.Messages = s.Messages[:r.ends[r.k]]
		r.k++
		p, err := adv.Advise(context.Background(), &view)
		if err != nil {
			t.Fatalf("step %d: %v", r.k, err)
		}
		plan, out = p, withStubs(view.Messages, p.Stubs)
		run.steps++
		run.asks += p.Asked
		if p.Rewrite {
			run.rewrites++
		}
		if len(out) != len(view.Messages) {
			t.Fatalf("step %d: %d messages returned for %d", p.Step, len(out), len(view.Messages))
		}
		for i, m := range out {
			in := view.Messages[i]
			if len(m.Outputs) != len(in.Outputs) || len(m.Calls) != len(in.Calls) || m.Role != in.Role {
				t.Fatalf("step %d: message %d has %d outputs, %d calls; sent %d, %d", p.Step, i, len(m.Outputs), len(m.Calls), len(in.Outputs), len(in.Calls))
			}
			for j, o := range m.Outputs {
				if o.Key != in.Outputs[j].Key || o.CallID != in.Outputs[j].CallID {
					t.Fatalf("step %d: message %d output %d is %s, want %s", p.Step, i, j, o.Key, in.Outputs[j].Key)
				}
				if o.Text != in.Outputs[j].Text {
					if prev, ok := sent[o.Key]; ok && prev != o.Text {
						t.Fatalf("step %d: the stub of %s changed from %q to %q", p.Step, o.Key, prev, o.Text)
					}
					sent[o.Key] = o.Text
				} else if _, ok := sent[o.Key]; ok {
					t.Fatalf("step %d: %s was un-pruned without a recall", p.Step, o.Key)
				}
			}
		}
	}
	if p := plan.Clone(); true {
		plan = p
	}
	asked := map[string]bool{}
	for _, a := range store.Asks() {
		asked[a.OutputKey] = true
	}
	run.asked = len(asked)
	run.outputs = len(plan.Items)
	for _, it := range plan.Items {
		if it.Decision == advisor.DecisionPruned {
			run.pruned++
		}
	}
	return plan, out, run
}

// Over every real session: the advisor (lexical scorer, MemoryStore, a 20,000-token
// budget, every pending prune applied at once so that pruning happens) keeps one result per call, sends frozen stubs
// shorter than their originals, every stub recalls byte-identical, and the
// rewritten session re-reads with the same reader with the same calls and outputs
// and the stubs in place.
func TestRealSessions(t *testing.T) {
	files := realSessions(t)
	if len(files) < 20 {
		t.Fatalf("found %d session files under %s, want the 25 shipped", len(files), sessionsDir)
	}
	withPrunes := 0
	for _, file := range files {
		name, _ := filepath.Rel(sessionsDir, file)
		t.Run(name, func(t *testing.T) {
			// Lenient: three Claude Code files end lines mid-JSON.
			s, err := transcript.ReadFile(file, transcript.Options{Lenient: true})
			if err != nil {
				t.Fatal(err)
			}
			cfg := advisor.DefaultConfig()
			cfg.Budget = 20_000
			// The lexical scorer gives most cards of these sessions 0.6-0.9 (medians
			// 0.6-0.92 measured over the 23 files), so at the default cutoff 0.25 it
			// prunes in 7 of them; a cutoff near the median exercises stubs in most.
			cfg.Cutoff = 0.85
			// The regime is tested elsewhere (regime_test.go): here every pending prune
			// is applied at once, so stubs reach as many slots as possible.
			cfg.RemainingMin = 100_000
			store := advisor.NewMemoryStore()
			adv := newAdvisor(t, cfg, lexical.New(), store, newClock())
			plan, out, run := runReal(t, adv, s, store)

			orig := map[string]*transcript.ToolOutput{}
			for _, o := range s.Outputs() {
				orig[o.Key] = o
			}
			stubs := map[string]string{}
			svc := recall.New(store)
			for _, it := range plan.Items {
				if it.Decision != advisor.DecisionPruned {
					continue
				}
				o := orig[it.Key]
				stubs[it.Key] = it.Stub
				if len(it.Stub) >= len(o.Text) || tokencount.Count(it.Stub) >= o.Tokens {
					t.Errorf("%s: stub (%d bytes) not shorter than the original (%d bytes, %d tokens)", it.Key, len(it.Stub), len(o.Text), o.Tokens)
				}
				if got := outputText(t, out, it.Key); got != it.Stub {
					t.Errorf("%s: the returned slot does not hold the stub", it.Key)
				}
				text, err := svc.Recall(context.Background(), it.RecallID)
				if err != nil || text != o.Text {
					t.Errorf("%s: recall %s gave %d bytes (%v), want the %d-byte original", it.Key, it.RecallID, len(text), err, len(o.Text))
				}
			}
			if len(stubs) > 0 {
				withPrunes++
			}
			data, err := s.Rewrite(stubs)
			if err != nil {
				t.Fatalf("Rewrite: %v", err)
			}
			re, err := transcript.Read(file, data, transcript.Options{Format: s.Format, Lenient: true})
			if err != nil {
				t.Fatalf("re-reading the rewritten session: %v", err)
			}
			if len(re.Calls) != len(s.Calls) || len(re.Outputs()) != len(s.Outputs()) || re.Skipped != s.Skipped {
				t.Fatalf("re-read: %d calls, %d outputs, %d lines skipped; want %d, %d, %d",
					len(re.Calls), len(re.Outputs()), re.Skipped, len(s.Calls), len(s.Outputs()), s.Skipped)
			}
			for _, o := range re.Outputs() {
				want := orig[o.Key].Text
				if st, ok := stubs[o.Key]; ok {
					want = st
				}
				if o.Text != want {
					t.Errorf("re-read %s: %.80q, want %.80q", o.Key, o.Text, want)
				}
			}
			perAsked := 0.0
			if run.asked > 0 {
				perAsked = float64(run.asks) / float64(run.asked)
			}
			t.Logf("%d steps, %d outputs, %d pruned, %d rewrites, %d asks over %d outputs asked (%.2f per output)",
				run.steps, run.outputs, run.pruned, run.rewrites, run.asks, run.asked, perAsked)
		})
	}
	if withPrunes*4 < len(files)*3 {
		t.Errorf("pruning happened on %d of %d sessions, want at least three quarters", withPrunes, len(files))
	}
	t.Logf("pruning happened on %d of %d sessions", withPrunes, len(files))
}

// Asks per output over every real session with the default configuration and the
// lexical scorer: every re-ask of an output follows the back-off schedule (3, 6, 12,
// 24, 24, … steps after the previous ask) and happens only while the session is
// over its budget. The figures (asks per output asked, and per output) are logged
// for docs/PERFORMANCE.md.
func TestAsksPerOutput(t *testing.T) {
	sched, err := backoff.Parse(advisor.DefaultConfig().Schedule)
	if err != nil {
		t.Fatal(err)
	}
	var totalAsks, totalAsked, totalOutputs int
	for _, file := range realSessions(t) {
		name, _ := filepath.Rel(sessionsDir, file)
		s, err := transcript.ReadFile(file, transcript.Options{Lenient: true})
		if err != nil {
			t.Fatal(err)
		}
		store := advisor.NewMemoryStore()
		adv := newAdvisor(t, advisor.DefaultConfig(), lexical.New(), store, newClock())
		over := map[int]bool{} // step -> over budget
		r := newRunner(t, adv, s)
		for !r.done() {
			st := r.next()
			over[st.plan.Step] = st.plan.OverBudget
		}
		byOut := map[string][]int{}
		asks := store.Asks()
		for _, a := range asks {
			byOut[a.OutputKey] = append(byOut[a.OutputKey], a.Step)
		}
		for key, steps := range byOut {
			for i := 1; i < len(steps); i++ {
				if gap := steps[i] - steps[i-1]; gap < sched.Gap(i) || !over[steps[i]] {
					t.Errorf("%s: %s re-asked at step %d, %d steps after the previous ask (want >= %d), over budget %v",
						name, key, steps[i], gap, sched.Gap(i), over[steps[i]])
				}
			}
		}
		outputs := len(s.Outputs())
		perAsked, perOutput := 0.0, 0.0
		if len(byOut) > 0 {
			perAsked = float64(len(asks)) / float64(len(byOut))
			perOutput = float64(len(asks)) / float64(outputs)
		}
		t.Logf("%-62s %4d asks, %4d outputs asked, %4d outputs: %5.2f per output asked, %5.2f per output",
			name, len(asks), len(byOut), outputs, perAsked, perOutput)
		totalAsks += len(asks)
		totalAsked += len(byOut)
		totalOutputs += outputs
	}
	t.Logf("all sessions: %d asks, %d outputs asked, %d outputs: %.2f per output asked, %.2f per output",
		totalAsks, totalAsked, totalOutputs, float64(totalAsks)/float64(totalAsked), float64(totalAsks)/float64(totalOutputs))
}

// TestFittedAskSchedule: with the default configuration a scorer named "fitted" is
// re-asked by its own back-off (Config.ScorerSchedules: 1, 1, 2, 3, 6, 12, 24 steps
// after the previous ask) while the session is over budget, where any other scorer
// follows Schedule's gaps (3, 6, 12, 24). Over the real sessions, the same
// keep-everything scorer under the two names: every re-ask keeps its schedule's
// gap, only the fitted one is re-asked one step after an ask, and it is asked more.
func TestFittedAskSchedule(t *testing.T) {
	cfg := advisor.DefaultConfig()
	asks := func(name string, s *transcript.Session) (n, ones int) {
		sched, err := backoff.Parse(cfg.ScheduleFor(name))
		if err != nil {
			t.Fatal(err)
		}
		store := advisor.NewMemoryStore()
		adv := newAdvisor(t, cfg, &fakeScorer{name: name}, store, newClock())
		r := newRunner(t, adv, s)
		for !r.done() {
			r.next()
		}
		byOut := map[string][]int{}
		for _, a := range store.Asks() {
			byOut[a.OutputKey] = append(byOut[a.OutputKey], a.Step)
		}
		for key, steps := range byOut {
			for i := 1; i < len(steps); i++ {
				gap := steps[i] - steps[i-1]
				if gap < sched.Gap(i) {
					t.Errorf("%s: %s: %s re-asked %d steps after the previous ask, want >= %d", name, s.Name, key, gap, sched.Gap(i))
				}
				if gap == 1 {
					ones++
				}
			}
		}
		return len(store.Asks()), ones
	}
	var fitted, other, fittedOnes, otherOnes int
	for _, file := range realSessions(t) {
		s, err := transcript.ReadFile(file, transcript.Options{Lenient: true})
		if err != nil {
			t.Fatal(err)
		}
		n, ones := asks("fitted", s)
		m, ones2 := asks("other", s)
		fitted, other, fittedOnes, otherOnes = fitted+n, other+m, fittedOnes+ones, otherOnes+ones2
	}
	if other == 0 || fitted <= other || fittedOnes == 0 || otherOnes != 0 {
		t.Errorf("asks: fitted %d (%d one step after the previous), other %d (%d); want fitted > other, re-asks a step apart only for fitted",
			fitted, fittedOnes, other, otherOnes)
	}
	t.Logf("asks: fitted %d (%d one step apart), other %d", fitted, fittedOnes, other)
}
