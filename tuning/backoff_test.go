package tuning

import (
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/replay"

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
func scheduleRecords(t *testing.T, n int, schedules []string) [][]*replay.Record {
	t.Helper()
	srcs := sharedSources(t)
	if len(srcs) < n {
		sessionfiles.Missing(t, "only %d real sessions", len(srcs))
	}
	out := make([][]*replay.Record, n) // [session][schedule]
	for i, src := range srcs[:n] {
		for _, s := range schedules {
			cfg := advisor.DefaultConfig()
			cfg.Schedule, cfg.Budget = s, 20_000
			rec, err := (&replay.Replayer{Config: cfg, Scorer: lexical.New(), Lenient: true}).Replay(context.Background(), src)
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
			outs = append(outs, Outputs(r[k])...)
			sessions = append(sessions, Calls(r[k]))
			prune = append(prune, PendingPrunes(r[k])...)
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

// TestCompareSchedules works through three schedules over one hand-made session
// (end step 10, context 1,000 tokens everywhere) of three outputs, all candidates
// from step 3:
//
//	a: 100 tokens, used at step 6; b: 200 tokens, never used; c: 300 tokens, never used.
//
// Prune (pending) steps: reference "1": a 4, b 5, c 0. Schedule "3": a 6 (later),
// b 5, c 8 (changed: pruned only here). Schedule "3,6": a 4, b 3 (earlier), c 0.
// Decision-level token-steps (pruned at p, saved until the first use at or after p,
// else to step 11): "1": a 100x(6-4) + b 200x(11-5) = 1,400, misses 1 (a) of 2;
// "3": a used at 6 >= 6 so 100x0, b 1,200, c 300x3 = 900, total 2,100, misses 1 of 3;
// "3,6": a 200 + b 200x8 = 1,600 + 200 = 1,800, misses 1 of 2.
// Later: "3" has a (4 -> 6): 200 - 0 = 200 token-steps lost. Asks and tokens: "1"
// 9 asks x 10 tokens, "3" 5 x 10, "3,6" 4 x 10.
// Recommendation with tolerance 0.02: floor 0.98 x 1,400 = 1,372 and at most 1
// miss: "3" (2,100, 1 miss) and "3,6" (1,800, 1 miss) qualify with "1"; fewest
// scorer tokens: "3,6" (40).
func TestCompareSchedules(t *testing.T) {
	mk := func(schedule string, pending [3]int, asks int) ScheduleRun {
		rec := &replay.Record{ID: "s", Path: "s.json", ContentHash: "h", Steps: 10}
		for i, k := range []string{"a", "b", "c"} {
			rec.Outputs = append(rec.Outputs, replay.OutputFacts{Key: k, Tokens: 100 * (i + 1), Step: 1, CandidateFrom: 3, PendingAt: pending[i], EndStep: 10})
		}
		for s := 1; s <= 10; s++ {
			rec.StepFacts = append(rec.StepFacts, replay.StepFacts{Step: s, ContextTokens: 1000, AppliedTokens: 1000})
		}
		for i := range asks {
			rec.Asks = append(rec.Asks, advisor.AskRecord{OutputKey: "a", Step: 3 + i%8, OK: true, Score: 0.5, Tokens: 10})
		}
		rec.Evidence = []evidence.Use{{Key: "a", Step: 6, Kind: evidence.UseName, Weight: 1}}
		return ScheduleRun{Schedule: schedule, Records: []*replay.Record{rec}}
	}
	runs := []ScheduleRun{mk("1", [3]int{4, 5, 0}, 9), mk("3", [3]int{6, 5, 8}, 5), mk("3,6", [3]int{4, 3, 0}, 4)}
	rep, err := CompareSchedules(runs, 0.25, calibrate.DefaultOptions(), 0.02)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Schedule         string
		Asks             int
		Tokens           int64
		Later            int
		LaterTS          int64
		Earlier, Changed int
		Pruned, Misses   int
		TokenSteps       int64
		Candidates       int
		AsksPerCandidate float64
	}
	var got []row
	for _, r := range rep.Results {
		got = append(got, row{r.Schedule, r.Asks, r.ScorerTokens, r.Later, r.LaterTokenSteps, r.Earlier, r.Changed,
			r.Result.Pruned, r.Result.Misses, r.Result.TokenSteps, r.Candidates, r.AsksPerCandidate})
	}
	want := []row{
		{"1", 9, 90, 0, 0, 0, 0, 2, 1, 1400, 3, 3},
		{"3", 5, 50, 1, 200, 0, 1, 3, 1, 2100, 3, 5.0 / 3},
		{"3,6", 4, 40, 0, 0, 1, 0, 2, 1, 1800, 3, 4.0 / 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if rep.Recommended != "3,6" || rep.Reference != "1" {
		t.Errorf("recommended %q (reference %q), want \"3,6\" (\"1\"): %s", rep.Recommended, rep.Reference, rep.Reason)
	}
	// A schedule giving up more than the tolerance is not recommended, nor one
	// with more misses.
	runs[2] = mk("3,6", [3]int{0, 3, 0}, 4) // only b: 1,600 token-steps, no miss
	runs[1] = mk("3", [3]int{0, 0, 0}, 5)   // nothing pruned
	rep, err = CompareSchedules(runs, 0.25, calibrate.DefaultOptions(), 0.0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommended != "3,6" {
		t.Errorf("tolerance 0: recommended %q, want \"3,6\" (saves 1,600 >= 1,400 with miss rate 0)", rep.Recommended)
	}
	rep, err = CompareSchedules(runs[:2], 0.25, calibrate.DefaultOptions(), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommended != "1" {
		t.Errorf("\"3\" saves nothing: recommended %q, want the reference", rep.Recommended)
	}
	more := mk("2", [3]int{4, 4, 0}, 1) // a and b at 4: 200 + 1,400 = 1,600, 1 miss
	more.Records[0].Evidence = append(more.Records[0].Evidence, evidence.Use{Key: "b", Step: 9, Kind: evidence.UseName, Weight: 1})
	ref := mk("1", [3]int{4, 5, 0}, 9)
	ref.Records[0].Evidence = more.Records[0].Evidence // b used at 9: the reference misses it too
	rep, err = CompareSchedules([]ScheduleRun{ref, more}, 0.25, calibrate.DefaultOptions(), 0.02)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommended != "2" || rep.Results[0].Result.Misses != 2 || rep.Results[1].Result.Misses != 2 {
		t.Errorf("equal misses (%d, %d): recommended %q, want \"2\" (fewer tokens, %d >= 98%% of %d token-steps)",
			rep.Results[0].Result.Misses, rep.Results[1].Result.Misses, rep.Recommended, rep.Results[1].Result.TokenSteps, rep.Results[0].Result.TokenSteps)
	}
	// b used at step 4: pruned at 5 (reference) it is not a miss, pruned at 4 it is.
	extra, ref2 := mk("2", [3]int{4, 4, 0}, 1), mk("1", [3]int{4, 5, 0}, 9)
	ev := []evidence.Use{{Key: "a", Step: 6, Kind: evidence.UseName, Weight: 1}, {Key: "b", Step: 4, Kind: evidence.UseName, Weight: 1}}
	extra.Records[0].Evidence, ref2.Records[0].Evidence = ev, ev
	rep, err = CompareSchedules([]ScheduleRun{ref2, extra}, 0.25, calibrate.DefaultOptions(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommended != "1" {
		t.Errorf("\"2\" misses b (used at 4, pruned at 4): recommended %q, want the reference", rep.Recommended)
	}
	// Misaligned runs are refused.
	bad := mk("2", [3]int{0, 0, 0}, 1)
	bad.Records[0].ContentHash = "other"
	if _, err := CompareSchedules([]ScheduleRun{runs[0], bad}, 0.25, calibrate.DefaultOptions(), 0.02); err == nil {
		t.Error("runs over different sessions were compared")
	}
}

// A schedule's totals over sessions keep every figure of the sessions' levels:
// compactions and compaction misses too (they were dropped when the back-off
// comparison summed levels with a copy of its own), and the costlier sessions as
// counted per session.
func TestScheduleTotalsKeepCompactions(t *testing.T) {
	session := func(compactions, lost int, net float64, costlier int) ScheduleResult {
		var r ScheduleResult
		r.Result.Applied = calibrate.Level{Compactions: compactions, CompactionMisses: lost, NetUSD: net, SessionsCostlier: costlier, PeakContext: 1000 * compactions}
		r.Result.Decision = r.Result.Applied
		return r
	}
	var total ScheduleResult
	total.add(session(2, 1, -0.5, 1))
	total.add(session(3, 4, 1.25, 0))
	want := calibrate.Level{Compactions: 5, CompactionMisses: 5, NetUSD: 0.75, SessionsCostlier: 1, PeakContext: 3000}
	if d := cmp.Diff(want, total.Result.Applied); d != "" {
		t.Errorf("applied totals (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, total.Result.Decision); d != "" {
		t.Errorf("decision totals (-want +got):\n%s", d)
	}
}
