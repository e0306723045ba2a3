package ledger

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pruneadvisor/pruneadvisor/prices"
)

// The expected dollars are worked out by hand from the per-MTok list prices
// (Anthropic: input 3, read 0.30, write 3.75, 1-hour write 6, output 15; OpenAI:
// input 1.25, cached 0.125, output 10), not from Cost.
func TestKeepAll(t *testing.T) {
	anth, oai := prices.MustDefault(prices.Anthropic), prices.MustDefault(prices.OpenAI)
	tests := []struct {
		name     string
		u        Usage
		m        prices.Model
		p        Request
		paid     float64
		want     Estimate
		comments string
	}{
		{
			name: "warm, no rewrite: the removed tokens are read",
			// A real Claude Code usage (../shared/sessions/claude-code/57bb5674...).
			u: Usage{Input: 9, CacheRead: 19099, CacheWrite5m: 616, Output: 6}, m: anth,
			p: Request{Advised: true, Context: 20000, Full: 24000},
			// 9*3 + 19099*0.3 + 616*3.75 + 6*15 = 27 + 5729.7 + 2310 + 90 = 8156.7 micro$
			paid: 0.0081567,
			// + 4000*0.3 = 1200 micro$
			want: Estimate{KeepAllUSD: 0.0093567, Removed: 4000},
		},
		{
			name: "unpruned past the window: keep-all is at most a window's worth",
			// A 30 MB tool result: 10 million tokens unpruned, 20,000 sent. Keep-all
			// could not have sent it; it is counted at the window (200,000), so the
			// removed tokens are 180,000, not 9,980,000.
			u: Usage{Input: 9, CacheRead: 19099, CacheWrite5m: 616, Output: 6}, m: anth,
			p:    Request{Advised: true, Context: 20000, Full: 10_000_000, Window: 200_000},
			paid: 0.0081567,
			// + 180000*0.3 = 54000 micro$
			want: Estimate{KeepAllUSD: 0.0621567, Removed: 180000},
		},
		{
			name: "warm rewrite: writes beyond the new turn are the rewrite's",
			u:    Usage{Input: 3, CacheRead: 10000, CacheWrite5m: 30000, Output: 100}, m: anth,
			p: Request{Advised: true, Context: 40000, Full: 60000, PrevFull: 58000, PrevKnown: true, Rewrite: "over-budget"},
			// 9 + 3000 + 112500 + 1500 micro$
			paid: 0.117009,
			// rewrite: 30000 - (60000-58000) = 28000 tokens at 3.75-0.30 = 96600 micro$;
			// keep-all: 3*3 + (10000+28000+20000)*0.3 + 2000*3.75 + 100*15 = 9+17400+7500+1500
			want: Estimate{KeepAllUSD: 0.026409, Removed: 20000, RewriteTokens: 28000, RewriteUSD: 0.0966},
		},
		{
			name: "warm rewrite, previous request unknown: every write is the rewrite's",
			u:    Usage{Input: 3, CacheRead: 10000, CacheWrite5m: 30000, Output: 100}, m: anth,
			p:    Request{Advised: true, Context: 40000, Full: 60000, Rewrite: "pays"},
			paid: 0.117009,
			// 30000*3.45 = 103500 micro$; keep-all 9 + 60000*0.3 + 0 + 1500 = 19509
			want: Estimate{KeepAllUSD: 0.019509, Removed: 20000, RewriteTokens: 30000, RewriteUSD: 0.1035},
		},
		{
			name: "warm rewrite with 1-hour writes: attributed in proportion",
			u:    Usage{CacheRead: 1000, CacheWrite5m: 1000, CacheWrite1h: 3000}, m: anth,
			p: Request{Advised: true, Context: 5000, Full: 5000, PrevFull: 4000, PrevKnown: true, Rewrite: "hard-limit"},
			// 1000*0.3 + 1000*3.75 + 3000*6 = 300 + 3750 + 18000
			paid: 0.02205,
			// 3000 of 4000 written are the rewrite's: 2250 at 1h (6-0.3), 750 at 5m (3.75-0.3)
			// = 12825 + 2587.5; keep-all 4000*0.3 + 250*3.75 + 750*6 = 1200 + 937.5 + 4500
			want: Estimate{KeepAllUSD: 0.0066375, RewriteTokens: 3000, RewriteUSD: 0.0154125},
		},
		{
			name: "cold cache: the removed tokens are written at the call's TTL split",
			u:    Usage{Input: 5, CacheWrite5m: 1000, CacheWrite1h: 3000, Output: 10}, m: anth,
			p: Request{Advised: true, Context: 4000, Full: 6000, Rewrite: "cold-cache", Cold: true},
			// 15 + 3750 + 18000 + 150
			paid: 0.021915,
			// + 500*3.75 + 1500*6 = 1875 + 9000
			want: Estimate{KeepAllUSD: 0.03279, Removed: 2000},
		},
		{
			name: "advisor found the cache cold, only the system prompt was read: written",
			u:    Usage{CacheRead: 2000, CacheWrite5m: 8000}, m: anth,
			p: Request{Advised: true, Context: 10000, Full: 11000, Rewrite: "cold-cache", Cold: true},
			// 600 + 30000
			paid: 0.0306,
			// + 1000*3.75
			want: Estimate{KeepAllUSD: 0.03435, Removed: 1000},
		},
		{
			name: "no caching at all: the removed tokens are plain input",
			u:    Usage{Input: 8000, Output: 10}, m: anth,
			p: Request{Advised: true, Context: 8000, Full: 9000},
			// 24000 + 150
			paid: 0.02415,
			want: Estimate{KeepAllUSD: 0.02715, Removed: 1000},
		},
		{
			name: "OpenAI warm rewrite: the uncached input is the rewrite's bucket",
			u:    Usage{Input: 5000, CacheRead: 10000, Output: 50}, m: oai,
			p: Request{Advised: true, Context: 15000, Full: 18000, PrevFull: 17500, PrevKnown: true, Rewrite: "over-budget"},
			// 6250 + 1250 + 500
			paid: 0.008,
			// 4500*(1.25-0.125) = 5062.5; keep-all 500*1.25 + 17500*0.125 + 500 = 625+2187.5+500
			want: Estimate{KeepAllUSD: 0.0033125, Removed: 3000, RewriteTokens: 4500, RewriteUSD: 0.0050625},
		},
		{
			name: "OpenAI rewrite of the first message: nothing read, the cache still warm",
			u:    Usage{Input: 1256, Output: 14}, m: oai,
			p: Request{Advised: true, Context: 1320, Full: 1824, PrevFull: 1279, PrevKnown: true, Rewrite: "over-budget"},
			// 1570 + 140
			paid: 0.00171,
			// 1256 - 545 = 711 tokens the rewrite's, at 1.25-0.125 = 799.875; keep-all
			// 545*1.25 + (711+504)*0.125 + 140 = 681.25 + 151.875 + 140
			want: Estimate{KeepAllUSD: 0.000973125, Removed: 504, RewriteTokens: 711, RewriteUSD: 0.000799875},
		},
		{
			name: "new turn larger than the writes: nothing is the rewrite's",
			u:    Usage{CacheRead: 10000, CacheWrite5m: 500}, m: anth,
			p:    Request{Advised: true, Context: 10500, Full: 12000, PrevFull: 10000, PrevKnown: true, Rewrite: "pays"},
			paid: 0.004875,
			// + 1500*0.3
			want: Estimate{KeepAllUSD: 0.005325, Removed: 1500},
		},
		{
			name: "not advised: its own keep-all",
			u:    Usage{Input: 100, CacheRead: 1000, CacheWrite5m: 200, Output: 20}, m: anth,
			p: Request{Context: 100, Full: 5000, Rewrite: "pays"},
			// 300 + 300 + 750 + 300
			paid: 0.00165,
			want: Estimate{KeepAllUSD: 0.00165},
		},
	}
	approx := cmpopts.EquateApprox(0, 1e-12)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.u.Cost(tt.m); math.Abs(got-tt.paid) > 1e-12 {
				t.Errorf("Cost = %.10f; want %.10f", got, tt.paid)
			}
			got := KeepAll(tt.u, tt.m, tt.p)
			if d := cmp.Diff(tt.want, got, approx); d != "" {
				t.Errorf("KeepAll (-want +got):\n%s", d)
			}
			// Saved is the removed tokens' reads minus the rewrite's premium on a
			// warm cache: the planner's model (docs/DESIGN.md step 6), seen from the bill.
			if tt.p.Advised && (tt.u.CacheRead > 0 || tt.p.Rewrite != "") && !tt.p.Cold {
				want := float64(got.Removed)*tt.m.Read() - got.RewriteUSD
				if saved := got.KeepAllUSD - tt.paid; math.Abs(saved-want) > 1e-12 {
					t.Errorf("saved %.10f; want removed x read - rewrite = %.10f", saved, want)
				}
			}
		})
	}
}

func TestTotals(t *testing.T) {
	entries := []Entry{
		{Result: ResultOK, Usage: Usage{Input: 1, CacheRead: 2, CacheWrite5m: 3, CacheWrite1h: 4, Output: 5},
			PaidUSD: 1, KeepAllUSD: 1.5, RemovedTokens: 10, Rewrite: "pays", RewriteTokens: 7, RewriteUSD: 0.25, PlannedRewriteUSD: 0.2},
		{Result: ResultNone, Rewrite: "over-budget", PlannedRewriteUSD: 0.1},
		{Result: ResultMalformed},
		{Result: ResultError},
		{Result: ResultOK, Usage: Usage{Input: 10, Output: 1}, PaidUSD: 2, KeepAllUSD: 1.75, RemovedTokens: 5},
	}
	var a, b Totals
	for i, e := range entries {
		if i < 2 {
			a.Add(e)
		} else {
			b.Add(e)
		}
	}
	a.Recalls, b.Recalls = 2, 1
	var sum Totals
	sum.Merge(a)
	sum.Merge(b)
	want := Totals{
		Requests: 5, WithUsage: 2, NoUsage: 1, Malformed: 1, UpstreamErrors: 1,
		Usage:   Usage{Input: 11, CacheRead: 2, CacheWrite5m: 3, CacheWrite1h: 4, Output: 6},
		PaidUSD: 3, KeepAllUSD: 3.25, SavedUSD: 0.25, RemovedTokens: 15,
		Rewrites: 2, RewriteTokens: 7, RewriteUSD: 0.25, PlannedRewriteUSD: 0.3, Recalls: 3,
	}
	if d := cmp.Diff(want, sum, cmpopts.EquateApprox(0, 1e-12)); d != "" {
		t.Errorf("totals (-want +got):\n%s", d)
	}
	if got := want.Usage.Prompt(); got != 20 {
		t.Errorf("Prompt = %d; want 20", got)
	}
}
