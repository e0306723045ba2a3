package storage

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// The rows of one SavePrunes go in with a few multi-row statements (one round
// trip to PostgreSQL each, one SQLite statement prepared each) rather than several
// statements per pruned output: a rewrite of 40 outputs was 200 statements, each
// prepared anew by the SQLite driver (BenchmarkSavePrunes, docs/PERFORMANCE.md).
// Rows still go in lock order (blobs by hash, outputs and stubs by recall id): a
// multi-row INSERT takes its row locks in VALUES order.

// savePrunesTx writes rows (sorted by recall id) inside tx in lock order: blobs by
// hash, outputs, stubs, then the versions of the sessions whose stubs were saved.
func (db *DB) savePrunesTx(ctx context.Context, tx *sql.Tx, rows []pruneRow) error {
	if err := db.saveBlobsTx(ctx, tx, rows); err != nil {
		return err
	}
	if err := db.saveOutputsTx(ctx, tx, rows); err != nil {
		return err
	}
	var stubs []advisor.StubRecord
	for _, p := range rows {
		if p.Stub != (advisor.StubRecord{}) {
			stubs = append(stubs, p.Stub)
		}
	}
	saved, err := db.saveStubsTx(ctx, tx, stubs)
	if err != nil {
		return err
	}
	for _, session := range slices.Sorted(maps.Keys(saved)) {
		if err := bumpVersion(ctx, tx, session, saved[session]); err != nil {
			return fmt.Errorf("version of session %q: %w", session, err)
		}
	}
	return nil
}

// saveBlobsTx stores the texts of rows under their hashes inside tx, each text
// once, and only those not stored yet (one query finds them, so a text already
// stored is not sent again).
func (db *DB) saveBlobsTx(ctx context.Context, tx *sql.Tx, rows []pruneRow) error {
	texts := map[string]string{} // hash -> text
	for _, p := range rows {
		texts[p.hash] = p.Original.Text
	}
	hashes := slices.Sorted(maps.Keys(texts))
	have := map[string]bool{}
	err := db.queryIn(ctx, tx, `SELECT hash FROM blobs WHERE hash IN `, hashes, func(r *sql.Rows) error {
		var h string
		err := r.Scan(&h)
		have[h] = true
		return err
	})
	if err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	hashes = slices.DeleteFunc(hashes, func(h string) bool { return have[h] })
	err = db.insertEach(ctx, tx, `blobs(hash, text, bytes)`, ` ON CONFLICT(hash) DO NOTHING`, len(hashes), 3,
		func(vals []any, i int) []any {
			return append(vals, hashes[i], []byte(texts[hashes[i]]), len(texts[hashes[i]]))
		}, nil)
	if err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	return nil
}

// saveOutputsTx stores the outputs rows of rows inside tx (their blobs stored
// first), or checks that the rows already stored under their recall ids are
// theirs; see SaveOriginal. The insert does nothing on any key already taken (a row
// committed by another process meanwhile included: on PostgreSQL it waits for that
// transaction); when it inserted fewer rows than given, the rows read back decide.
func (db *DB) saveOutputsTx(ctx context.Context, tx *sql.Tx, rows []pruneRow) error {
	now := timeText(time.Now())
	var inserted int64
	err := db.insertEach(ctx, tx, `outputs(recall_id, session_id, output_key, tool, summary, hash, tokens, step, saved_at)`, ` ON CONFLICT DO NOTHING`,
		len(rows), 9, func(vals []any, i int) []any {
			o := rows[i].Original
			return append(vals, o.RecallID, o.SessionID, o.OutputKey, o.Tool, o.Summary, rows[i].hash, o.Tokens, o.Step, now)
		}, func(res sql.Result) error {
			n, err := res.RowsAffected()
			inserted += n
			return err
		})
	if err != nil {
		return fmt.Errorf("originals: %w", err)
	}
	if inserted == int64(len(rows)) {
		return nil // every row is new, so each is the one given
	}
	return db.checkOutputsTx(ctx, tx, rows)
}

// checkOutputsTx reads back the outputs rows under the recall ids of rows and fails
// with ErrConflict, naming the first row in recall id order, when one is missing
// (the session's output key is taken by another recall id) or holds another
// session, output key or hash.
func (db *DB) checkOutputsTx(ctx context.Context, tx *sql.Tx, rows []pruneRow) error {
	type stored struct{ session, key, hash string }
	got := map[string]stored{}
	ids := make([]string, len(rows))
	for i, p := range rows {
		ids[i] = p.Original.RecallID
	}
	err := db.queryIn(ctx, tx, `SELECT recall_id, session_id, output_key, hash FROM outputs WHERE recall_id IN `, ids, func(r *sql.Rows) error {
		var id string
		var s stored
		err := r.Scan(&id, &s.session, &s.key, &s.hash)
		got[id] = s
		return err
	})
	if err != nil {
		return fmt.Errorf("originals: %w", err)
	}
	for _, p := range rows {
		o := p.Original
		s, ok := got[o.RecallID]
		switch {
		case !ok: // the session's output key is taken
			var other string
			if err := tx.QueryRowContext(ctx, `SELECT recall_id FROM outputs WHERE session_id = $1 AND output_key = $2`,
				o.SessionID, o.OutputKey).Scan(&other); err != nil {
				return fmt.Errorf("original %q: %w", o.RecallID, err)
			}
			return fmt.Errorf("original %q: %w", o.RecallID, conflict("this session output is stored under recall id %q", other))
		case s.session != o.SessionID || s.key != o.OutputKey || s.hash != p.hash:
			return fmt.Errorf("original %q: %w", o.RecallID, conflict("recall id holds session %q, output %q, hash %s", s.session, s.key, s.hash))
		}
	}
	return nil
}

// saveStubsTx stores stubs (in recall id order) inside tx, each unless its recall
// id has a stub already (a concurrent writer's included: on PostgreSQL the insert
// waits for it), and returns how many it stored per session. A stub not stored must
// be the stored stub's text for the same output, else ErrConflict naming the first
// such; of a recall id given twice only the first stub can be stored, and the
// second is checked the same way. The stubs table's foreign key refuses a stub
// whose original is not stored (ErrNoOriginal). The caller moves each session's
// version (bumpVersion) by the stubs saved.
func (db *DB) saveStubsTx(ctx context.Context, tx *sql.Tx, stubs []advisor.StubRecord) (map[string]int64, error) {
	saved := map[string]int64{}
	inserted := map[string]bool{} // recall id -> stored now
	err := db.inChunks(len(stubs), 8, func(rows int) string {
		return insertSQL(`stubs(recall_id, session_id, output_key, stub, step, reason, score, at)`, 8, rows, db.numbered()) +
			` ON CONFLICT(recall_id) DO NOTHING RETURNING recall_id, session_id`
	}, func(vals []any, i int) []any {
		s := stubs[i]
		return append(vals, s.RecallID, s.SessionID, s.OutputKey, s.Stub, s.Step, s.Reason, nullFloat(s.Score), timeText(s.At))
	}, db.scanAll(ctx, tx, func(r *sql.Rows) error {
		var id, session string
		err := r.Scan(&id, &session)
		inserted[id] = true
		saved[session]++
		return err
	}))
	if err != nil {
		return nil, fmt.Errorf("stubs: %w", err)
	}
	if len(inserted) == len(stubs) {
		return saved, nil
	}
	first := map[string]bool{}
	var check []advisor.StubRecord
	for _, s := range stubs {
		if inserted[s.RecallID] && !first[s.RecallID] {
			first[s.RecallID] = true
			continue
		}
		check = append(check, s)
	}
	return saved, db.checkStubsTx(ctx, tx, check)
}

// checkStubsTx reads back the stubs stored under the recall ids of stubs and fails
// with ErrConflict, naming the first that differs, when one is for another output
// or holds another text.
func (db *DB) checkStubsTx(ctx context.Context, tx *sql.Tx, stubs []advisor.StubRecord) error {
	type stored struct{ session, key, stub string }
	got := map[string]stored{}
	ids := make([]string, len(stubs))
	for i, s := range stubs {
		ids[i] = s.RecallID
	}
	err := db.queryIn(ctx, tx, `SELECT recall_id, session_id, output_key, stub FROM stubs WHERE recall_id IN `, ids, func(r *sql.Rows) error {
		var id string
		var s stored
		err := r.Scan(&id, &s.session, &s.key, &s.stub)
		got[id] = s
		return err
	})
	if err != nil {
		return fmt.Errorf("stubs: %w", err)
	}
	for _, s := range stubs {
		g, ok := got[s.RecallID]
		switch {
		case !ok:
			return fmt.Errorf("stub %q: neither stored nor found stored", s.RecallID)
		case g.session != s.SessionID || g.key != s.OutputKey || g.stub != s.Stub:
			return fmt.Errorf("stub %q: %w", s.RecallID, conflict("output %q of session %q already has another stub (first writer wins): %q", g.key, g.session, g.stub))
		}
	}
	return nil
}

// numbered reports whether statements take $1, $2... parameters (PostgreSQL) rather
// than plain ? (SQLite; see insertSQL).
func (db *DB) numbered() bool { return db.kind == postgresBackend }

// inChunks runs the statements for n rows of cols values each, in order, each
// statement holding as many rows as fit maxInsertParams parameters: query(rows) is
// a statement's SQL for rows rows, add appends row i's values to vals, and run runs
// one statement.
func (db *DB) inChunks(n, cols int, query func(rows int) string, add func(vals []any, i int) []any, run func(q string, vals []any) error) error {
	per := max(1, maxInsertParams/cols)
	for start := 0; start < n; start += per {
		rows := min(per, n-start)
		vals := make([]any, 0, rows*cols)
		for i := start; i < start+rows; i++ {
			vals = add(vals, i)
		}
		if err := run(query(rows), vals); err != nil {
			return fmt.Errorf("rows %d-%d: %w", start, start+rows-1, err)
		}
	}
	return nil
}

// insertEach inserts n rows of cols values into table (a "name(col, col...)"
// clause) inside tx, with suffix (ON CONFLICT...) after the VALUES of each
// statement; add appends row i's values to vals; each (may be nil) gets each
// statement's result.
func (db *DB) insertEach(ctx context.Context, tx *sql.Tx, table, suffix string, n, cols int, add func(vals []any, i int) []any, each func(sql.Result) error) error {
	return db.inChunks(n, cols, func(rows int) string { return insertSQL(table, cols, rows, db.numbered()) + suffix }, add,
		func(q string, vals []any) error {
			res, err := tx.ExecContext(ctx, q, vals...)
			if err == nil && each != nil {
				err = each(res)
			}
			return err
		})
}

// queryIn runs prefix followed by a parenthesised list of the values in vals (a
// query ending in "IN ") inside tx, in as many statements as maxInsertParams needs,
// and calls scan on every row.
func (db *DB) queryIn(ctx context.Context, tx *sql.Tx, prefix string, vals []string, scan func(*sql.Rows) error) error {
	return db.inChunks(len(vals), 1, func(rows int) string { return prefix + inList(rows, db.numbered()) },
		func(args []any, i int) []any { return append(args, vals[i]) }, db.scanAll(ctx, tx, scan))
}

// scanAll returns a run function for inChunks that queries tx and calls scan on
// every row the statement returns.
func (db *DB) scanAll(ctx context.Context, tx *sql.Tx, scan func(*sql.Rows) error) func(q string, vals []any) error {
	return func(q string, vals []any) error {
		rows, err := tx.QueryContext(ctx, q, vals...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

// inList is "(?, ?, ?)" for n values ("($1, $2, $3)" numbered).
func inList(n int, numbered bool) string {
	var b strings.Builder
	b.WriteByte('(')
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		if numbered {
			b.WriteString("$" + strconv.Itoa(i+1))
		} else {
			b.WriteByte('?')
		}
	}
	b.WriteByte(')')
	return b.String()
}
