package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// DB stores replays for the replay, calibrate and backoff commands.
var _ replay.Sink = (*DB)(nil)

// ReplayDone reports whether a finished replay (status ReplayDone) of the content
// under the settings is stored; false for one stored as ReplayIncomplete.
func (db *DB) ReplayDone(ctx context.Context, contentHash, settingsHash string) (bool, error) {
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM replay_runs WHERE content_hash = $1 AND settings_hash = $2 AND status = $3`,
		contentHash, settingsHash, ReplayDone).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("storage: replay done (content %s): %w", contentHash, db.classify(err))
	}
	return n > 0, nil
}

// replayTables are the tables whose rows of one session CommitReplay replaces.
var replayTables = []string{"asks", "decisions", "steps", "evidence", "replay_outputs", "replay_steps", "replay_runs"}

// CommitReplay stores one replayed session in one transaction: its settings
// (replay_settings, once per hash), its sessions row (with the file path), every
// ask, decision and piece of evidence, its replay_outputs and replay_steps rows,
// and a replay_runs row with status ReplayDone, or ReplayIncomplete when
// replay.Incomplete(rec) (asks to ask again: ReplayDone then reports false, so
// the next replay runs the session again). Rows stored earlier under rec.ID
// in those tables are deleted first, so committing the same record twice leaves
// the same rows as committing it once (row ids and times aside). ErrInvalid for a
// record without id or hashes; ErrReadOnly on a read-only database.
func (db *DB) CommitReplay(ctx context.Context, rec *replay.Record) error {
	if rec == nil || rec.ID == "" || rec.ContentHash == "" || rec.SettingsHash == "" {
		return fmt.Errorf("storage: commit replay: %w: id, content hash and settings hash are required", ErrInvalid)
	}
	status := ReplayDone
	if replay.Incomplete(rec) {
		status = ReplayIncomplete
	}
	err := db.write(ctx, func(tx *sql.Tx) error { return db.commitReplayTx(ctx, tx, rec, status) })
	if err != nil {
		return fmt.Errorf("storage: commit replay of %s (%s): %w", rec.Path, rec.ID, err)
	}
	return nil
}

// commitReplayTx is CommitReplay's transaction. The sessions row is written first:
// on PostgreSQL its row lock makes a second machine committing the same session
// wait, so that its deletes then see (and replace) the first one's rows.
func (db *DB) commitReplayTx(ctx context.Context, tx *sql.Tx, rec *replay.Record, status string) error {
	if err := saveSession(ctx, tx, SessionRow{
		ID: rec.ID, Format: string(rec.Format), Name: rec.Name, Path: rec.Path,
		ContentHash: rec.ContentHash, SettingsHash: rec.SettingsHash,
		CreatedAt: rec.Started, FinishedAt: rec.Finished, Provider: string(rec.Provider),
		TimeMissing: rec.Times.Missing, TimeUnordered: rec.Times.Unordered, TimeFuture: rec.Times.Future,
	}); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO replay_settings(hash, scorer, settings) VALUES ($1, $2, $3) ON CONFLICT(hash) DO NOTHING`,
		rec.SettingsHash, rec.Settings.Scorer, rec.Settings.JSON()); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	for _, t := range replayTables {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t+` WHERE session_id = $1`, rec.ID); err != nil {
			return fmt.Errorf("clearing %s: %w", t, err)
		}
	}
	if err := db.insertAll(ctx, tx, askColumns, len(rec.Asks), func(i int) []any { return askRow(rec.ID, rec.Asks[i]) }); err != nil {
		return fmt.Errorf("asks: %w", err)
	}
	if err := db.insertAll(ctx, tx, decisionColumns, len(rec.Decisions), func(i int) []any { return decisionRow(rec.ID, rec.Decisions[i]) }); err != nil {
		return fmt.Errorf("decisions: %w", err)
	}
	if err := db.insertAll(ctx, tx, evidenceColumns, len(rec.Evidence), func(i int) []any {
		u := rec.Evidence[i]
		return []any{rec.ID, u.Key, u.Step, u.Proof, nullFloat(u.Weight), u.Digest, intBool(u.Preview), joinInts(u.NameDigests), u.NamesPreviewed}
	}); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	if err := db.insertAll(ctx, tx, `replay_outputs(session_id, output_key, seq, tool, summary, tokens, step,
			candidate_from, rule_dead_at, pending_at, pruned_at, end_step, rule_by, offset_tokens, stub_tokens, digest_tokens, digest_live)`,
		len(rec.Outputs), func(i int) []any {
			o := rec.Outputs[i]
			return []any{rec.ID, o.Key, i, o.Tool, o.Summary, o.Tokens, o.Step, o.CandidateFrom, o.RuleDeadAt, o.PendingAt, o.PrunedAt, o.EndStep, o.RuleBy,
				o.Offset, o.StubTokens, o.DigestTokens, joinInts(o.DigestLive)}
		}); err != nil {
		return fmt.Errorf("outputs: %w", err)
	}
	if err := db.insertAll(ctx, tx, `replay_steps(session_id, step, context_tokens, applied_tokens, asked, over_budget, rewrite, at, cold, rewrite_reason, prompt, compaction_dropped, compaction_summary)`,
		len(rec.StepFacts), func(i int) []any {
			s := rec.StepFacts[i]
			return []any{rec.ID, s.Step, s.ContextTokens, s.AppliedTokens, s.Asked, s.OverBudget, s.Rewrite, timeText(s.At), s.Cold, s.RewriteReason, s.Prompt, s.CompactionDropped, s.CompactionSummary}
		}); err != nil {
		return fmt.Errorf("steps: %w", err)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO replay_runs(session_id, content_hash, settings_hash, scorer, schedule, status, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, rec.ID, rec.ContentHash, rec.SettingsHash, rec.Settings.Scorer,
		rec.Settings.Config.ScheduleFor(rec.Settings.Scorer), status, timeText(rec.Started), timeText(rec.Finished))
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}

// maxInsertParams bounds the parameters of one multi-row INSERT: below SQLite's
// SQLITE_MAX_VARIABLE_NUMBER (32,766 since 3.32) and PostgreSQL's 65,535.
const maxInsertParams = 8000

// insertAll inserts n rows into table (a "name(col, col...)" clause), row i holding
// args(i) (one value per column), with multi-row INSERT statements of up to
// maxInsertParams parameters: a few round trips to PostgreSQL instead of one per
// row. A statement prepareInserts prepared is used from its cache.
func (db *DB) insertAll(ctx context.Context, tx *sql.Tx, table string, n int, args func(i int) []any) error {
	if n == 0 {
		return nil
	}
	cols := len(args(0))
	per := max(1, maxInsertParams/cols)
	var st *sql.Stmt // the statement of a full chunk, prepared once
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	for start, rows := 0, 0; start < n; start += rows {
		rows = min(per, n-start)
		if rows < per && db.cachesInserts() {
			rows = insertPiece(rows) // a shape prepareInserts keeps
		}
		vals := make([]any, 0, rows*cols)
		for i := start; i < start+rows; i++ {
			vals = append(vals, args(i)...)
		}
		q := insertSQL(table, cols, rows, db.kind == postgresBackend)
		var err error
		switch cached := db.cachedInsert(q); {
		case cached != nil:
			_, err = tx.StmtContext(ctx, cached).ExecContext(ctx, vals...)
		case rows < per:
			_, err = tx.ExecContext(ctx, q, vals...)
		case st == nil:
			if st, err = tx.PrepareContext(ctx, q); err != nil {
				return err
			}
			fallthrough
		default:
			_, err = st.ExecContext(ctx, vals...)
		}
		if err != nil {
			return fmt.Errorf("rows %d-%d: %w", start, start+rows-1, err)
		}
	}
	return nil
}

// insertSQL is "INSERT INTO table VALUES ($1, ..., $cols), ..." for rows rows with
// numbered placeholders (PostgreSQL), "VALUES (?, ..., ?), ..." without. SQLite gets
// plain ? on purpose: its driver looks up every parameter's name when binding, a
// linear walk of the statement's named parameters, so 8,000 $N parameters cost 32
// million steps per statement (measured: 77% of a 20,000-step replay's CPU), and
// plain ? parameters have no names to walk.
func insertSQL(table string, cols, rows int, numbered bool) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " VALUES ")
	p := 0
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			p++
			if numbered {
				b.WriteString("$" + strconv.Itoa(p))
			} else {
				b.WriteByte('?')
			}
		}
		b.WriteByte(')')
	}
	return b.String()
}

// ReplayedSession is one finished replay as listed by ReplayedSessions.
type ReplayedSession struct {
	SessionRow           // the sessions row (Path, ContentHash, SettingsHash…)
	Scorer     string    // the scorer recorded with the run
	Settings   string    // the replay.Settings JSON the settings hash stands for
	Started    time.Time // the run's start
	Finished   time.Time // the run's end
}

// ReplayedSessions returns every session with a finished replay (status
// ReplayDone or ReplayIncomplete: its failed asks are stored as such), ordered by
// settings hash, then file path, then id.
func (db *DB) ReplayedSessions(ctx context.Context) ([]ReplayedSession, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT s.id, s.format, s.name, s.path, s.content_hash, s.settings_hash, s.created_at, s.finished_at,
			r.scorer, coalesce(x.settings, ''), r.started_at, r.finished_at
		FROM replay_runs r JOIN sessions s ON s.id = r.session_id
		LEFT JOIN replay_settings x ON x.hash = r.settings_hash
		WHERE r.status IN ($1, $2)
		ORDER BY s.settings_hash, s.path, s.id`, ReplayDone, ReplayIncomplete)
	if err != nil {
		return nil, fmt.Errorf("storage: replayed sessions: %w", db.classify(err))
	}
	defer rows.Close()
	var out []ReplayedSession
	for rows.Next() {
		var rs ReplayedSession
		var created, finished, rStarted, rFinished sql.NullString
		if err := rows.Scan(&rs.ID, &rs.Format, &rs.Name, &rs.Path, &rs.ContentHash, &rs.SettingsHash, &created, &finished,
			&rs.Scorer, &rs.Settings, &rStarted, &rFinished); err != nil {
			return nil, fmt.Errorf("storage: replayed sessions: %w", err)
		}
		for _, t := range []struct {
			dst *time.Time
			src sql.NullString
		}{{&rs.CreatedAt, created}, {&rs.FinishedAt, finished}, {&rs.Started, rStarted}, {&rs.Finished, rFinished}} {
			if *t.dst, err = parseTime(t.src); err != nil {
				return nil, fmt.Errorf("storage: replayed session %q: %w", rs.ID, err)
			}
		}
		out = append(out, rs)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: replayed sessions: %w", db.classify(err))
	}
	return out, nil
}

// LoadReplay reads back what CommitReplay stored for session id: the record's
// identity and settings, outputs, steps, asks and evidence (decisions are left
// out: calibration does not need them; read them with Decisions). Evidence Kind is
// not stored (the Proof names it). ErrNotFound when no finished replay of id is
// stored (status ReplayDone or ReplayIncomplete).
func (db *DB) LoadReplay(ctx context.Context, id string) (*replay.Record, error) {
	what := fmt.Sprintf("storage: load replay %q", id)
	rec := &replay.Record{ID: id}
	var format, settings, provider string
	var started, finished sql.NullString
	err := db.r.QueryRowContext(ctx, `SELECT s.format, s.name, s.path, s.content_hash, s.settings_hash, coalesce(x.settings, ''), r.started_at, r.finished_at,
			s.provider, s.time_missing, s.time_unordered, s.time_future
		FROM replay_runs r JOIN sessions s ON s.id = r.session_id
		LEFT JOIN replay_settings x ON x.hash = r.settings_hash
		WHERE r.session_id = $1 AND r.status IN ($2, $3) ORDER BY r.id DESC LIMIT 1`, id, ReplayDone, ReplayIncomplete).
		Scan(&format, &rec.Name, &rec.Path, &rec.ContentHash, &rec.SettingsHash, &settings, &started, &finished,
			&provider, &rec.Times.Missing, &rec.Times.Unordered, &rec.Times.Future)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, db.classify(err))
	}
	rec.Format = transcript.Format(format)
	rec.Provider = prices.Provider(provider)
	if settings != "" {
		if rec.Settings, err = replay.ParseSettings(settings); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	if rec.Started, err = parseTime(started); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if rec.Finished, err = parseTime(finished); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}

	if err := db.query(ctx, `SELECT output_key, tool, summary, tokens, step, candidate_from, rule_dead_at, pending_at, pruned_at, end_step, rule_by,
			offset_tokens, stub_tokens, digest_tokens, digest_live
		FROM replay_outputs WHERE session_id = $1 ORDER BY seq`, []any{id}, func(rows *sql.Rows) error {
		var o replay.OutputFacts
		var live string
		if err := rows.Scan(&o.Key, &o.Tool, &o.Summary, &o.Tokens, &o.Step, &o.CandidateFrom, &o.RuleDeadAt, &o.PendingAt, &o.PrunedAt, &o.EndStep, &o.RuleBy,
			&o.Offset, &o.StubTokens, &o.DigestTokens, &live); err != nil {
			return err
		}
		var err error
		if o.DigestLive, err = splitInts(live); err != nil {
			return fmt.Errorf("output %q: digest_live: %w", o.Key, err)
		}
		rec.Outputs = append(rec.Outputs, o)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: outputs: %w", what, err)
	}
	if err := db.query(ctx, `SELECT step, context_tokens, applied_tokens, asked, over_budget, rewrite, at, cold, rewrite_reason, prompt, compaction_dropped, compaction_summary
		FROM replay_steps WHERE session_id = $1 ORDER BY step`, []any{id}, func(rows *sql.Rows) error {
		var s replay.StepFacts
		var at sql.NullString
		if err := rows.Scan(&s.Step, &s.ContextTokens, &s.AppliedTokens, &s.Asked, &s.OverBudget, &s.Rewrite, &at, &s.Cold, &s.RewriteReason, &s.Prompt, &s.CompactionDropped, &s.CompactionSummary); err != nil {
			return err
		}
		t, err := parseTime(at)
		if err != nil {
			return err
		}
		s.At = t
		rec.StepFacts = append(rec.StepFacts, s)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: steps: %w", what, err)
	}
	rec.Steps = len(rec.StepFacts)
	if rec.Asks, err = db.Asks(ctx, AskFilter{SessionID: id}); err != nil {
		return nil, err
	}
	if err := db.query(ctx, `SELECT output_key, use_step, proof, weight, digest_tokens, preview, name_digests, names_previewed FROM evidence WHERE session_id = $1 ORDER BY id`,
		[]any{id}, func(rows *sql.Rows) error {
			var u evidence.Use
			var w sql.NullFloat64
			var names string
			if err := rows.Scan(&u.Key, &u.Step, &u.Proof, &w, &u.Digest, &u.Preview, &names, &u.NamesPreviewed); err != nil {
				return err
			}
			var err error
			if u.NameDigests, err = splitInts(names); err != nil {
				return fmt.Errorf("output %q step %d: name_digests: %w", u.Key, u.Step, err)
			}
			u.Weight = floatBack(w)
			rec.Evidence = append(rec.Evidence, u)
			return nil
		}); err != nil {
		return nil, fmt.Errorf("%s: evidence: %w", what, err)
	}
	return rec, nil
}

// query runs a read query and calls scan for every row.
func (db *DB) query(ctx context.Context, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return db.classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return db.classify(rows.Err())
}

// cachedInsertRows is the largest row count of an INSERT whose statement the SQLite
// store keeps prepared: rows fewer than a full chunk go in pieces of 32, 16, 8, 4, 2
// and 1 rows (insertPiece), each from a statement prepareInserts prepared once, so
// a table has at most six such statements. The proxy's record rounds and ledger
// entries are a few rows each, and preparing their statements anew was about half of
// a round's CPU (modernc.org/sqlite parses each statement's text: 0.3 ms of a steady
// 200,000-token request's 3.4 ms in BenchmarkProxy200k/steady).
const cachedInsertRows = 32

// cachesInserts reports whether the store keeps small INSERTs prepared: SQLite
// read-write (PostgreSQL's pgx keeps its own statement cache per connection).
func (db *DB) cachesInserts() bool { return db.kind == sqliteBackend && !db.readOnly }

// insertPiece is how many of rows (> 0) rows the next cached INSERT takes: the
// largest power of two no more than rows and cachedInsertRows.
func insertPiece(rows int) int {
	return 1 << (bits.Len(uint(min(rows, cachedInsertRows))) - 1)
}

// prepareInserts prepares, on the writer, the INSERT statements of table (a
// "name(col, col...)" clause) that inserting n rows, fewer than a full chunk, in
// pieces (insertPiece) needs and that are not prepared yet, and keeps them until
// Close. Call it before the transaction that inserts: the SQLite writer has one
// connection, which the transaction holds, so preparing inside it would wait for
// itself. A statement that fails to prepare is left to insertAll, which prepares it
// in the transaction as it did without the cache.
func (db *DB) prepareInserts(ctx context.Context, table string, n int) {
	if !db.cachesInserts() {
		return
	}
	cols := strings.Count(table, ",") + 1
	if n >= max(1, maxInsertParams/cols) {
		return
	}
	for n > 0 {
		rows := insertPiece(n)
		n -= rows
		q := insertSQL(table, cols, rows, false)
		if db.cachedInsert(q) != nil {
			continue
		}
		st, err := db.w.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		db.stmtMu.Lock()
		if db.inserts == nil {
			db.inserts = map[string]*sql.Stmt{}
		}
		if db.inserts[q] == nil {
			db.inserts[q], st = st, nil
		}
		db.stmtMu.Unlock()
		if st != nil {
			st.Close() // another caller prepared it meanwhile
		}
	}
}

// cachedInsert returns the prepared statement of q, nil when none is cached.
func (db *DB) cachedInsert(q string) *sql.Stmt {
	db.stmtMu.Lock()
	defer db.stmtMu.Unlock()
	return db.inserts[q]
}
