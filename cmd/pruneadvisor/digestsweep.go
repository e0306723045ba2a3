package main

import (
	"fmt"
	"io"

	"github.com/pruneadvisor/pruneadvisor/tuning"
)

// printDigestSweep writes the digest sweep as a table: per digest budget, the
// front's size, its best point within the target miss rate (cutoff, miss rate,
// token-steps kept out net of the stubs, that as a share of the oracle's, and
// that share's median and 10th-90th percentiles over resampled sessions), and the
// recommended budget.
func printDigestSweep(w io.Writer, out *calibrateJSON, target float64) {
	if len(out.DigestSweep) == 0 {
		return
	}
	grows, width := "", 6
	if share := out.DigestSweepShare; share > 0 {
		grows, width = fmt.Sprintf("; each budget growing to %.4g%% of a long output, as the replay's digest_share did", 100*share), 13
	}
	label := func(b int) string { return tuning.DigestSize{Tokens: b, Share: out.DigestSweepShare}.String() }
	fmt.Fprintf(w, "\ndigest budget sweep: the scorer's front with stubs of each digest budget (decision level, stub tokens paid%s), best point at <= %.1f%% miss\n", grows, 100*target)
	fmt.Fprintf(w, "  %*s  %6s  %7s  %9s  %14s  %14s  %15s  %s\n", width, "digest", "points", "cutoff", "miss rate", "net token-steps", "stub tok-steps", "share of oracle", "resampled sessions: median (p10-p90)")
	for _, p := range out.DigestSweep {
		if p.Best == nil {
			fmt.Fprintf(w, "  %*s  %6d  no cutoff within the target\n", width, label(p.Budget), len(p.Front))
			continue
		}
		share := 0.0
		if p.OracleTokenSteps > 0 {
			share = float64(p.Best.Net()) / float64(p.OracleTokenSteps)
		}
		band := ""
		if p.Band != nil {
			band = fmt.Sprintf("%.1f%% (%.1f-%.1f%%)", 100*p.Band.Median, 100*p.Band.P10, 100*p.Band.P90)
		}
		fmt.Fprintf(w, "  %*s  %6d  %7.4f  %9.3f  %14d  %14d  %14.1f%%  %s\n", width, label(p.Budget), len(p.Front), p.Best.Cutoff, p.Best.MissRate, p.Best.Net(), p.Best.StubTokenSteps, 100*share, band)
	}
	if out.DigestSweepBudget >= 0 {
		fmt.Fprintf(w, "recommended digest budget from the front: %s tokens (most net token-steps within the target)\n", label(out.DigestSweepBudget))
	} else {
		fmt.Fprintln(w, "no digest budget keeps any cutoff within the target")
	}
}
