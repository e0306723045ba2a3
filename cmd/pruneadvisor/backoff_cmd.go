package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/backoff"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// defaultSchedules is --schedules' default: every step (the reference), every 3
// steps, the DESIGN.md default doubling schedule, and a slower doubling.
const defaultSchedules = "1;3;3,6,12,24;6,12,24,48"

type backoffFlags struct {
	priceFlags
	db        string
	schedules string
	scorer    string
	model     string
	settings  []string
	budget    int
	tolerance float64
	workers   int
	asJSON    bool
	memory    memoryFlag
}

// backoffJSON is backoff's --json output.
type backoffJSON struct {
	DB      string               `json:"db"`
	Replay  string               `json:"replay"`
	Scorer  string               `json:"scorer"`
	Budget  int                  `json:"budget"`
	Dropped []string             `json:"dropped,omitempty"`
	Report  replay.BackoffReport `json:"report"`
}

func backoffCmd(e *env) *cobra.Command {
	var f backoffFlags
	c := &cobra.Command{
		Use:   "backoff",
		Short: "Replay the stored sessions under several ask back-off schedules and recommend one",
		Long: `backoff reads the sessions of a stored replay again (their paths are in --db; a file
whose content changed since is left out) and replays each in this process under every
schedule of --schedules (separated by ';', each in the advisor's syntax: "1" every
step, "every:K" or "K", "3,6,12,24", "doubling:F[:M]"), with the replay's advisor
settings and scorer. Every-step asking ("1") is the reference and is added first when
missing. Nothing is written to --db.

For each schedule it reports asks (and asks per candidate output), scorer tokens
(the request the Ollama scorer would send, estimated) and scorer time, prunes that
came later than under every-step asking and the token-steps that cost, prunes that
came earlier, decisions that changed (pruned under one schedule only), and the
savings: token-steps saved, misses, cache rewrites and net dollars (calibrate's
accounting at the replay's cutoff). It recommends the schedule with the fewest
scorer tokens among those saving at least (1 - --tolerance) of the reference's
token-steps with no higher miss rate.

Re-asks happen only while a session is over its budget (DESIGN.md step 5), so
schedules differ only on sessions that grow past it; --budget lowers the budget to
see the schedules at work on smaller sessions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBackoff(cmd.Context(), e, f)
		},
	}
	f.priceFlags.register(c)
	c.Flags().StringVar(&f.db, "db", defaultDBPath(), "store holding the replay: an SQLite file, or a postgres:// URL")
	c.Flags().StringVar(&f.schedules, "schedules", defaultSchedules, "schedules to compare, separated by ';'")
	c.Flags().StringVar(&f.scorer, "scorer", "stored", "stored (the replay's scorer) | lexical | ollama | none")
	c.Flags().StringVar(&f.model, "model", ollama.DefaultModel, "Ollama model for --scorer ollama")
	c.Flags().StringSliceVar(&f.settings, "settings", nil, "use the replay whose settings hash starts with this prefix (default: the one with the most sessions)")
	c.Flags().IntVar(&f.budget, "budget", 0, "context budget in tokens for every schedule (default: the replay's)")
	c.Flags().Float64Var(&f.tolerance, "tolerance", 0.02, "share of the reference's token-steps a recommended schedule may give up")
	c.Flags().IntVar(&f.workers, "workers", 0, "sessions replayed at once (default: the number of CPUs, 1 with Ollama)")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	f.memory.register(c)
	return c
}

// parseSchedules splits and validates --schedules, putting every-step asking first.
func parseSchedules(text string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	hasRef := false
	for _, part := range strings.Split(text, ";") {
		p := strings.TrimSpace(part)
		if p == "" {
			continue
		}
		s, err := backoff.Parse(p)
		if err != nil {
			return nil, err
		}
		key := s.String()
		if seen[key] {
			continue
		}
		seen[key] = true
		if key == "1" {
			hasRef = true
			out = append([]string{p}, out...)
			continue
		}
		out = append(out, p)
	}
	if !hasRef {
		out = append([]string{"1"}, out...)
	}
	return out, nil
}

// storedScorer rebuilds the scorer a replay recorded: "lexical", "none" (nil),
// "keep", "fitted" (the embedded model), "fitted:FILE" when the replay's config
// names that model file (model_file), or "ollama:MODEL:PROMPT" (prompt p1 or p2).
func storedScorer(name string, cfg advisor.Config) (advisor.Scorer, error) {
	switch {
	case name == replay.ScorerNone:
		return nil, nil
	case name == "lexical":
		return lexical.New(), nil
	case name == "keep":
		return fitted.KeepScorer{}, nil
	case name == "fitted":
		return fitted.NewDefault()
	case cfg.ModelFile != "" && name == "fitted:"+filepath.Base(cfg.ModelFile):
		m, err := fitted.Load(cfg.ModelFile)
		if err != nil {
			return nil, err
		}
		return fitted.New(m, filepath.Base(cfg.ModelFile)), nil
	}
	if model, prompt, ok := ollama.ParseName(name); ok {
		client, err := api.ClientFromEnvironment()
		if err != nil {
			return nil, fmt.Errorf("ollama client: %w", err)
		}
		sc := ollama.New(client, model)
		sc.Prompt = prompt
		return sc, nil
	}
	return nil, usageError{fmt.Errorf("cannot rebuild the stored scorer %q; choose one with --scorer lexical|ollama|none", name)}
}

func runBackoff(ctx context.Context, e *env, f backoffFlags) error {
	schedules, err := parseSchedules(f.schedules)
	if err != nil {
		return usageError{err}
	}
	if f.tolerance < 0 || f.tolerance > 1 || f.tolerance != f.tolerance {
		return usageError{fmt.Errorf("--tolerance %v: want a share in [0,1]", f.tolerance)}
	}
	if f.budget < 0 {
		return usageError{fmt.Errorf("--budget %d: want a positive number of tokens", f.budget)}
	}
	restore, err := f.memory.apply()
	if err != nil {
		return err
	}
	defer restore()
	_, closeDB, groups, err := openGroups(ctx, f.db, f.settings)
	if err != nil {
		return err
	}
	defer closeDB()
	g := groups[0]
	cfg := g.settings.Config
	if f.budget > 0 {
		cfg.Budget = f.budget
	}
	var scorer advisor.Scorer
	switch f.scorer {
	case "stored":
		scorer, err = storedScorer(g.scorer, cfg)
	case "lexical", "ollama", "none":
		scorer, err = (&scorerFlags{kind: f.scorer, model: f.model, timeout: ollama.DefaultTimeout}).build(ctx, e)
	default:
		err = usageError{fmt.Errorf("--scorer %q: want stored, lexical, ollama or none", f.scorer)}
	}
	if err != nil {
		return err
	}
	workers := f.workers
	if workers == 0 {
		workers = defaultWorkers(scorer)
	}
	replayers := make([]*replay.Replayer, len(schedules))
	for i, s := range schedules {
		c := cfg
		c.Schedule = s
		if err := c.Validate(); err != nil {
			return usageError{err}
		}
		replayers[i] = &replay.Replayer{Config: c, Scorer: scorer, Lenient: g.settings.Lenient, Sizer: ollama.Sizer{},
			AskLag: g.settings.AskLag, AskLatency: g.settings.AskLatency} // the stored replay's modelled lag
	}

	opts, err := f.priceFlags.options(cfg)
	if err != nil {
		return err
	}
	// The scorer's own cutoff (scorer_cutoffs, e.g. 0.05 for fitted), as the
	// replayed advisor used it.
	cutoff := cfg.Cutoff
	if scorer != nil {
		cutoff = cfg.CutoffFor(scorer.Name())
	}
	comparison, err := replay.NewComparison(schedules, cutoff, opts, f.tolerance)
	if err != nil {
		return err
	}
	out := backoffJSON{DB: storage.Redact(f.db), Replay: g.label(), Budget: cfg.BudgetTokens()}
	out.Scorer = replay.ScorerNone
	if scorer != nil {
		out.Scorer = scorer.Name()
	}
	// Each session is replayed under every schedule, folded into the comparison
	// in session order, and forgotten: memory stays flat in the number of sessions.
	sessions := g.sessions
	inOrder(len(sessions), workers, func(i int) ([]*replay.Record, error) {
		src, err := loadSource(sessions[i], g.settings.Lenient)
		if err != nil {
			return nil, err
		}
		recs := make([]*replay.Record, len(schedules))
		for k, rp := range replayers {
			if recs[k], err = rp.Replay(ctx, src); err != nil {
				return nil, err
			}
			recs[k].Decisions = nil
		}
		return recs, nil
	}, func(i int, recs []*replay.Record, err error) {
		if err == nil {
			err = comparison.Add(recs)
		}
		if err != nil && ctx.Err() == nil {
			out.Dropped = append(out.Dropped, fmt.Sprintf("%s: %v", sessions[i].Path, err))
			fmt.Fprintf(e.stderr, "pruneadvisor: backoff: %s left out: %v\n", sessions[i].Path, err)
		}
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	rep := comparison.Report()
	if rep.Sessions == 0 {
		return fmt.Errorf("backoff: no session could be replayed")
	}
	out.Report = rep
	if f.asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printBackoff(e.stdout, out)
	return nil
}

// inOrder runs work(i) for i in [0, n) on up to workers goroutines and calls fold
// with each result in index order, from one goroutine at a time. A result waits
// for the ones before it, and no work starts more than 2*workers indexes ahead of
// the next to fold, so at most about that many results are held at once.
func inOrder[T any](n, workers int, work func(i int) (T, error), fold func(i int, v T, err error)) {
	workers = max(workers, 1)
	window := 2 * workers
	type result struct {
		v   T
		err error
	}
	var mu sync.Mutex
	room := sync.NewCond(&mu)
	next := 0
	held := map[int]result{}
	parallel(n, workers, func(i int) error {
		mu.Lock()
		for i >= next+window {
			room.Wait()
		}
		mu.Unlock()
		v, err := work(i)
		mu.Lock()
		defer mu.Unlock()
		held[i] = result{v, err}
		for r, ok := held[next]; ok; r, ok = held[next] {
			delete(held, next)
			fold(next, r.v, r.err)
			next++
		}
		room.Broadcast()
		return nil
	})
}

func printBackoff(w io.Writer, out backoffJSON) {
	rep := out.Report
	fmt.Fprintf(w, "back-off over %d sessions of replay %s\n", rep.Sessions, out.Replay)
	fmt.Fprintf(w, "scorer %s, cutoff %.2f, budget %d tokens; reference %q\n", out.Scorer, rep.Cutoff, out.Budget, rep.Reference)
	for _, d := range out.Dropped {
		fmt.Fprintf(w, "  left out: %s\n", d)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "schedule\tasks\tasks/cand\tscorer tokens\tscorer time\tover-budget steps\tlater\tlater token-steps\tearlier\tchanged\tpruned\tmisses\ttoken-steps\trewrites\tnet $\t\n")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t\n",
			r.Schedule, r.Asks, r.AsksPerCandidate, r.ScorerTokens, r.ScorerTime.Round(time.Millisecond), r.OverBudgetSteps,
			r.Later, r.LaterTokenSteps, r.Earlier, r.Changed, r.Result.Pruned, r.Result.Misses, r.Result.TokenSteps,
			r.Result.Applied.Rewrites, r.Result.Applied.NetUSD)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nrecommended schedule: %s (%s)\n", rep.Recommended, rep.Reason)
}
