package ledger

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// One session's totals, entry by entry (what the store does for a session before
// any Merge): every token kind is the sum of the entries', and what was saved is
// keep-all minus paid after each entry, not only after a merge. The sums are
// worked by hand from the entries below.
func TestSessionTotalsEntryByEntry(t *testing.T) {
	entries := []Entry{
		{Result: ResultOK, Usage: Usage{Input: 3, CacheRead: 19099, CacheWrite5m: 616, Output: 6},
			PaidUSD: 0.0081567, KeepAllUSD: 0.0093567, RemovedTokens: 4000},
		{Result: ResultOK, Usage: Usage{Input: 5, CacheWrite5m: 1000, CacheWrite1h: 3000, Output: 10},
			PaidUSD: 0.021915, KeepAllUSD: 0.03279, RemovedTokens: 2000, Rewrite: "cold-cache", Cold: true},
		{Result: ResultOK, Usage: Usage{Input: 1256, CacheRead: 40, CacheWrite1h: 7, Output: 14},
			PaidUSD: 0.00171, KeepAllUSD: 0.000973125, RemovedTokens: 504, Rewrite: "over-budget",
			RewriteTokens: 711, RewriteUSD: 0.000799875},
	}
	var got Totals
	var saved []float64
	for _, e := range entries {
		got.Add(e)
		saved = append(saved, got.SavedUSD)
	}
	want := Totals{
		Requests: 3, WithUsage: 3,
		// 3+5+1256, 19099+0+40, 616+1000+0, 0+3000+7, 6+10+14
		Usage:   Usage{Input: 1264, CacheRead: 19139, CacheWrite5m: 1616, CacheWrite1h: 3007, Output: 30},
		PaidUSD: 0.0317817, KeepAllUSD: 0.043119825,
		// 0.043119825 - 0.0317817
		SavedUSD:      0.011338125,
		RemovedTokens: 6504, Rewrites: 2, RewriteTokens: 711, RewriteUSD: 0.000799875,
	}
	approx := cmpopts.EquateApprox(0, 1e-12)
	if d := cmp.Diff(want, got, approx); d != "" {
		t.Errorf("totals (-want +got):\n%s", d)
	}
	// After each entry: 0.0093567-0.0081567; + 0.03279-0.021915; + 0.000973125-0.00171.
	wantSaved := []float64{0.0012, 0.012075, 0.011338125}
	if d := cmp.Diff(wantSaved, saved, approx); d != "" {
		t.Errorf("saved after each entry (-want +got):\n%s", d)
	}
}
