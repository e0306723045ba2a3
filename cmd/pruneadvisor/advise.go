package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// adviseSummary is the run summary of `pruneadvisor advise`.
type adviseSummary struct {
	File              string         `json:"file"`
	Format            string         `json:"format"`
	SessionID         string         `json:"session_id"` // the id stubs and recalls are stored under
	Scorer            string         `json:"scorer"`
	Steps             int            `json:"steps"`                // the session's steps (assistant messages)
	SkippedLines      int            `json:"skipped_lines"`        // malformed lines --lenient skipped
	AdviseCalls       int            `json:"advise_calls"`         // Advise calls made: one per step plus a final one
	OutputTokens      int            `json:"output_tokens_before"` // tool-output tokens in the final context, unpruned
	OutputTokensAfter int            `json:"output_tokens_after"`  // the same with the stubs applied
	TokenSteps        int64          `json:"token_steps"`          // sum over steps of tool-output tokens in context, unpruned
	TokenStepsSaved   int64          `json:"token_steps_saved"`    // sum over steps of tokens the stubs removed
	PrunedByReason    map[string]int `json:"pruned_by_reason"`
	Rewrites          int            `json:"rewrites"`
	// RewritesByReason counts the rewrites by the planner's reason (cold-cache,
	// over-budget, hard-limit, pays).
	RewritesByReason map[string]int `json:"rewrites_by_reason"`
	// RewriteCostUSD and RewriteSavingUSD sum the planner's prices of the rewrites
	// made (dollars, the session's provider's price model).
	RewriteCostUSD   float64 `json:"rewrite_cost_usd"`
	RewriteSavingUSD float64 `json:"rewrite_saving_usd"`
	// ColdSteps counts the steps whose call found the prompt cache expired (from the
	// session's timestamps).
	ColdSteps      int            `json:"cold_steps"`
	Asks           int            `json:"asks"`
	ScorerFailures map[string]int `json:"scorer_failures"`
	StorageErrors  int            `json:"storage_errors"`
	DB             string         `json:"db"`
	Out            string         `json:"out,omitempty"`
}

type adviseFlags struct {
	scorerFlags
	configFlags
	db      string
	asJSON  bool
	out     string
	format  string
	lenient bool
	plan    bool
}

func adviseCmd(e *env) *cobra.Command {
	var f adviseFlags
	c := &cobra.Command{
		Use:   "advise FILE",
		Short: "Simulate the advisor over one session, step by step, and print what it would prune",
		Long: `advise replays one session exactly as a live agent would have seen it: at step t the
advisor sees only the messages before the t-th assistant message, then one last step
sees them all. It prints a summary (tool-output tokens before and after, token-steps
saved, outputs pruned by reason, rewrites, asks, scorer failures) and the final plan.
Originals of pruned outputs are stored in --db, so every stub can be recalled with
'pruneadvisor recall ID'. The advisor's clock is the session's own timestamps (Claude
Code, pi, Codex, Gemini CLI and OpenHands record them): where the agent paused for
longer than the cache TTL the cache is cold and a rewrite is free; a session without
timestamps is treated as warm throughout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAdvise(cmd.Context(), e, args[0], f)
		},
	}
	f.scorerFlags.register(c)
	f.configFlags.register(c)
	c.Flags().StringVar(&f.db, "db", defaultDBPath(), "store for originals, stubs, asks and decisions: an SQLite file, or a postgres:// URL")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the summary and final plan as JSON")
	c.Flags().StringVar(&f.out, "out", "", "write the final rewritten session, in its own format, to this file")
	c.Flags().StringVar(&f.format, "format", "", "force a session format ("+formatNames()+"; default: detected from the content)")
	c.Flags().BoolVar(&f.lenient, "lenient", false, "skip malformed lines")
	c.Flags().BoolVar(&f.plan, "plan", true, "print the final plan after the summary")
	return c
}

func runAdvise(ctx context.Context, e *env, file string, f adviseFlags) error {
	if err := checkFormat(f.format); err != nil {
		return err
	}
	if fi, err := os.Stat(file); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory: advise reads one session file (replay reads folders of them)", file)
	}
	s, err := transcript.ReadFile(file, transcript.Options{Format: transcript.Format(f.format), Lenient: f.lenient})
	if errors.Is(err, transcript.ErrMalformed) && !f.lenient {
		// The hint only where it helps: a line-per-record file reads without its
		// bad lines; one JSON document (a JSON array session) does not.
		if _, lerr := transcript.ReadFile(file, transcript.Options{Format: transcript.Format(f.format), Lenient: true}); lerr == nil {
			return fmt.Errorf("%w (--lenient skips malformed lines)", err)
		}
	}
	if err != nil {
		return err
	}
	cfg, err := f.configFlags.load()
	if err != nil {
		return usageError{err}
	}
	if cfg.Agent == "" {
		// The agent that wrote the session, as replay takes it: its compaction
		// point sets the hard limit (docs/DESIGN.md, "Compaction").
		cfg.Agent = advisor.AgentOf(s.Format)
	}
	store, closeStore, err := openStore(ctx, f.db)
	if err != nil {
		return err
	}
	defer closeStore()
	f.scorerFlags.useConfig(cfg)
	scorer, err := f.scorerFlags.build(ctx, e)
	if err != nil {
		return err
	}
	buf := &bufferedStore{Store: store}
	adv, err := advisor.New(cfg, scorer, buf)
	if err != nil {
		return usageError{err}
	}
	adv.Logger = e.log
	adv.Background = f.scorerFlags.background(e)
	if adv.RecallSecret, err = store.RecallSecret(ctx); err != nil {
		return err
	}
	// The advisor's clock is the transcript's call times, as in replay: a pause
	// longer than the cache TTL makes the cache cold there (a free rewrite); a
	// session without timestamps is warm throughout.
	base := time.Now()
	times, _, _ := replay.CallTimes(s, time.Duration(cfg.CacheTTL), base)
	step := 0
	adv.Clock = func() time.Time {
		if step < len(times) {
			return times[step]
		}
		return time.Time{}
	}
	runID := fmt.Sprintf("%s@advise-%x", advisor.SessionKey(s), base.UnixNano())
	sum := adviseSummary{File: file, Format: string(s.Format), SessionID: runID, DB: storage.Redact(f.db), Steps: s.Steps(), SkippedLines: s.Skipped,
		PrunedByReason: map[string]int{}, ScorerFailures: map[string]int{}, RewritesByReason: map[string]int{}}
	if scorer != nil {
		sum.Scorer = scorer.Name()
	} else {
		sum.Scorer = "none (rules only)"
	}
	// Each step's view extends the previous one (a prefix of s.Messages), so the
	// tool-output tokens in view are kept as a running total: summing the whole view
	// at every step made a run quadratic in the session's length (100,000 steps took
	// minutes; TestBadInputs "100k-steps").
	counted, inView := 0, int64(0)
	plan, err := replay.Simulate(ctx, adv, s, runID, true, func(p advisor.Plan, view []*transcript.Message) error {
		step++
		sum.AdviseCalls++
		if p.Rewrite {
			sum.Rewrites++
			sum.RewritesByReason[p.RewriteReason]++
			sum.RewriteCostUSD += p.RewriteCostUSD
			sum.RewriteSavingUSD += p.RewriteSavingUSD
		}
		if p.Cold {
			sum.ColdSteps++
		}
		sum.Asks += p.Asked
		for k, n := range p.ScorerFailures {
			sum.ScorerFailures[k] += n
		}
		if p.StorageError != "" {
			sum.StorageErrors++
		}
		sum.TokenStepsSaved += int64(p.SavedTokens)
		if len(view) < counted {
			counted, inView = 0, 0
		}
		for _, m := range view[counted:] {
			for _, o := range m.Outputs {
				inView += int64(o.Tokens)
			}
		}
		counted = len(view)
		sum.TokenSteps += inView
		return nil
	})
	if ferr := buf.flush(ctx); ferr != nil && err == nil {
		e.log.Warn("storage: cannot record asks, decisions or steps", "err", ferr)
		sum.StorageErrors++
	}
	if err != nil {
		return err
	}
	stubs := plan.Stubs
	for _, it := range plan.Items {
		sum.OutputTokens += it.Tokens
		if it.Decision == advisor.DecisionPruned || it.Decision == advisor.DecisionRecalled {
			sum.PrunedByReason[reasonClass(it.Reason)]++
			sum.OutputTokensAfter += tokencount.Count(it.Stub)
		} else {
			sum.OutputTokensAfter += it.Tokens
		}
	}
	if f.out != "" {
		data, err := s.Rewrite(stubs)
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.out, data, 0o644); err != nil {
			return fmt.Errorf("write rewritten session: %w", err)
		}
		sum.Out = f.out
	}
	if f.asJSON {
		return e.printJSON(struct {
			Summary adviseSummary `json:"summary"`
			Plan    advisor.Plan  `json:"plan"`
		}{sum, plan})
	}
	printAdvise(e, sum, plan, f.plan)
	return nil
}

// reasonClass groups a decision reason for counting by its kind, without the
// scores and cutoffs that make each reason's text its own: "superseded",
// "duplicate", "score", "disposable", "over budget" (a forced rewrite's
// "over budget, score 0.03 < over-budget cutoff 0.10"), "hard limit, last resort",
// "hard limit"; any other reason as it is.
func reasonClass(reason string) string {
	for _, c := range []string{"superseded", "duplicate", "score", "disposable", "over budget", "hard limit, last resort", "hard limit"} {
		if strings.HasPrefix(reason, c) {
			return c
		}
	}
	return reason
}

func printAdvise(e *env, sum adviseSummary, plan advisor.Plan, withPlan bool) {
	var out bytes.Buffer
	defer func() { _, _ = e.stdout.Write(trimLines(out.Bytes())) }()
	tw := tabwriter.NewWriter(&out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "session\t%s (%s, %d steps)\n", safe(sum.File), sum.Format, sum.Steps)
	fmt.Fprintf(tw, "scorer\t%s\n", sum.Scorer)
	if sum.SkippedLines > 0 {
		fmt.Fprintf(tw, "malformed lines\t%d skipped\t(--lenient)\n", sum.SkippedLines)
	}
	fmt.Fprintf(tw, "tool-output tokens\t%d before, %d after\t(%.1f%% removed)\n",
		sum.OutputTokens, sum.OutputTokensAfter, pct(sum.OutputTokens-sum.OutputTokensAfter, sum.OutputTokens))
	fmt.Fprintf(tw, "token-steps saved\t%d of %d\t(%.1f%%)\n", sum.TokenStepsSaved, sum.TokenSteps, pct64(sum.TokenStepsSaved, sum.TokenSteps))
	fmt.Fprintf(tw, "pruned\t%d\t%s\n", total(sum.PrunedByReason), countList(sum.PrunedByReason))
	fmt.Fprintf(tw, "rewrites\t%d\t%s\n", sum.Rewrites, countList(sum.RewritesByReason))
	if sum.Rewrites > 0 {
		fmt.Fprintf(tw, "rewrite prices\t$%.4f cost, $%.4f saving\t(expected, by the planner)\n", sum.RewriteCostUSD, sum.RewriteSavingUSD)
	}
	fmt.Fprintf(tw, "cold-cache steps\t%d\t(calls after a pause longer than the cache TTL)\n", sum.ColdSteps)
	fmt.Fprintf(tw, "asks\t%d\n", sum.Asks)
	fmt.Fprintf(tw, "scorer failures\t%d\t%s\n", total(sum.ScorerFailures), countList(sum.ScorerFailures))
	if sum.StorageErrors > 0 {
		fmt.Fprintf(tw, "storage errors\t%d steps\t(nothing new pruned at those steps)\n", sum.StorageErrors)
	}
	fmt.Fprintf(tw, "originals stored in\t%s\t(session %s)\n", safe(sum.DB), safe(sum.SessionID))
	if sum.Out != "" {
		fmt.Fprintf(tw, "rewritten session\t%s\n", safe(sum.Out))
	}
	tw.Flush()
	if !withPlan {
		return
	}
	fmt.Fprintf(&out, "\nplan at step %d (context %d tokens, budget %d):\n", plan.Step, plan.ContextTokens, plan.Budget)
	if plan.Waiting != "" {
		fmt.Fprintf(&out, "pending prunes wait: %s\n", safe(plan.Waiting))
	}
	tw = tabwriter.NewWriter(&out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tTOOL\tTARGET\tTOKENS\tDECISION\tSCORE\tREASON\tRECALL")
	items := append([]advisor.Item(nil), plan.Items...)
	sort.SliceStable(items, func(i, j int) bool { return items[i].Step < items[j].Step })
	for _, it := range items {
		score := "-"
		if it.Score >= 0 {
			score = fmt.Sprintf("%.2f", it.Score)
		}
		recall := ""
		if it.Decision == advisor.DecisionPruned {
			recall = it.RecallID
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", it.Step, safe(it.Tool), safe(textcut.RunesEllipsis(it.Summary, 50)), it.Tokens, it.Decision, score, safe(it.Reason), recall)
	}
	tw.Flush()
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func pct64(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
