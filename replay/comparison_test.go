package replay

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"context"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
)

// scheduleRecords replays the first n real sessions under each schedule, with a
// budget low enough for re-asks to happen.
func scheduleRecords(t *testing.T, n int, schedules []string) [][]*Record {
	t.Helper()
	srcs := sharedSources(t)
	if len(srcs) < n {
		sessionfiles.Missing(t, "only %d real sessions", len(srcs))
	}
	out := make([][]*Record, n) // [session][schedule]
	for i, src := range srcs[:n] {
		for _, s := range schedules {
			cfg := advisor.DefaultConfig()
			cfg.Schedule, cfg.Budget = s, 20_000
			rec, err := (&Replayer{Config: cfg, Scorer: lexical.New(), Lenient: true}).Replay(context.Background(), src)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = append(out[i], rec)
		}
	}
	return out
}

// TestComparisonSumsSessions: folding sessions one at a time gives, per schedule,
// the figures calibrate computes over all the sessions at once (the independent
// route: one Evaluator over every session's outputs), and the per-schedule counts
// summed by hand.
func TestComparisonSumsSessions(t *testing.T) {
	schedules := []string{"1", "3,6,12,24"}
	recs := scheduleRecords(t, 8, schedules)
	opts := calibrate.DefaultOptions()
	opts.Budget = 20_000
	c, err := NewComparison(schedules, 0.25, opts, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := c.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	rep := c.Report()
	if rep.Sessions != len(recs) {
		t.Fatalf("%d sessions, want %d", rep.Sessions, len(recs))
	}
	for k, s := range schedules {
		var outs []calibrate.Output
		var sessions []calibrate.Calls
		var prune []calibrate.PruneAt
		asks, cands := 0, 0
		for _, r := range recs {
			outs = append(outs, r[k].CalibrateOutputs()...)
			sessions = append(sessions, r[k].CalibrateSession())
			prune = append(prune, r[k].PendingDecisions()...)
			asks += len(r[k].Asks)
			for _, o := range r[k].Outputs {
				if o.CandidateFrom > 0 {
					cands++
				}
			}
		}
		ev, err := calibrate.NewEvaluator(outs, sessions, opts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ev.Evaluate("schedule "+s, 0.25, prune)
		if err != nil {
			t.Fatal(err)
		}
		got := rep.Results[k]
		if d := cmp.Diff(want, got.Result, cmpopts.EquateApprox(0, 1e-9)); d != "" {
			t.Errorf("schedule %s: result (-all at once +folded):\n%s", s, d)
		}
		if got.Asks != asks || got.Candidates != cands || got.Outputs != len(outs) {
			t.Errorf("schedule %s: %d asks, %d candidates, %d outputs; want %d, %d, %d", s, got.Asks, got.Candidates, got.Outputs, asks, cands, len(outs))
		}
	}
	if rep.Results[1].Asks >= rep.Results[0].Asks {
		t.Errorf("the back-off schedule asks %d times, every-step asking %d: the sessions test nothing", rep.Results[1].Asks, rep.Results[0].Asks)
	}
}

// TestComparisonMemoryFlat: what a Comparison holds does not grow with the
// sessions added (backoff streams its records): the live heap after 200 more
// sessions is within 64 KiB of the heap after 20.
func TestComparisonMemoryFlat(t *testing.T) {
	schedules := []string{"1", "3,6,12,24"}
	recs := scheduleRecords(t, 1, schedules)[0]
	c, err := NewComparison(schedules, 0.25, calibrate.DefaultOptions(), 0.02)
	if err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	add := func(n int) {
		for range n {
			if err := c.Add(recs); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(20)
	before := heap()
	add(200)
	after := heap()
	if after > before+64<<10 {
		t.Errorf("live heap grew by %d bytes over 200 sessions", after-before)
	}
	if got := c.Report().Sessions; got != 220 {
		t.Errorf("%d sessions", got)
	}
	runtime.KeepAlive(recs)
}
