package storage

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/prices"
)

// ledgerEntries are two sessions' entries: every field set somewhere, every result.
func ledgerEntries(t0 time.Time) []ledger.Entry {
	return []ledger.Entry{
		{SessionID: "a", Step: 1, At: t0, Route: "anthropic", Provider: prices.Anthropic, Model: "claude-test", Status: 200,
			Stream: true, Result: ledger.ResultOK, Usage: ledger.Usage{Input: 3, CacheWrite5m: 1000, CacheWrite1h: 200, Output: 50},
			Advised: true, ContextTokens: 1100, FullTokens: 1100, PaidUSD: 0.00541, KeepAllUSD: 0.00541},
		{SessionID: "b", Step: 4, At: t0.Add(time.Second), Route: "openai", Provider: prices.OpenAI, Model: "gpt-test", Status: 200,
			Result: ledger.ResultNone, Note: "stream without usage (stream_options.include_usage not set)", Advised: true,
			ContextTokens: 900, FullTokens: 1500, Rewrite: "over-budget", PlannedRewriteUSD: 0.0001},
		{SessionID: "a", Step: 2, At: t0.Add(2500 * time.Millisecond), Route: "anthropic", Provider: prices.Anthropic, Model: "claude-test",
			Status: 200, Result: ledger.ResultOK, Usage: ledger.Usage{Input: 1, CacheRead: 1100, CacheWrite5m: 300, Output: 20},
			Advised: true, ContextTokens: 1400, FullTokens: 2000, Rewrite: "pays", PlannedRewriteUSD: 0.0002,
			PaidUSD: 0.001758, KeepAllUSD: 0.0019, RemovedTokens: 600, RewriteTokens: 100, RewriteUSD: 0.000345},
		{SessionID: "a", Step: 3, At: t0.Add(3 * time.Second), Route: "anthropic", Provider: prices.Anthropic, Status: 429,
			Result: ledger.ResultError, Advised: true, ContextTokens: 1500, FullTokens: 2100, Cold: true},
		{SessionID: "a", Step: 3, At: t0.Add(4 * time.Second), Route: "anthropic", Provider: prices.Anthropic, Model: "claude-test",
			Status: 200, Result: ledger.ResultMalformed, Note: `usage.input_tokens: "many" is not a count`},
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	eachBackend(t, testLedgerRoundTrip)
}

func testLedgerRoundTrip(t *testing.T, dsn string) {
	ctx := t.Context()
	db := openDB(t, dsn)
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	entries := ledgerEntries(t0)
	if err := db.RecordLedger(ctx, entries); err != nil {
		t.Fatal(err)
	}
	// One recall of session a's output: counted in its totals.
	o := original("a", "k", "the original")
	if err := db.SaveOriginal(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordRecall(ctx, advisor.RecallEvent{RecallID: o.RecallID, SessionID: "a", OutputKey: "k", Step: 3}); err != nil {
		t.Fatal(err)
	}

	got, err := db.LedgerEntries(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(entries, got); d != "" {
		t.Errorf("LedgerEntries (-want +got):\n%s", d)
	}
	got, err = db.LedgerEntries(ctx, "b")
	if err != nil || len(got) != 1 || got[0].Step != 4 {
		t.Errorf("LedgerEntries(b) = %+v, %v; want the one entry of b", got, err)
	}
	tail, ok, err := db.LedgerTail(ctx, "a")
	if err != nil || !ok || tail.At != entries[4].At {
		t.Errorf("LedgerTail(a) = %+v, %v, %v; want the entry at %v", tail, ok, err, entries[4].At)
	}
	if _, ok, err := db.LedgerTail(ctx, "nobody"); ok || err != nil {
		t.Errorf("LedgerTail(nobody) = %v, %v; want false, nil", ok, err)
	}

	// The sums, checked against ledger.Totals.Add over the same entries (the
	// per-field sums are also written out for session a).
	want := map[string]*ledger.SessionTotals{"a": {SessionID: "a"}, "b": {SessionID: "b"}}
	for _, e := range entries {
		s := want[e.SessionID]
		if s.First.IsZero() {
			s.First = e.At
		}
		s.Last = e.At
		s.Add(e)
	}
	want["a"].Recalls = 1
	a := want["a"].Totals
	if a.Requests != 4 || a.WithUsage != 2 || a.Malformed != 1 || a.UpstreamErrors != 1 || a.Rewrites != 1 ||
		a.Usage != (ledger.Usage{Input: 4, CacheRead: 1100, CacheWrite5m: 1300, CacheWrite1h: 200, Output: 70}) {
		t.Fatalf("the test's own sums are off: %+v", a)
	}
	sessions, err := db.LedgerSessions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	approx := cmpopts.EquateApprox(0, 1e-12)
	if d := cmp.Diff([]ledger.SessionTotals{*want["a"], *want["b"]}, sessions, approx); d != "" {
		t.Errorf("LedgerSessions (-want +got):\n%s", d)
	}
	only, err := db.LedgerSessions(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]ledger.SessionTotals{*want["b"]}, only, approx); d != "" {
		t.Errorf("LedgerSessions(b) (-want +got):\n%s", d)
	}

	// A read-only open (SQLite) reads the same; writes are refused.
	if db.kind != sqliteBackend {
		return
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenWith(ctx, dsn, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	sessions, err = ro.LedgerSessions(ctx, "")
	if err != nil || len(sessions) != 2 {
		t.Errorf("read-only LedgerSessions = %d sessions, %v", len(sessions), err)
	}
	if err := ro.RecordLedger(ctx, entries[:1]); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only RecordLedger = %v; want ErrReadOnly", err)
	}
}

func TestRecordLedgerInvalid(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		db := openDB(t, dsn)
		recordLedgerInvalid(t, db)
	})
}

func recordLedgerInvalid(t *testing.T, db *DB) {
	err := db.RecordLedger(t.Context(), []ledger.Entry{{Route: "openai", Result: ledger.ResultOK}, {SessionID: "s", Result: ledger.ResultOK}})
	if !errors.Is(err, ErrInvalid) || err.Error() != `storage: record ledger: entry 1 (session "s"): invalid record: route and result are required` {
		t.Errorf("RecordLedger = %v; want ErrInvalid naming entry 1", err)
	}
	if n := count(t, db, "ledger"); n != 0 {
		t.Errorf("%d rows stored; want none (all or nothing)", n)
	}
}

// A database file that cannot be written (the immutable attribute, which binds root
// too) still reads through a read-only open, as `pruneadvisor ledger` opens it.
// (SQLite needs the folder writable for the -shm file of a WAL database unless one
// exists already.)
func TestLedgerImmutableFile(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr is not installed")
	}
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "l.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RecordLedger(ctx, ledgerEntries(time.Unix(0, 0).UTC())); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("no immutable attribute here: %v %s", err, out)
	}
	if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Fatal("the file is still writable")
	}
	ro, err := OpenWith(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of an immutable file: %v", err)
	}
	defer ro.Close()
	got, err := ro.LedgerEntries(ctx, "a")
	if err != nil || len(got) != 4 {
		t.Errorf("LedgerEntries = %d, %v; want 4 entries", len(got), err)
	}
}

// A database from before the ledger (migration 0007), opened read-only as it is,
// has no entries rather than an error.
func TestLedgerOlderSchema(t *testing.T) {
	ctx := t.Context()
	db, path := openTemp(t)
	if _, err := db.w.ExecContext(ctx, `DROP TABLE ledger; DELETE FROM schema_version WHERE version = 7`); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenWith(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	sessions, err := ro.LedgerSessions(ctx, "")
	if err != nil || len(sessions) != 0 {
		t.Errorf("LedgerSessions = %v, %v; want none, nil", sessions, err)
	}
	entries, err := ro.LedgerEntries(ctx, "a")
	if err != nil || len(entries) != 0 {
		t.Errorf("LedgerEntries = %v, %v; want none, nil", entries, err)
	}
}

// A session's First and Last are its earliest and latest At, whatever the order the
// entries were recorded in (responses end out of order under load) and however many
// digits their fractions of a second have (the stored text does not sort as time).
func TestLedgerSessionSpan(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		var entries []ledger.Entry
		for _, d := range []time.Duration{10500 * time.Millisecond, 30 * time.Second, 10 * time.Second, 30*time.Second + 250*time.Millisecond, 12 * time.Second} {
			entries = append(entries, ledger.Entry{SessionID: "x", Route: "openai", Provider: "openai", Result: ledger.ResultOK, At: t0.Add(d)})
		}
		if err := db.RecordLedger(ctx, entries); err != nil {
			t.Fatal(err)
		}
		got, err := db.LedgerSessions(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !got[0].First.Equal(t0.Add(10*time.Second)) || !got[0].Last.Equal(t0.Add(30*time.Second+250*time.Millisecond)) {
			t.Errorf("LedgerSessions(x) = %+v; want first %v, last %v", got, t0.Add(10*time.Second), t0.Add(30*time.Second+250*time.Millisecond))
		}
	})
}
