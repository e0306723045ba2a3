package calibrate

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRecordedCompaction replays growingSession (TestCompactionHand) through a
// compaction its transcript records before call 6, keeping the tail from output
// 4's message (Dropped 41,000 tokens of the unpruned context) under a
// 1,000-token summary, with no modelled compaction.
//
// Keep-all: calls 1-5 send 10k..50k. Before call 6 the summarising call reads the
// 60,000 tokens call 6 would have sent (50,000 cached) and writes 1,000 output
// tokens; outputs 1-3 are gone and call 6 writes 60,000 - 41,000 = 19,000 whole.
// Output 2's use at call 7 is a compaction miss (9,100 tokens written again and
// kept), so calls 8-10 send 48,100, 58,100, 68,100: one recorded compaction, no
// modelled one, peak 68,100.
//
// Every output stubbed as soon as it may be (decision level): at call 6 outputs
// 1-4 are stubbed (35,600 saved), so the context is 24,400 and the dropped
// history as sent is 41,000 - 26,700 (the stubs of outputs 1-3) = 14,300; the
// tail is output 4's stub, its message's other 1,000 tokens and output 5 (stubbed
// at call 6): 1,200. Output 2's stub was dropped with it: its use at 7 is a
// compaction miss, not a stub miss. Peak 24,400 (the summarising call).
func TestRecordedCompaction(t *testing.T) {
	outs, sessions, opts, e := recordedSession(t)
	ka := e.KeepAll().Decision
	got := Level{RecordedCompactions: ka.RecordedCompactions, Compactions: ka.Compactions, CompactionMisses: ka.CompactionMisses, PeakContext: ka.PeakContext}
	if d := cmp.Diff(Level{RecordedCompactions: 1, CompactionMisses: 1, PeakContext: 68_100}, got); d != "" {
		t.Errorf("keep-all (-want +got):\n%s", d)
	}
	p, err := opts.Prices.For("anthropic")
	if err != nil {
		t.Fatal(err)
	}
	want := p.Call(0, 10_000) + p.Call(10_000, 20_000) + p.Call(20_000, 30_000) + p.Call(30_000, 40_000) + p.Call(40_000, 50_000) +
		p.Call(50_000, 60_000) + 1000*p.Output() + p.Call(0, 19_000) + // call 6: summarise, then write the new prefix
		p.Call(19_000, 29_000) + p.Call(29_000, 38_100) + // call 7 and the re-fetch of output 2
		p.Call(38_100, 48_100) + p.Call(48_100, 58_100) + p.Call(58_100, 68_100)
	if got := e.KeepAllUSD(); math.Abs(got-want) > 1e-12 {
		t.Errorf("keep-all pays %.9f, want %.9f", got, want)
	}

	d := evaluateAsSoonAsMay(t, e, outs).Decision
	got = Level{RecordedCompactions: d.RecordedCompactions, Compactions: d.Compactions, CompactionMisses: d.CompactionMisses, Misses: d.Misses,
		PeakContext: d.PeakContext, Rewrites: d.Rewrites}
	if diff := cmp.Diff(Level{RecordedCompactions: 1, CompactionMisses: 1, PeakContext: 24_400, Rewrites: 9}, got); diff != "" {
		t.Errorf("decision level (-want +got):\n%s", diff)
	}
	tr, err := Traces(outs, sessions, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{10_000, 20_000, 30_000, 40_000, 50_000, 19_000, 29_000, 48_100, 58_100, 68_100}; !cmp.Equal(tr[0].KeepAll, want) {
		t.Errorf("keep-all's trace %v, want %v", tr[0].KeepAll, want)
	}
}

// recordedSession is growingSession with a compaction recorded before call 6 that
// drops 41,000 tokens (outputs 1-3) for a 1,000-token summary, evaluated at a
// 100,000-token budget and a 180,000-token hard limit.
func recordedSession(t *testing.T) ([]Output, []Calls, Options, *Evaluator) {
	t.Helper()
	outs, sessions := growingSession()
	sessions[0].Recorded = []RecordedCompaction{{Call: 6, Dropped: 41_000, SummaryTokens: 1000}}
	opts := DefaultOptions()
	opts.Budget, opts.HardLimit = 100_000, 180_000
	return outs, sessions, opts, mustEval(t, outs, sessions, opts)
}

// TestStubAfterCompactionDropped: a prune decided after a compaction dropped its
// output (stubPhase) changes nothing: the output is out of the context already,
// so the stub saves nothing more and rewrites nothing. TestRecordedCompaction's
// session, whose recorded compaction before call 6 drops outputs 1-3, with only
// output 1 pruned, at step 8: the decision level is keep-all's, to the cent.
func TestStubAfterCompactionDropped(t *testing.T) {
	outs, _, _, e := recordedSession(t)
	ds := make([]PruneAt, len(outs))
	ds[0] = PruneAt{Step: 8}
	r, err := e.Evaluate("late", -1, ds)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(e.KeepAll().Decision, r.Decision); d != "" {
		t.Errorf("decision level (-keep-all +pruned after the drop):\n%s", d)
	}
}

// TestRecordedCompactionInvalid: a recorded compaction that drops more than the
// context holds, or before call 1, is refused; one after the session's last
// call is ignored.
func TestRecordedCompactionInvalid(t *testing.T) {
	for _, tc := range []struct {
		rc      RecordedCompaction
		wantErr bool
	}{
		{RecordedCompaction{Call: 6, Dropped: 60_001}, true},
		{RecordedCompaction{Call: 0, Dropped: 10}, true},
		{RecordedCompaction{Call: 6, Dropped: 10, SummaryTokens: -1}, true},
		{RecordedCompaction{Call: 11, Dropped: 10}, false},
	} {
		outs, sessions := growingSession()
		sessions[0].Recorded = []RecordedCompaction{tc.rc}
		_, err := NewEvaluator(outs, sessions, DefaultOptions())
		if got := errors.Is(err, ErrInvalid); got != tc.wantErr {
			t.Errorf("%+v: err %v, want ErrInvalid: %v", tc.rc, err, tc.wantErr)
		}
	}
}

// TestRecordedCompactionProperty: over random records (randomRecords, their
// contexts remade to grow as a history does: growingContexts), each session
// given a recorded compaction at a random call and, at random, an agent
// that compacts on its own too, every pruner goes through every recorded
// compaction once (RecordedCompactions, at both levels), the oracle still misses
// nothing, and no call sends a negative context (Traces).
func TestRecordedCompactionProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	for trial := range 300 {
		outs, sessions := randomRecords(rng)
		growingContexts(rng, outs, sessions)
		want := 0
		for i := range sessions {
			c := sessions[i].Context
			call := 2 + rng.IntN(len(c)-1)
			if c[call-1] == 0 {
				continue
			}
			sessions[i].Recorded = []RecordedCompaction{{Call: call, Dropped: 1 + rng.IntN(c[call-1]), SummaryTokens: rng.IntN(3000)}}
			want++
		}
		opts := DefaultOptions()
		if rng.IntN(2) == 0 {
			comp := Compaction{Point: 50_000 + rng.IntN(150_000), Margin: 10_000, SummaryTokens: 1000, KeepTokens: rng.IntN(30_000)}
			opts.CompactionOf = func(string, int) Compaction { return comp }
		}
		e := mustEval(t, outs, sessions, opts)
		oracle := e.Oracle()
		if oracle.Misses != 0 || oracle.Applied.Misses != 0 {
			t.Fatalf("trial %d: oracle misses %d (applied %d)", trial, oracle.Misses, oracle.Applied.Misses)
		}
		results := []Result{e.KeepAll(), oracle}
		for _, c := range []float64{0.2, 0.5, 1} {
			r, err := e.Evaluate("scorer", c, ScorerPrunes(outs, c, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
		}
		for _, r := range results {
			if r.Decision.RecordedCompactions != want || r.Applied.RecordedCompactions != want {
				t.Errorf("trial %d %s: %d and %d recorded compactions gone through, want %d", trial, r.Name, r.Decision.RecordedCompactions, r.Applied.RecordedCompactions, want)
			}
		}
		trs, err := Traces(outs, sessions, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trs {
			for s, ctx := range slices.Concat(tr.KeepAll, tr.Oracle.Context) {
				if ctx < 0 {
					t.Fatalf("trial %d session %s: a call (%d of keep-all then the oracle) sends %d tokens", trial, tr.Session, s+1, ctx)
				}
			}
		}
	}
}

// growingContexts remakes the contexts and offsets of randomRecords' sessions as a
// real history's: call s's context holds every output produced before it, in
// message order, with up to 5,000 tokens of other messages per call; an output's
// offset lies between the context of the call that produced it and the next's.
func growingContexts(rng *rand.Rand, outs []Output, sessions []Calls) {
	for i := range sessions {
		c := sessions[i].Context
		prev := 0
		for st := range c {
			extra := rng.IntN(5000)
			at := prev + extra/2
			for j := range outs {
				if o := &outs[j]; o.Session == sessions[i].Name && o.Step == st {
					o.Offset = at
					at += o.Tokens
				}
			}
			c[st] = at + extra - extra/2
			prev = c[st]
		}
	}
}
