package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/pruneadvisor/pruneadvisor/tuning"
)

// printLagCost prints the lag comparison's table.
func printLagCost(w io.Writer, rows []tuning.LagRow, scorer string, budget int) error {
	fmt.Fprintf(w, "what the ask lag costs (scorer %s, the advisor's own rewrites at the replays' budget %d):\n", scorer, budget)
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lag\tpruned\tmisses\tmiss rate\ttoken-steps\tlost to the lag\tnet $\trewrites\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%d\t%d\t%.2f\t%d\t\n", r.Lag, r.Pruned, r.Misses, r.MissRate, r.TokenSteps, r.LostTokenSteps, r.NetUSD, r.Rewrites)
	}
	return tw.Flush()
}
