package advisor_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// signalsAt runs an advisor that re-asks every candidate at every step (schedule
// "1", whatever the budget) over msgs, step by step, and returns the signals of
// every ask, by step and output key.
func signalsAt(t *testing.T, s *transcript.Session, end int) map[int]map[string]cards.Signals {
	t.Helper()
	cfg := advisor.DefaultConfig()
	cfg.Schedule, cfg.ReaskUnderBudget = "1", true
	got := map[int]map[string]cards.Signals{}
	sc := &fakeScorer{fn: func(_ int, b cards.Batch) ([]cards.Score, error) {
		for _, c := range b.Cards {
			if got[c.Step] == nil {
				got[c.Step] = map[string]cards.Signals{}
			}
			got[c.Step][c.ID] = c.Signals()
		}
		return constScores(b, 1), nil
	}}
	adv := newAdvisor(t, cfg, sc, advisor.NewMemoryStore(), newClock())
	view := *s
	for i, m := range s.Messages[:end] {
		if m.Role == transcript.RoleAssistant {
			view.Messages = s.Messages[:i]
			if _, err := adv.Advise(context.Background(), &view); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got
}

// TestFeaturesKnownAtStep: no card signal (and so no feature of the fitted
// scorer) at step t changes when messages after t are added. The signals of every
// ask an advisor makes at step t over a session cut after step t are the same as
// those it makes at step t over the whole session, on real sessions of three
// formats; and at least one later message named, re-read or reran each output used
// later, so the test would see a leak of the future.
func TestFeaturesKnownAtStep(t *testing.T) {
	files := []string{
		filepath.Join(sessionsDir, "claude-code", "abc757d1-3da3-42fb-bb7b-ffa293a4ba29.jsonl"),
		filepath.Join(sessionsDir, "mini-swe-agent", "sympy__sympy-20438.traj.json"),
		filepath.Join(sessionsDir, "gemini-cli", "session-2025-12-30T01-31-271ace30.json"),
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
			if err != nil {
				t.Fatal(err)
			}
			full := signalsAt(t, s, len(s.Messages))
			// Cut the session at a third and two thirds of its messages.
			compared := 0
			for _, cut := range []int{len(s.Messages) / 3, 2 * len(s.Messages) / 3} {
				part := signalsAt(t, s, cut)
				for step, cs := range part {
					for key, sig := range cs {
						if d := cmp.Diff(sig, full[step][key]); d != "" {
							t.Errorf("cut %d, step %d, output %s: signals differ from the full session's (-cut +full):\n%s", cut, step, key, d)
						}
						var v1, v2 []float64
						v1 = fitted.Vector(v1, &sig)
						fs := full[step][key]
						v2 = fitted.Vector(v2, &fs)
						if !cmp.Equal(v1, v2) {
							t.Errorf("cut %d, step %d, output %s: features differ", cut, step, key)
						}
						compared++
					}
				}
			}
			used := 0
			for _, cs := range full {
				for _, sig := range cs {
					if sig.Uses > 0 {
						used++
					}
				}
			}
			if compared < 50 || used == 0 {
				t.Errorf("%d asks compared, %d with a use history: the test is too weak", compared, used)
			}
		})
	}
}

// TestLiveNamesOfSupersededReads: a read made dead by a later read (superseded:
// the file was edited between them) hands its later uses to that read (the label's
// live-copy credit, tuning's creditLiveCopies), so the later read's card counts the
// dead read's live names beside its own. Checked by another route: an
// evidence.Tracker fed the same messages gives each read's own live names; the
// later read's card holds their sum, and the dead read has a live name of its own
// (loadTable_v2, in no later message; parseConfig the edit wrote, and the
// value_N names the later read carries again), so the sum is more than the later
// read's own.
func TestLiveNamesOfSupersededReads(t *testing.T) {
	c := newChat("Fix the config loader in /src/a.go")
	first := c.read("Reading it.", "/src/a.go", "func parseConfig() {}\nfunc loadTable_v2() {}\n"+filler("alpha", 300))
	c.call("Editing.", "Edit", `{"file_path":"/src/a.go","old_string":"parseConfig","new_string":"readConfig"}`, "The file /src/a.go has been updated.")
	second := c.read("Reading it again.", "/src/a.go", "func readConfig() {}\nfunc writeCache_v3() {}\n"+filler("beta", 300))
	for _, w := range []string{"Thinking about the loader.", "Still thinking.", "Weighing the options.", "Nearly there.", "One more look.", "Done thinking."} {
		c.say(w)
	}
	s := c.session(t, "superseded.json")
	got := signalsAt(t, s, len(s.Messages))

	tr := evidence.NewTracker()
	tr.Background = fitted.DefaultBackground()
	for _, m := range s.Messages {
		if _, err := tr.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	ownFirst, _ := tr.Live(first)
	ownSecond, _ := tr.Live(second)
	if ownFirst != 1 {
		t.Fatalf("the first read has %d live names, want 1 (loadTable_v2)", ownFirst)
	}
	last := 0
	for step, cs := range got {
		if _, ok := cs[second]; ok && step > last {
			last = step
		}
	}
	sig, ok := got[last][second]
	if !ok {
		t.Fatalf("no ask of the second read (asks: %v)", got)
	}
	if _, asked := got[last][first]; asked {
		t.Errorf("the first read was asked about at step %d: it should be dead by the second", last)
	}
	if sig.Live != ownFirst+ownSecond {
		t.Errorf("second read's card at step %d: live %d, want its own %d + the first read's %d", last, sig.Live, ownSecond, ownFirst)
	}
}
