package replay

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/evidence"
)

// TestConsumeSameRecord replays each real session and a generated one with
// Replay and with Consume (each on its own load of the file), at the default
// budget and at one small enough that most candidates are pruned: the records must
// be the same but for wall times and latencies, and the evidence, read from the
// advisor's use history, the same as a tracker's (evidence.Of's, with the advisor's digest settings) over the whole session. A message Consume dropped that the
// advisor still needed would skip a prune (no original to store) and show here.
// On the generated session (mostly small outputs, most large ones pruned), Consume
// must have let go of most messages by the last step, and of all at the end.
func TestConsumeSameRecord(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.jsonl")
	writeBigFile(t, big, 4_000)
	files := append(sharedFiles(t), big)
	scorer, err := fitted.NewDefault()
	if err != nil {
		t.Fatal(err)
	}
	small := advisor.DefaultConfig()
	small.Budget, small.PriceForced = 5_000, false
	for _, cfg := range []advisor.Config{advisor.DefaultConfig(), small} {
		for _, f := range files {
			a, b := mustLoad(t, f), mustLoad(t, f)
			if a == nil {
				continue
			}
			r := &Replayer{Config: cfg, Scorer: scorer, Lenient: true}
			want, err := r.Replay(context.Background(), a)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			steps, dropped := b.Session.Steps(), 0
			r.OnStep = func(_ string, step int) {
				if step == steps {
					for _, m := range b.Session.Messages {
						if m == nil {
							dropped++
						}
					}
				}
			}
			got, err := r.Consume(context.Background(), b)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, rec := range []*Record{want, got} {
				rec.Started, rec.Finished = time.Time{}, time.Time{}
				for i := range rec.Asks {
					rec.Asks[i].Latency = 0
				}
			}
			// evidence.Of's pass over the whole session, with the digest settings
			// of the advisor's tracker (a use's digest budget counts the kept names
			// that stopped being live: evidence/digest.go).
			tr := evidence.NewTracker()
			tr.Background = fitted.DefaultBackground()
			tr.DigestTokens, tr.DigestMinTokens, tr.DigestFrom = cfg.DigestTokens, cfg.MinCandidateTokens, cfg.ProtectedSteps
			for _, m := range a.Session.Messages {
				if _, err := tr.Add(m); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
			}
			if d := cmp.Diff(tr.All(), want.Evidence); d != "" {
				t.Errorf("%s: the replay's evidence (the advisor's use history) differs from a tracker's over the whole session (-tracker +replay):\n%s", f, d)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s, budget %d: Consume's record differs from Replay's (-Replay +Consume):\n%s", f, cfg.BudgetTokens(), d)
			}
			if b.Session.Messages != nil || b.Session.Calls != nil {
				t.Errorf("%s: after Consume the session still holds %d messages, %d calls", f, len(b.Session.Messages), len(b.Session.Calls))
			}
			if f == big && cfg.Budget == small.Budget {
				n := len(a.Session.Messages)
				if dropped < n*8/10 {
					t.Errorf("generated session: %d of %d messages let go of by the last step, want >= 80%%", dropped, n)
				}
				pruned := 0
				for _, o := range got.Outputs {
					if o.PrunedAt > 0 {
						pruned++
					}
				}
				if len(got.Asks) == 0 || pruned < len(got.Outputs)/5 {
					t.Errorf("generated session: %d asks, %d of %d outputs pruned: too few to test", len(got.Asks), pruned, len(got.Outputs))
				}
			}
		}
	}
}

// mustLoad loads the session file at path leniently; nil for a file that holds no
// session.
func mustLoad(t *testing.T, path string) *Source {
	t.Helper()
	src, err := Load(path, true)
	if err != nil {
		if errors.Is(err, ErrNotSession) {
			return nil
		}
		t.Fatalf("%s: %v", path, err)
	}
	return src
}
