package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/auto"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

type replayFlags struct {
	scorerFlags
	configFlags
	db       string
	workers  int
	strict   bool
	asJSON   bool
	progress string
	shard    string
	memory   memoryFlag
	askLag   int
	askLat   string
	asksOnly bool
}

// AsksOnlyCutoff is the scorer's cutoff under replay --asks-only: the smallest
// positive float64, so the advisor asks its scorer as usual (a cutoff of 0 means
// rules only, no asks) but no keep-probability a scorer gives is under it.
const AsksOnlyCutoff = math.SmallestNonzeroFloat64

// replaySummary is the JSON form of a replay run.
type replaySummary struct {
	DB           string          `json:"db"`
	Scorer       string          `json:"scorer"`
	SettingsHash string          `json:"settings_hash"`
	Workers      int             `json:"workers"`
	Found        int             `json:"found"`
	Replayed     int             `json:"replayed"`
	AlreadyDone  int             `json:"already_done"`
	Duplicates   int             `json:"duplicates"`
	Shard        string          `json:"shard,omitempty"`
	OtherShards  int             `json:"other_shards,omitempty"`
	NotSessions  int             `json:"not_sessions"`
	Ignored      int             `json:"ignored"`
	Failed       int             `json:"failed"`
	Failures     []replayFailure `json:"failures,omitempty"`
	Skips        []replay.Skip   `json:"skips,omitempty"`
	Steps        int             `json:"steps"`
	Outputs      int             `json:"outputs"`
	Asks         int             `json:"asks"`
	// FailedAsks and ScorerFailures (by kind) count the asks that got no score;
	// Incomplete lists the sessions stored with asks to ask again (not marked
	// done: the next run replays them) and AllAsksFailed those with no ask scored.
	FailedAsks     int              `json:"failed_asks"`
	ScorerFailures map[string]int   `json:"scorer_failures"`
	Incomplete     []string         `json:"incomplete,omitempty"`
	AllAsksFailed  []string         `json:"all_asks_failed,omitempty"`
	Pruned         int              `json:"pruned"`
	Evidence       int              `json:"evidence"`
	SkippedLines   int              `json:"skipped_lines"`
	Bytes          int64            `json:"bytes"`
	Seconds        float64          `json:"seconds"`
	Interrupted    bool             `json:"interrupted,omitempty"`
	Sessions       []replaySessionJ `json:"sessions,omitempty"`
}

type replayFailure struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

type replaySessionJ struct {
	ID         string `json:"id"`
	Path       string `json:"path"`
	Format     string `json:"format"`
	Steps      int    `json:"steps"`
	Asks       int    `json:"asks"`
	FailedAsks int    `json:"failed_asks"`
	Pruned     int    `json:"pruned"`
}

func replayCmd(e *env) *cobra.Command {
	var f replayFlags
	c := &cobra.Command{
		Use:   "replay PATH...",
		Short: "Replay old sessions through the advisor and record asks, decisions and later-use evidence",
		Long: `replay runs the advisor over old sessions exactly as live: at step t it sees only the
messages before the t-th assistant message. PATH is a session file or a folder, walked
recursively (Claude Code's ~/.claude/projects, pi's ~/.pi/agent/sessions, Codex's
~/.codex/sessions, Gemini CLI's ~/.gemini/tmp); in folders only *.jsonl, *.json and
*.traj files are read, and files no reader recognises are skipped. Symbolic links are
followed; loops are detected and reported.

For every session it stores in --db, in one transaction when the session is done:
every ask (output, step, card hash, score, scorer, latency, scorer tokens), every
decision, the later-use evidence of every output (docs/EVALUATION.md), the facts
calibrate needs per output and per step, and the session's path (for backoff).

It is resumable: a session already stored with the same content and settings is
skipped, and an interrupted run (Ctrl-C, kill -9) loses only the sessions it was in
the middle of; run the same command again to finish. A session that fails is
reported and counted; the others go on.

Scorer failures (Ollama stopped, a model not pulled, timeouts, invalid answers) do
not fail a session: each ask that got no score is stored as such and counted by kind
in the summary ("scorer failures"), each kind is warned about once on stderr with its
cause, and a session with such asks is stored but not marked done, so the next run
with the same settings replays it and asks again (failures no new ask can mend,
empty_query and too_large, do not hold a session back).

Exit status: 0 when every session was stored; 1 when a session failed or the run was
interrupted; 3 when none failed but some session's every ask got no score (nothing
was scored there: fix the scorer and run the same command again); 2 for bad flags.

Several machines can replay one corpus into one PostgreSQL store at once: give each
the same PATHs and --db postgres://..., and --shard I/N (1/3, 2/3 and 3/3 for three
machines). Each replays only the sessions of its shard (by file name), so together
they replay every session once; calibrate and backoff then read them all.

A progress bar (sessions, steps, ETA) is drawn on stderr when it is a terminal;
otherwise one line per session is logged.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd.Context(), e, args, f)
		},
	}
	f.scorerFlags.register(c)
	f.configFlags.register(c)
	c.Flags().StringVar(&f.db, "db", defaultDBPath(), "store to keep the replay in: an SQLite file, or a postgres:// URL")
	c.Flags().IntVar(&f.workers, "workers", 0, "sessions replayed at once (default: the number of CPUs, or 1 with the Ollama scorer)")
	c.Flags().BoolVar(&f.strict, "strict", false, "fail a session on its first malformed line instead of skipping such lines")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the summary as JSON")
	c.Flags().StringVar(&f.progress, "progress", "auto", "auto (bar on a terminal, else log lines) | bar | log | none")
	c.Flags().StringVar(&f.shard, "shard", "", "replay only shard I of N (I/N, e.g. 2/3) of the sessions found, by file name: one per machine sharing a --db")
	c.Flags().IntVar(&f.askLag, "ask-lag", 0, "model background asks: a score counts only this many steps after its ask (at least), one ask in flight per session; 0 with --ask-latency off: at its ask's step")
	c.Flags().StringVar(&f.askLat, "ask-latency", "auto", "model background asks: a score counts from the first step whose transcript time is this long after its ask's (and at least one step later): a duration (3s), measured (each ask's own wall time), off, or auto (measured for the Ollama scorer, off for the fitted and lexical ones, which answer in microseconds)")
	c.Flags().BoolVar(&f.asksOnly, "asks-only", false, "ask the scorer at every step as usual but prune by the rules alone (the scorer's cutoff the smallest positive number, over_budget_cutoff 0): every ask is recorded, so calibrate's sweep and front are whole at every cutoff, not only above the replay's own")
	f.memory.register(c)
	return c
}

// askLatency decides replay's --ask-latency for the scorer chosen
// (replay.Replayer.AskLatency): auto is "measured" for a scorer that asks a
// server (Ollama, alone or fused), "" for the others; off is "".
func askLatency(flag string, scorer advisor.Scorer) (string, error) {
	switch flag {
	case "off":
		return "", nil
	case "auto":
		if bg, _ := backgroundAsks("auto", scorer); bg {
			return "measured", nil
		}
		return "", nil
	}
	if _, _, err := replay.ParseAskLatency(flag); err != nil {
		return "", fmt.Errorf("--ask-latency: %w (or off, auto)", err)
	}
	return flag, nil
}

func runReplay(ctx context.Context, e *env, paths []string, f replayFlags) error {
	cfg, shard, err := f.check()
	if err != nil {
		return err
	}
	if err := someSession(paths); err != nil {
		return err
	}
	f.scorerFlags.useConfig(cfg)
	restore, err := f.memory.apply()
	if err != nil {
		return err
	}
	defer restore()
	scorer, err := f.scorerFlags.build(ctx, e)
	if err != nil {
		return err
	}
	if f.asksOnly {
		if scorer == nil {
			return usageError{fmt.Errorf("--asks-only needs a scorer (--scorer)")}
		}
		cfg = cfg.WithScorerCutoff(scorer.Name(), AsksOnlyCutoff)
		// Nor does a rewrite forced by the budget take kept candidates by their
		// scores (over_budget_cutoff): the front stays whole.
		cfg.OverBudgetCutoff = 0
	}
	workers := f.workers
	if workers == 0 {
		workers = defaultWorkers(scorer)
	}
	store, closeStore, err := openStore(ctx, f.db)
	if err != nil {
		return err
	}
	defer closeStore()
	rp := &replay.Replayer{Config: cfg, Scorer: scorer, Lenient: !f.strict, Logger: onceLogger(e.stderr), Sizer: ollama.Sizer{},
		Background: f.scorerFlags.background(e), AskLag: f.askLag}
	rp.AskLatency, _ = askLatency(f.askLat, scorer)
	prog := newReplayProgress(e, f.progress)
	runner := &replay.Runner{Replayer: rp, Sink: store, Workers: workers, Events: prog.event, Shard: shard}
	sum, runErr := runner.Run(ctx, paths)
	prog.finish()
	out := f.summary(rp.Settings(), workers, shard, sum, runErr, prog)
	for _, fl := range sum.Failures {
		out.Failures = append(out.Failures, replayFailure{Path: fl.Path, Error: fl.Err.Error()})
		fmt.Fprintln(e.stderr, failureLine(fl.Path, fl.Err))
	}
	if f.asJSON {
		if err := e.printJSON(out); err != nil {
			return err
		}
	} else {
		printReplay(e.stdout, out)
	}
	return replayError(sum, runErr)
}

// check validates the flags and returns the advisor config (--config and the
// config flags) and the shard to replay. Errors are usageErrors.
func (f *replayFlags) check() (advisor.Config, replay.Shard, error) {
	cfg, err := f.configFlags.load()
	if err != nil {
		return cfg, replay.Shard{}, usageError{err}
	}
	switch f.progress {
	case "auto", "bar", "log", "none":
	default:
		return cfg, replay.Shard{}, usageError{fmt.Errorf("--progress %q: want auto, bar, log or none", f.progress)}
	}
	if f.workers < 0 {
		return cfg, replay.Shard{}, usageError{fmt.Errorf("--workers %d: want 1 or more (0: default)", f.workers)}
	}
	shard, err := replay.ParseShard(f.shard)
	if err != nil {
		return cfg, replay.Shard{}, usageError{fmt.Errorf("--shard: %w", err)}
	}
	if f.askLag < 0 {
		return cfg, replay.Shard{}, usageError{fmt.Errorf("--ask-lag %d: want 0 or more steps", f.askLag)}
	}
	if _, err := askLatency(f.askLat, nil); err != nil {
		return cfg, replay.Shard{}, usageError{err}
	}
	return cfg, shard, nil
}

// summary is the JSON form of a run's summary, its lists sorted.
func (f *replayFlags) summary(settings replay.Settings, workers int, shard replay.Shard, sum replay.Summary, runErr error, prog *replayProgress) replaySummary {
	out := replaySummary{
		DB: storage.Redact(f.db), Scorer: settings.Scorer, SettingsHash: settings.Hash(), Workers: workers,
		Found: sum.Found, Replayed: sum.Replayed, AlreadyDone: sum.AlreadyDone, Duplicates: sum.Duplicates,
		Shard: shard.String(), OtherShards: sum.OtherShards,
		NotSessions: sum.NotSessions, Ignored: sum.Ignored, Failed: len(sum.Failures), Skips: sum.Skips,
		Steps: sum.Steps, Outputs: sum.Outputs, Asks: sum.Asks, Pruned: sum.Pruned, Evidence: sum.Evidence,
		FailedAsks: sum.FailedAsks, ScorerFailures: cmpOrEmpty(sum.ScorerFailures),
		Incomplete: sum.Incomplete, AllAsksFailed: sum.AllAsksFailed,
		SkippedLines: sum.SkippedLine, Bytes: sum.Bytes, Seconds: sum.Duration.Seconds(),
		Interrupted: runErr != nil, Sessions: prog.sessions,
	}
	sort.Slice(out.Sessions, func(i, j int) bool { return out.Sessions[i].Path < out.Sessions[j].Path })
	sort.Strings(out.Incomplete)
	sort.Strings(out.AllAsksFailed)
	return out
}

// someSession returns an error naming paths when they hold no file replay would
// read (a folder without session files, a mistyped ~/.claude/projects that does
// not exist): said before the store is made, so that such a run neither looks
// like a replay of nothing nor leaves an empty database behind. A path that
// exists but cannot be read is left to the run, which lists it as a failure.
func someSession(paths []string) error {
	found, _, ignored, fails := replay.Discover(paths)
	if len(found) > 0 {
		return nil
	}
	var missing []string
	for _, f := range fails {
		if !errors.Is(f.Err, fs.ErrNotExist) {
			return nil
		}
		missing = append(missing, f.Path)
	}
	err := fmt.Errorf("replay: no session files under %s: a folder's sessions end in %s (other files passed over: %d)",
		strings.Join(paths, ", "), strings.Join(replay.SessionExts, ", "), ignored)
	if len(missing) > 0 {
		err = fmt.Errorf("%w; no such file or folder: %s", err, strings.Join(missing, ", "))
	}
	return err
}

// replayError is replay's exit: an interrupted run (1), failed sessions (1),
// sessions none of whose asks got a score (exitNoScores), else nil.
func replayError(sum replay.Summary, runErr error) error {
	switch {
	case runErr != nil:
		return fmt.Errorf("replay interrupted (%w): %d sessions committed; run the same command again to replay the rest", runErr, sum.Replayed)
	case len(sum.Failures) > 0 && sum.Replayed+sum.AlreadyDone == 0:
		return fmt.Errorf("replay: %d of %d sessions failed (listed above); nothing else to store", len(sum.Failures), len(sum.Failures))
	case len(sum.Failures) > 0:
		return fmt.Errorf("replay: %d of %d sessions failed (listed above); the others are stored", len(sum.Failures), len(sum.Failures)+sum.Replayed+sum.AlreadyDone)
	case len(sum.AllAsksFailed) > 0:
		return codedError{fmt.Errorf("replay: no ask of %d of %d sessions got a score (scorer failures: %s); they are stored but not done: run the same command again once the scorer works",
			len(sum.AllAsksFailed), sum.Replayed, countList(sum.ScorerFailures)), exitNoScores}
	}
	return nil
}

func cmpOrEmpty(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// onceLogger is the replay advisors' logger: warnings to w, each message once per
// failure kind of its "err" attribute (advisor.FailKind) over the whole run. The
// advisor warns once per session, so a replay of many sessions against a stopped
// scorer would otherwise repeat one line per session; the summary counts them all.
func onceLogger(w io.Writer) *slog.Logger {
	return slog.New(onceHandler{Handler: newLogger(w, slog.LevelWarn).Handler(), mu: &sync.Mutex{}, seen: map[string]bool{}})
}

// onceHandler passes a record on the first time its message and kind are seen,
// with the kind added as an attribute.
type onceHandler struct {
	slog.Handler
	mu   *sync.Mutex
	seen map[string]bool
}

func (h onceHandler) Handle(ctx context.Context, r slog.Record) error {
	kind := ""
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			kind = advisor.FailKind(err)
			return false
		}
		return true
	})
	key := r.Message + "\x00" + kind
	h.mu.Lock()
	dup := h.seen[key]
	h.seen[key] = true
	h.mu.Unlock()
	if dup {
		return nil
	}
	if kind != "" {
		r.AddAttrs(slog.String("kind", kind), slog.String("note", "said once per kind; the summary counts every failed ask"))
	}
	return h.Handler.Handle(ctx, r)
}

func (h onceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return onceHandler{Handler: h.Handler.WithAttrs(as), mu: h.mu, seen: h.seen}
}

func (h onceHandler) WithGroup(name string) slog.Handler {
	return onceHandler{Handler: h.Handler.WithGroup(name), mu: h.mu, seen: h.seen}
}

// defaultWorkers is --workers' default: one per CPU, but one for a model scorer
// (a local Ollama server answers one request at a time; parallel sessions would
// only queue and time out).
func defaultWorkers(s advisor.Scorer) int {
	switch sc := s.(type) {
	case *ollama.Scorer:
		return 1
	case *auto.Scorer:
		if sc.Ollama != nil {
			return 1
		}
	}
	return runtime.NumCPU()
}

func printReplay(out io.Writer, s replaySummary) {
	var w bytes.Buffer
	defer func() { _, _ = out.Write(trimLines(w.Bytes())) }()
	tw := tabwriter.NewWriter(&w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "replayed\t%d sessions\t%d steps, %d tool outputs, %d asks, %d pruned, %d evidence items, %.1f MB in %.2fs\n",
		s.Replayed, s.Steps, s.Outputs, s.Asks, s.Pruned, s.Evidence, float64(s.Bytes)/1e6, s.Seconds)
	fmt.Fprintf(tw, "already stored\t%d\t(same content and settings)\n", s.AlreadyDone)
	fmt.Fprintf(tw, "skipped\t%d duplicates, %d not sessions, %d other files\t\n", s.Duplicates, s.NotSessions, s.Ignored)
	if s.Shard != "" {
		fmt.Fprintf(tw, "shard\t%s\t(%d files left to the other shards)\n", s.Shard, s.OtherShards)
	}
	if s.SkippedLines > 0 {
		fmt.Fprintf(tw, "malformed lines\t%d skipped\t(--strict fails such sessions instead)\n", s.SkippedLines)
	}
	fmt.Fprintf(tw, "failed\t%d\n", s.Failed)
	if s.FailedAsks == 0 {
		fmt.Fprintf(tw, "scorer failures\t0 of %d asks\n", s.Asks)
	} else {
		fmt.Fprintf(tw, "scorer failures\t%d of %d asks\t%s\n", s.FailedAsks, s.Asks, countList(s.ScorerFailures))
	}
	if len(s.Incomplete) > 0 {
		fmt.Fprintf(tw, "not marked done\t%d sessions\t(asks failed; the next run asks them again)\n", len(s.Incomplete))
	}
	fmt.Fprintf(tw, "stored in\t%s\t(scorer %s, settings %s, %d workers)\n", s.DB, s.Scorer, short(s.SettingsHash), s.Workers)
	tw.Flush()
	for _, sk := range s.Skips {
		fmt.Fprintf(&w, "  skipped %s: %s\n", sk.Path, sk.Reason)
	}
}

// short returns the first 12 characters of a hash.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// replayProgress renders replay events: a progress bar on a terminal, log lines
// otherwise, or nothing.
type replayProgress struct {
	e        *env
	bar      *progressbar.ProgressBar
	log      bool
	started  time.Time
	sessions []replaySessionJ
}

func newReplayProgress(e *env, mode string) *replayProgress {
	p := &replayProgress{e: e, started: time.Now()}
	tty := false
	if f, ok := e.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	switch {
	case mode == "bar" || mode == "auto" && tty:
		p.bar = progressbar.NewOptions64(1,
			progressbar.OptionSetWriter(e.stderr),
			progressbar.OptionSetDescription("replay"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetWidth(30),
		)
	case mode == "log" || mode == "auto":
		p.log = true
	}
	return p
}

func (p *replayProgress) event(ev replay.Event) {
	if ev.Kind == replay.EventDone {
		r := ev.Record
		pruned := 0
		for _, o := range r.Outputs {
			if o.PrunedAt > 0 {
				pruned++
			}
		}
		failed := 0
		for _, n := range replay.AskFailures(r) {
			failed += n
		}
		p.sessions = append(p.sessions, replaySessionJ{ID: r.ID, Path: r.Path, Format: string(r.Format), Steps: r.Steps,
			Asks: len(r.Asks), FailedAsks: failed, Pruned: pruned})
	}
	switch {
	case p.bar != nil:
		if ev.Kind == replay.EventPlanned {
			p.bar.ChangeMax64(max(ev.Bytes, 1))
		}
		_ = p.bar.Set64(ev.BytesDone)
		p.bar.Describe(fmt.Sprintf("%d/%d sessions, %d steps", ev.Done, ev.Total, ev.Steps))
	case p.log:
		switch ev.Kind {
		case replay.EventPlanned:
			fmt.Fprintf(p.e.stderr, "replay: %d sessions to replay (%.1f MB)\n", ev.Total, float64(ev.Bytes)/1e6)
		case replay.EventDone:
			r := ev.Record
			failed := ""
			if fs := replay.AskFailures(r); fs != nil {
				failed = " (" + countList(fs) + " failed)"
			}
			fmt.Fprintf(p.e.stderr, "replay: [%d/%d] %s: %d steps, %d asks%s, %s\n", ev.Done, ev.Total, r.Path, r.Steps, len(r.Asks), failed, r.Duration().Round(time.Millisecond))
		case replay.EventFailed:
			fmt.Fprintf(p.e.stderr, "replay: [%d/%d] %s: FAILED: %v\n", ev.Done, ev.Total, ev.Path, ev.Err)
		}
	}
}

func (p *replayProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// failureLine is the stderr line of a session that failed: "pruneadvisor: replay:
// PATH: why", saying the path once also when the error names it already (the
// replay package's "replay: PATH:LINE: ..." errors).
func failureLine(path string, err error) string {
	msg := strings.TrimPrefix(err.Error(), "replay: ")
	if !strings.HasPrefix(msg, path) {
		msg = path + ": " + msg
	}
	return "pruneadvisor: replay: " + msg
}
