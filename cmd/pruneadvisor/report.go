package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/report"
)

type reportFlags struct {
	calibrateFlags
	out  string
	open bool
}

func reportCmd(e *env) *cobra.Command {
	var f reportFlags
	c := &cobra.Command{
		Use:   "report",
		Short: "Write what the advisor did on the replayed sessions as one HTML page",
		Long: `report reads the replays stored by 'pruneadvisor replay' and writes one self-contained
HTML file (--out): no network loads, plots as inline SVG, one small inline script
(the stub filter), a Content-Security-Policy that allows nothing else.

It shows: an overview (the sessions, the scorers' reliability and recommended
cutoffs, and at every --budget what keep-all pays and what the advisor, each
baseline and each anchor would have paid, with their misses, rewrites and calls
over budget); the Pareto front (miss rate against the share of the oracle's
token-steps: each scorer's sweep, keep-all, rules, recency, the oracle, the
anchors); the reliability diagram; per session, the context every call sends under
keep-all, the advisor's own rewrites and the oracle, with the budget, the hard limit
(the compaction point less a step), each rewrite and each recall marked; and the
table of the advisor's stubs (tool, summary, tokens, reason, score, recall id) with
a filter.

Every figure is the one 'pruneadvisor calibrate --json' prints for the same store
and flags: the report is computed by the same code (the flags shared with calibrate
mean the same). The per-session contexts are simulated by the code that prices the
pruners, at the replay's own budget.

Exit status: 0 when the report was written; 1 when the store holds no finished
replay or cannot be read, or the file cannot be written; 2 for bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReport(cmd.Context(), e, f)
		},
	}
	f.calibrateFlags.register(c)
	c.Flags().StringVar(&f.out, "out", "report.html", "the HTML file to write")
	c.Flags().BoolVar(&f.open, "open", false, "open the written file in the default browser (xdg-open, open or start)")
	return c
}

func runReport(ctx context.Context, e *env, f reportFlags) error {
	if f.out == "" {
		return usageError{fmt.Errorf("--out: want a file name")}
	}
	start := time.Now()
	d, err := reportData(ctx, e, f.calibrateFlags)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, d); err != nil {
		return err
	}
	if err := os.WriteFile(f.out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(e.stdout, "wrote %s: %s, %s, %.1f MB in %.1f s\n", f.out, counted(len(d.Calibration.Sessions), "session"), counted(len(d.Stubs), "stub"),
		float64(buf.Len())/1e6, time.Since(start).Seconds())
	if f.open {
		if err := openBrowser(f.out); err != nil {
			fmt.Fprintf(e.stderr, "pruneadvisor: report: could not open %s: %v\n", f.out, err)
		}
	}
	return nil
}

// reportData computes the report of a store: the calibration exactly as
// calibrate --json computes it with the same flags (computeCalibration, without
// the per-session rows, which the page does not show), the advisor's stubs, and
// each session's trace at the replay's own budget.
func reportData(ctx context.Context, e *env, f calibrateFlags) (report.Data, error) {
	f.asJSON = false
	run, err := computeCalibration(ctx, e, f, true)
	if err != nil {
		return report.Data{}, err
	}
	defer run.closeDB()
	opts := run.opts
	opts.Budget = run.replayBudget
	var applied []int
	if run.groups[0].Scorer != replay.ScorerNone {
		applied = run.in.Applied
	}
	traces, err := calibrate.Traces(run.in.Base, run.in.Calls, opts, applied)
	if err != nil {
		return report.Data{}, fmt.Errorf("report: %w", err)
	}
	return report.Data{Calibration: run.out, Traces: traces, Budget: run.replayBudget, Stubs: run.in.Stubs, Generated: time.Now()}, nil
}

// openBrowser opens path with the platform's opener, without waiting for it.
func openBrowser(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", abs)
	case "windows":
		cmd = exec.Command("cmd", "/c", "start", "", abs)
	default:
		cmd = exec.Command("xdg-open", abs)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// counted writes n and the noun, plural unless n is 1: "1 session", "2 stubs".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
