package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

func ledgerCmd(e *env) *cobra.Command {
	var (
		db      string
		session string
		asJSON  bool
	)
	c := &cobra.Command{
		Use:   "ledger",
		Short: "What the proxied model calls really cost, against keep-all",
		Long: `ledger sums what serve's proxy recorded from every upstream response's own
usage: per session and in total, the requests (with usage, without, malformed,
upstream errors), the tokens by kind, the dollars paid under the price model, what
keep-all (nothing pruned) would have paid for the same calls, the saving, the
rewrites with the cache writes attributed to them, and the recalls. With --session
it lists that session's requests one by one. The database is opened read-only
(also on a folder or file system that cannot be written).
docs/COMMANDS.md says how keep-all is estimated. Exit code 1 when the database
cannot be read or --session names a session without entries.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("session") && strings.TrimSpace(session) == "" {
				// An empty id would list every session, which is not what was asked.
				return usageError{errors.New("--session needs a session id (ledger without --session lists every session)")}
			}
			if err := requireStore(db, "serve and wrap create it as their proxies record the ledger; --db names it (default $PRUNEADVISOR_DB, else ~/.local/share/pruneadvisor/pruneadvisor.db)"); err != nil {
				return err
			}
			store, err := storage.OpenWith(cmd.Context(), db, storage.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer store.Close()
			rep, err := readLedger(cmd, store, session)
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(rep)
			}
			if rep.Total.Requests == 0 {
				fmt.Fprintf(e.stderr, "pruneadvisor: no ledger entries in %s (serve's proxy records them)\n", store.Path())
			}
			return writeLedger(e.stdout, rep)
		},
	}
	c.Flags().StringVar(&db, "db", defaultDBPath(), "store serve recorded the ledger in: an SQLite file, or a postgres:// URL (opened read-only)")
	c.Flags().StringVar(&session, "session", "", "only this session, with its requests listed")
	c.Flags().BoolVar(&asJSON, "json", false, `print {"sessions", "total", "requests"} as JSON`)
	return c
}

// ledgerReport is what `ledger` prints; its JSON field names are the --json output.
type ledgerReport struct {
	Sessions []ledger.SessionTotals `json:"sessions"`
	Total    ledger.Totals          `json:"total"`
	// Requests lists the session's entries with --session, in the order the
	// requests reached the proxy; else it is absent.
	Requests []ledger.Entry `json:"requests,omitempty"`
}

// errNoSession means --session named a session without ledger entries.
var errNoSession = errors.New("no ledger entries for session")

func readLedger(cmd *cobra.Command, store *storage.DB, session string) (ledgerReport, error) {
	ctx := cmd.Context()
	var rep ledgerReport
	sessions, err := store.LedgerSessions(ctx, session)
	if err != nil {
		return rep, err
	}
	rep.Sessions = sessions
	if rep.Sessions == nil {
		rep.Sessions = []ledger.SessionTotals{}
	}
	rep.Total = ledger.Sum(sessions)
	if session == "" {
		return rep, nil
	}
	if len(sessions) == 0 {
		return rep, fmt.Errorf("%w %q in %s", errNoSession, session, store.Path())
	}
	rep.Requests, err = store.LedgerEntries(ctx, session)
	// Entries are stored as their responses end; list them as the requests came.
	slices.SortStableFunc(rep.Requests, func(a, b ledger.Entry) int { return a.At.Compare(b.At) })
	return rep, err
}

// writeLedger prints the report as tables: one row per session and the total, the
// tokens, and with --session the requests.
func writeLedger(out io.Writer, rep ledgerReport) error {
	var w bytes.Buffer
	defer func() { _, _ = out.Write(trimLines(w.Bytes())) }()
	tw := tabwriter.NewWriter(&w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "session\trequests\twith usage\tno usage\tmalformed\terrors\tpaid $\tkeep-all $\tsaved $\trewrites\trewrite $\trecalls\t")
	row := func(name string, t ledger.Totals) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.4f\t%.4f\t%.4f\t%d\t%.4f\t%d\t\n", name, t.Requests, t.WithUsage, t.NoUsage,
			t.Malformed, t.UpstreamErrors, t.PaidUSD, t.KeepAllUSD, t.SavedUSD, t.Rewrites, t.RewriteUSD, t.Recalls)
	}
	for _, s := range rep.Sessions {
		row(s.SessionID, s.Totals)
	}
	row("total", rep.Total)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	u := rep.Total.Usage
	fmt.Fprintf(&w, "\ntokens: %d input, %d cache read, %d cache write (%d 5m, %d 1h), %d output; %d token-steps kept out by stubs (o200k tokens, summed over the requests)\n",
		u.Input, u.CacheRead, u.Written(), u.CacheWrite5m, u.CacheWrite1h, u.Output, rep.Total.RemovedTokens)
	fmt.Fprintf(&w, "rewrites: %d, %d tokens written again by them, $%.4f beyond a cache read (planned $%.4f)\n",
		rep.Total.Rewrites, rep.Total.RewriteTokens, rep.Total.RewriteUSD, rep.Total.PlannedRewriteUSD)
	if len(rep.Requests) == 0 {
		return nil
	}
	fmt.Fprintln(&w)
	tw = tabwriter.NewWriter(&w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\tat (UTC)\troute\tmodel\tusage\tinput\tread\twrite 5m\twrite 1h\toutput\tremoved\tpaid $\tkeep-all $\trewrite\trewrite $\tnote")
	for _, e := range rep.Requests {
		u := e.Usage
		rw := e.Rewrite
		if rw == "" {
			rw = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t%.4f\t%s\t%.4f\t%s\n", e.Step, e.At.UTC().Format(time.DateTime),
			e.Route, orDash(e.Model), e.Result, u.Input, u.CacheRead, u.CacheWrite5m, u.CacheWrite1h, u.Output, e.RemovedTokens,
			e.PaidUSD, e.KeepAllUSD, rw, e.RewriteUSD, e.Note)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// trimLines drops the spaces tabwriter leaves at the ends of lines.
func trimLines(b []byte) []byte {
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimRight(l, " ")
	}
	return bytes.Join(lines, []byte("\n"))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
