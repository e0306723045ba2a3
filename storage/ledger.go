package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/prices"
)

// ledgerColumns are the ledger table's columns in ledger.Entry order, as written
// and read.
const ledgerColumns = `session_id, step, at, route, provider, model, status, stream, result, note,
	input_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, output_tokens,
	advised, context_tokens, full_tokens, rewrite, cold, planned_rewrite_usd,
	paid_usd, keep_all_usd, removed_tokens, rewrite_tokens, rewrite_usd`

// ledgerTable is the ledger's INSERT clause.
const ledgerTable = "ledger(" + ledgerColumns + ")"

// RecordLedger stores ledger entries (one per upstream response of a proxied model
// call), all in one transaction (all or none), committed crash-safe as RecordBatch
// is: the proxy's ledger writer commits a round of responses at a time, off the
// responses' path, and a power failure may lose the last rounds, kill -9 does not.
// ErrInvalid, naming the index of the first bad one, for an entry without a route
// or result. Empty entries is a no-op.
func (db *DB) RecordLedger(ctx context.Context, entries []ledger.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	for i, e := range entries {
		if e.Route == "" || e.Result == "" {
			return fmt.Errorf("storage: record ledger: entry %d (session %q): %w: route and result are required", i, e.SessionID, ErrInvalid)
		}
	}
	db.prepareInserts(ctx, ledgerTable, len(entries))
	err := db.writeAs(ctx, crashSafe, func(tx *sql.Tx) error {
		return db.insertAll(ctx, tx, ledgerTable, len(entries), func(i int) []any {
			e := entries[i]
			u := e.Usage
			return []any{e.SessionID, e.Step, timeText(e.At), e.Route, string(e.Provider), e.Model, e.Status, e.Stream,
				string(e.Result), e.Note, u.Input, u.CacheRead, u.CacheWrite5m, u.CacheWrite1h, u.Output,
				e.Advised, e.ContextTokens, e.FullTokens, e.Rewrite, e.Cold, e.PlannedRewriteUSD,
				e.PaidUSD, e.KeepAllUSD, e.RemovedTokens, e.RewriteTokens, e.RewriteUSD}
		})
	})
	if err != nil {
		return fmt.Errorf("storage: record %d ledger entries: %w", len(entries), err)
	}
	return nil
}

// scanLedger reads one row of ledgerColumns.
func scanLedger(rows interface{ Scan(...any) error }) (ledger.Entry, error) {
	var e ledger.Entry
	var at sql.NullString
	var provider, result string
	u := &e.Usage
	err := rows.Scan(&e.SessionID, &e.Step, &at, &e.Route, &provider, &e.Model, &e.Status, &e.Stream, &result, &e.Note,
		&u.Input, &u.CacheRead, &u.CacheWrite5m, &u.CacheWrite1h, &u.Output,
		&e.Advised, &e.ContextTokens, &e.FullTokens, &e.Rewrite, &e.Cold, &e.PlannedRewriteUSD,
		&e.PaidUSD, &e.KeepAllUSD, &e.RemovedTokens, &e.RewriteTokens, &e.RewriteUSD)
	if err != nil {
		return e, err
	}
	e.Provider, e.Result = prices.Provider(provider), ledger.Result(result)
	e.At, err = parseTime(at)
	return e, err
}

// hasLedger reports whether the database has the ledger table: an SQLite file from
// before migration 0007, opened read-only, has none (and no entries). PostgreSQL
// databases are always migrated.
func (db *DB) hasLedger(ctx context.Context) (bool, error) {
	if db.kind == postgresBackend {
		return true, nil
	}
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'ledger'`).Scan(&n)
	return n > 0, db.classify(err)
}

// LedgerEntries returns the ledger entries of a session ("" for every session) in
// the order recorded (the order their responses ended, which may differ from the
// order of the requests: sort by At for that); none from a database older than the
// ledger.
func (db *DB) LedgerEntries(ctx context.Context, sessionID string) ([]ledger.Entry, error) {
	if ok, err := db.hasLedger(ctx); !ok || err != nil {
		if err != nil {
			err = fmt.Errorf("storage: ledger of %q: %w", sessionID, err)
		}
		return nil, err
	}
	where, args := conditions([]cond{{"session_id", sessionID}})
	var out []ledger.Entry
	err := db.query(ctx, `SELECT `+ledgerColumns+` FROM ledger`+where+` ORDER BY id`, args, func(rows *sql.Rows) error {
		e, err := scanLedger(rows)
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: ledger of %q: %w", sessionID, err)
	}
	return out, nil
}

// LedgerTail returns the session's latest ledger entry, and false when it has none.
func (db *DB) LedgerTail(ctx context.Context, sessionID string) (ledger.Entry, bool, error) {
	row := db.r.QueryRowContext(ctx, `SELECT `+ledgerColumns+` FROM ledger WHERE session_id = $1 ORDER BY id DESC LIMIT 1`, sessionID)
	e, err := scanLedger(row)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ledger.Entry{}, false, nil
	case err != nil:
		return ledger.Entry{}, false, fmt.Errorf("storage: latest ledger entry of %q: %w", sessionID, db.classify(err))
	}
	return e, true, nil
}

// LedgerSessions sums the ledger per session (only sessionID's when it is not ""),
// sessions in the order of their first entry; none from a database older than the
// ledger. First and Last are the earliest and latest At of the session's entries
// (entries are recorded as their responses end, which under load need not be the
// order of the requests). Recalls counts the store's recall events of each session
// (recalls table).
func (db *DB) LedgerSessions(ctx context.Context, sessionID string) ([]ledger.SessionTotals, error) {
	if ok, err := db.hasLedger(ctx); !ok || err != nil {
		if err != nil {
			err = fmt.Errorf("storage: ledger sessions: %w", err)
		}
		return nil, err
	}
	where, args := conditions([]cond{{"session_id", sessionID}})
	q := `WITH s AS (
		SELECT session_id, min(id) AS first_id, count(*) AS n,
			count(CASE WHEN result = 'ok' THEN 1 END), count(CASE WHEN result = 'none' THEN 1 END),
			count(CASE WHEN result = 'malformed' THEN 1 END), count(CASE WHEN result = 'error' THEN 1 END),
			sum(input_tokens), sum(cache_read_tokens), sum(cache_write_5m_tokens), sum(cache_write_1h_tokens), sum(output_tokens),
			sum(paid_usd), sum(keep_all_usd), sum(removed_tokens),
			count(CASE WHEN rewrite <> '' THEN 1 END), sum(rewrite_tokens), sum(rewrite_usd), sum(planned_rewrite_usd)
		FROM ledger` + where + ` GROUP BY session_id)
	SELECT s.*, (SELECT count(*) FROM recalls r WHERE r.session_id = s.session_id)
	FROM s ORDER BY s.first_id`
	var out []ledger.SessionTotals
	err := db.query(ctx, q, args, func(rows *sql.Rows) error {
		var s ledger.SessionTotals
		var firstID int64
		u := &s.Usage
		if err := rows.Scan(&s.SessionID, &firstID, &s.Requests,
			&s.WithUsage, &s.NoUsage, &s.Malformed, &s.UpstreamErrors,
			&u.Input, &u.CacheRead, &u.CacheWrite5m, &u.CacheWrite1h, &u.Output,
			&s.PaidUSD, &s.KeepAllUSD, &s.RemovedTokens,
			&s.Rewrites, &s.RewriteTokens, &s.RewriteUSD, &s.PlannedRewriteUSD,
			&s.Recalls); err != nil {
			return err
		}
		s.SavedUSD = s.KeepAllUSD - s.PaidUSD
		out = append(out, s)
		return nil
	})
	if err == nil {
		err = db.ledgerSpans(ctx, where, args, out)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: ledger sessions: %w", err)
	}
	return out, nil
}

// ledgerSpans sets First and Last of each of sessions to the earliest and latest At
// of its entries (parsed: the stored RFC 3339 text does not sort as text when the
// fractions of a second differ in length).
func (db *DB) ledgerSpans(ctx context.Context, where string, args []any, sessions []ledger.SessionTotals) error {
	byID := make(map[string]*ledger.SessionTotals, len(sessions))
	for i := range sessions {
		byID[sessions[i].SessionID] = &sessions[i]
	}
	return db.query(ctx, `SELECT session_id, at FROM ledger`+where, args, func(rows *sql.Rows) error {
		var id string
		var at sql.NullString
		if err := rows.Scan(&id, &at); err != nil {
			return err
		}
		t, err := parseTime(at)
		if err != nil || t.IsZero() {
			return err
		}
		if s := byID[id]; s != nil {
			if s.First.IsZero() || t.Before(s.First) {
				s.First = t
			}
			if t.After(s.Last) {
				s.Last = t
			}
		}
		return nil
	})
}
