package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
)

// RecordAsks stores one row per ask, all in one transaction (all or none). Each ask
// needs a session id and an output key (ErrInvalid names the index of the first bad
// one). A NaN Score is stored as NULL and read back as NaN. Empty asks is a no-op.
// Like every record write (RecordBatch), the commit survives the process's death but
// not necessarily a power failure (crashSafe).
func (db *DB) RecordAsks(ctx context.Context, asks []advisor.AskRecord) error {
	return db.RecordBatch(ctx, asks, nil, nil)
}

// RecordBatch stores asks, decisions and step records in one transaction (all or
// none), as RecordAsks, RecordDecisions and RecordSteps would one by one: the record
// queue of the proxy writes each round with it, so a round is one commit. The commit
// is crash-safe, not durable: it survives kill -9 (what a restarted server reads
// back, advisor.Store.SessionHistoryBetween, is there), while a power failure may lose the
// last rounds (SQLite synchronous=NORMAL, PostgreSQL synchronous_commit off for the
// transaction); originals and stubs (SavePrunes) always commit durably. Validation
// errors (ErrInvalid) name the record; all empty is a no-op.
func (db *DB) RecordBatch(ctx context.Context, asks []advisor.AskRecord, ds []advisor.DecisionRecord, steps []advisor.StepRecord) error {
	if len(asks)+len(ds)+len(steps) == 0 {
		return nil
	}
	if err := errors.Join(checkAsks(asks), checkDecisions(ds), checkSteps(steps)); err != nil {
		return err
	}
	db.prepareInserts(ctx, askColumns, len(asks))
	db.prepareInserts(ctx, decisionColumns, len(ds))
	db.prepareInserts(ctx, stepColumns, len(steps))
	err := db.writeAs(ctx, crashSafe, func(tx *sql.Tx) error {
		if len(asks) > 0 {
			if err := db.insertAll(ctx, tx, askColumns, len(asks), func(i int) []any { return askRow(asks[i].SessionID, asks[i]) }); err != nil {
				return err
			}
		}
		if len(ds) > 0 {
			if err := db.insertAll(ctx, tx, decisionColumns, len(ds), func(i int) []any { return decisionRow(ds[i].SessionID, ds[i]) }); err != nil {
				return err
			}
		}
		if len(steps) > 0 {
			if err := db.insertAll(ctx, tx, stepColumns, len(steps), func(i int) []any { return stepRow(steps[i]) }); err != nil {
				return err
			}
			return markSteps(ctx, tx, steps)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: record %s: %w", recordCounts(len(asks), len(ds), len(steps)), err)
	}
	return nil
}

// recordCounts names what a RecordBatch holds, for its errors: "2 asks", "2 asks,
// 3 decisions and 1 steps".
func recordCounts(asks, ds, steps int) string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{asks, "asks"}, {ds, "decisions"}, {steps, "steps"}} {
		if c.n > 0 {
			parts = append(parts, strconv.Itoa(c.n)+" "+c.what)
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// checkAsks is RecordAsks' validation.
func checkAsks(asks []advisor.AskRecord) error {
	for i, a := range asks {
		if a.SessionID == "" || a.OutputKey == "" {
			return fmt.Errorf("storage: record asks: ask %d (session %q, output %q): %w: session id and output key are required", i, a.SessionID, a.OutputKey, ErrInvalid)
		}
	}
	return nil
}

// askColumns and askRow are the asks row of a, stored under session (RecordAsks,
// CommitReplay).
const askColumns = `asks(session_id, output_key, step, card_hash, scorer, score, ok, fail_kind, latency_ns, tokens, signals)`

func askRow(session string, a advisor.AskRecord) []any {
	return []any{session, a.OutputKey, a.Step, a.CardHash, a.Scorer, nullFloat(a.Score), a.OK, a.FailKind, int64(a.Latency), a.Tokens, signalsText(a.Signals)}
}

// RecordDecisions stores the decisions of one step, all in one transaction (all or
// none). Each needs a session id, an output key and a decision (ErrInvalid names
// the index of the first bad one). Empty ds is a no-op. Crash-safe (RecordBatch).
func (db *DB) RecordDecisions(ctx context.Context, ds []advisor.DecisionRecord) error {
	return db.RecordBatch(ctx, nil, ds, nil)
}

// checkDecisions is RecordDecisions' validation.
func checkDecisions(ds []advisor.DecisionRecord) error {
	for i, d := range ds {
		if d.SessionID == "" || d.OutputKey == "" || d.Decision == "" {
			return fmt.Errorf("storage: record decisions: decision %d (session %q, output %q): %w: session id, output key and decision are required", i, d.SessionID, d.OutputKey, ErrInvalid)
		}
	}
	return nil
}

// decisionColumns and decisionRow are the decisions row of d, stored under session
// (RecordDecisions, CommitReplay).
const decisionColumns = `decisions(session_id, output_key, step, decision, reason, score, superseder, tokens)`

func decisionRow(session string, d advisor.DecisionRecord) []any {
	return []any{session, d.OutputKey, d.Step, string(d.Decision), d.Reason, nullFloat(d.Score), d.Superseder, d.Tokens}
}

// AskFilter selects asks; an empty field matches every value.
type AskFilter struct {
	SessionID string
	OutputKey string
	Scorer    string
}

// Asks returns the asks matching f in the order they were recorded.
func (db *DB) Asks(ctx context.Context, f AskFilter) ([]advisor.AskRecord, error) {
	where, args := conditions([]cond{{"session_id", f.SessionID}, {"output_key", f.OutputKey}, {"scorer", f.Scorer}})
	rows, err := db.r.QueryContext(ctx, `SELECT session_id, output_key, step, card_hash, scorer, score, ok, fail_kind, latency_ns, tokens, signals
		FROM asks`+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: asks %+v: %w", f, db.classify(err))
	}
	return db.scanAsks(rows, fmt.Sprintf("storage: asks %+v", f))
}

// scanAsks reads the asks rows of a query selecting the asks columns (Asks), and
// closes them; what names the query in errors.
func (db *DB) scanAsks(rows *sql.Rows, what string) ([]advisor.AskRecord, error) {
	defer rows.Close()
	var out []advisor.AskRecord
	for rows.Next() {
		var a advisor.AskRecord
		var score sql.NullFloat64
		var latency int64
		var signals string
		if err := rows.Scan(&a.SessionID, &a.OutputKey, &a.Step, &a.CardHash, &a.Scorer, &score, &a.OK, &a.FailKind, &latency, &a.Tokens, &signals); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		var err error
		if a.Signals, err = parseSignals(signals); err != nil {
			return nil, fmt.Errorf("%s: ask of %q at step %d: signals: %w", what, a.OutputKey, a.Step, err)
		}
		a.Score, a.Latency = floatBack(score), time.Duration(latency)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, db.classify(err))
	}
	return out, nil
}

// DecisionFilter selects decisions; an empty field matches every value.
type DecisionFilter struct {
	SessionID string
	OutputKey string
	Decision  advisor.Decision
}

// Decisions returns the decisions matching f in the order they were recorded.
func (db *DB) Decisions(ctx context.Context, f DecisionFilter) ([]advisor.DecisionRecord, error) {
	where, args := conditions([]cond{{"session_id", f.SessionID}, {"output_key", f.OutputKey}, {"decision", string(f.Decision)}})
	rows, err := db.r.QueryContext(ctx, `SELECT session_id, output_key, step, decision, reason, score, superseder, tokens
		FROM decisions`+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: decisions %+v: %w", f, db.classify(err))
	}
	defer rows.Close()
	var out []advisor.DecisionRecord
	for rows.Next() {
		var d advisor.DecisionRecord
		var decision string
		var score sql.NullFloat64
		if err := rows.Scan(&d.SessionID, &d.OutputKey, &d.Step, &decision, &d.Reason, &score, &d.Superseder, &d.Tokens); err != nil {
			return nil, fmt.Errorf("storage: decisions %+v: %w", f, err)
		}
		d.Decision, d.Score = advisor.Decision(decision), floatBack(score)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: decisions %+v: %w", f, db.classify(err))
	}
	return out, nil
}

// SessionRow is one row of the sessions table: a stored session (docs/DESIGN.md
// "Words"). ContentHash identifies the transcript's content and SettingsHash the
// advisor configuration it was run with (both hex SHA-256, computed by the caller).
type SessionRow struct {
	ID       string
	Provider string // prices.Provider the session was priced under; "" when unknown (migration 0005)
	// TimeMissing, TimeUnordered and TimeFuture count steps whose call time the
	// transcript does not give or gives wrongly (replay.TimeStats; migration 0005).
	TimeMissing, TimeUnordered, TimeFuture int
	Format                                 string // transcript.Format, e.g. "claude-code"; "" when unknown
	Name                                   string // display name, e.g. the transcript's file name
	// Path is the transcript file the session was read from ("" when none), so
	// replay-based commands can read it again (migration 0002).
	Path         string
	ContentHash  string
	SettingsHash string
	CreatedAt    time.Time // zero when unknown
	FinishedAt   time.Time // zero while unfinished
}

// SaveSession inserts or updates the session s.ID. On update every field is
// replaced except CreatedAt, which keeps its first non-zero value, and FinishedAt,
// which a zero value does not clear. ErrInvalid for an empty id.
func (db *DB) SaveSession(ctx context.Context, s SessionRow) error {
	if s.ID == "" {
		return fmt.Errorf("storage: save session: %w: empty session id", ErrInvalid)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		return saveSession(ctx, tx, s)
	})
	if err != nil {
		return fmt.Errorf("storage: save session %q: %w", s.ID, err)
	}
	return nil
}

// saveSession is SaveSession's statement, shared with CommitReplay.
func saveSession(ctx context.Context, tx *sql.Tx, s SessionRow) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sessions(id, format, name, path, content_hash, settings_hash, created_at, finished_at,
			provider, time_missing, time_unordered, time_future)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT(id) DO UPDATE SET format = excluded.format, name = excluded.name, path = excluded.path,
			content_hash = excluded.content_hash, settings_hash = excluded.settings_hash,
			provider = excluded.provider, time_missing = excluded.time_missing,
			time_unordered = excluded.time_unordered, time_future = excluded.time_future,
			created_at = coalesce(sessions.created_at, excluded.created_at),
			finished_at = coalesce(excluded.finished_at, sessions.finished_at)`,
		s.ID, s.Format, s.Name, s.Path, s.ContentHash, s.SettingsHash, timeText(s.CreatedAt), timeText(s.FinishedAt),
		s.Provider, s.TimeMissing, s.TimeUnordered, s.TimeFuture)
	return err
}

// Sessions returns every stored session ordered by id.
func (db *DB) Sessions(ctx context.Context) ([]SessionRow, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, format, name, path, content_hash, settings_hash, created_at, finished_at
		FROM sessions ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("storage: sessions: %w", db.classify(err))
	}
	defer rows.Close()
	var out []SessionRow
	for rows.Next() {
		var s SessionRow
		var created, finished sql.NullString
		if err := rows.Scan(&s.ID, &s.Format, &s.Name, &s.Path, &s.ContentHash, &s.SettingsHash, &created, &finished); err != nil {
			return nil, fmt.Errorf("storage: sessions: %w", err)
		}
		if s.CreatedAt, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("storage: session %q: %w", s.ID, err)
		}
		if s.FinishedAt, err = parseTime(finished); err != nil {
			return nil, fmt.Errorf("storage: session %q: %w", s.ID, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: sessions: %w", db.classify(err))
	}
	return out, nil
}

// Evidence is one piece of later-use evidence (docs/DESIGN.md "Replay and later-use
// evidence"): output OutputKey of session SessionID was used at step UseStep.
type Evidence struct {
	SessionID string
	OutputKey string
	UseStep   int     // the step whose agent words (or re-read, or recall) used the output
	Proof     string  // what was found, e.g. the distinctive name or "recall"
	Weight    float64 // strength of the evidence (e.g. the name's IDF); caller-defined scale
	// Digest is the least stub digest budget, in tokens, that holds the use
	// (evidence.Use.Digest); 0 = none does.
	Digest int
	// Preview reports that the output's head and tail (Gemini CLI's masking
	// preview) hold the use (evidence.Use.Preview).
	Preview bool
	// NameDigests is the least digest budget, in tokens, that holds each name of
	// the use (evidence.Use.NameDigests; 0 = none does), NamesPreviewed how many
	// of them the head and tail hold (evidence.Use.NamesPreviewed). Stored as
	// decimal tokens separated by spaces.
	NameDigests    []int
	NamesPreviewed int
}

// RecordEvidence stores evs in one transaction (all or none); each needs a session
// id and an output key (ErrInvalid names the index of the first bad one). Empty evs
// is a no-op.
func (db *DB) RecordEvidence(ctx context.Context, evs []Evidence) error {
	if len(evs) == 0 {
		return nil
	}
	for i, e := range evs {
		if e.SessionID == "" || e.OutputKey == "" {
			return fmt.Errorf("storage: record evidence: item %d (session %q, output %q): %w: session id and output key are required", i, e.SessionID, e.OutputKey, ErrInvalid)
		}
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		return db.insertAll(ctx, tx, evidenceColumns, len(evs), func(i int) []any {
			e := evs[i]
			return []any{e.SessionID, e.OutputKey, e.UseStep, e.Proof, nullFloat(e.Weight), e.Digest, intBool(e.Preview), joinInts(e.NameDigests), e.NamesPreviewed}
		})
	})
	if err != nil {
		return fmt.Errorf("storage: record %d evidence items: %w", len(evs), err)
	}
	return nil
}

// evidenceColumns are the evidence table's columns as RecordEvidence and
// CommitReplay write them.
const evidenceColumns = `evidence(session_id, output_key, use_step, proof, weight, digest_tokens, preview, name_digests, names_previewed)`

// EvidenceFilter selects evidence; an empty field matches every value.
type EvidenceFilter struct {
	SessionID string
	OutputKey string
}

// Evidence returns the evidence matching f in the order it was recorded.
func (db *DB) Evidence(ctx context.Context, f EvidenceFilter) ([]Evidence, error) {
	where, args := conditions([]cond{{"session_id", f.SessionID}, {"output_key", f.OutputKey}})
	rows, err := db.r.QueryContext(ctx, `SELECT session_id, output_key, use_step, proof, weight, digest_tokens, preview, name_digests, names_previewed FROM evidence`+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: evidence %+v: %w", f, db.classify(err))
	}
	defer rows.Close()
	var out []Evidence
	for rows.Next() {
		var e Evidence
		var w sql.NullFloat64
		var names string
		if err := rows.Scan(&e.SessionID, &e.OutputKey, &e.UseStep, &e.Proof, &w, &e.Digest, &e.Preview, &names, &e.NamesPreviewed); err != nil {
			return nil, fmt.Errorf("storage: evidence %+v: %w", f, err)
		}
		if e.NameDigests, err = splitInts(names); err != nil {
			return nil, fmt.Errorf("storage: evidence %+v: name_digests: %w", f, err)
		}
		e.Weight = floatBack(w)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: evidence %+v: %w", f, db.classify(err))
	}
	return out, nil
}

// Replay run statuses suggested for ReplayRun.Status (the column is free text).
const (
	ReplayRunning = "running" // started, not finished: resume or redo it
	ReplayDone    = "done"    // finished: a run with the same hashes can be skipped
	ReplayFailed  = "failed"  // stopped on an error
	// ReplayIncomplete: finished and stored, but some asks failed in a way a new
	// ask may mend (replay.Incomplete): the next replay runs it again.
	ReplayIncomplete = "incomplete"
)

// ReplayRun is one replay of one session under one configuration. A replay with the
// same (ContentHash, SettingsHash) as a ReplayDone run can be skipped, and a
// ReplayRunning one resumed.
type ReplayRun struct {
	ID           int64 // assigned by InsertReplayRun
	SessionID    string
	ContentHash  string // hex SHA-256 of the session transcript
	SettingsHash string // hex SHA-256 of the advisor settings
	Scorer       string // scorer name, e.g. "lexical"
	Schedule     string // back-off schedule, e.g. "3,6,12,24"
	Status       string // ReplayRunning, ReplayDone, ReplayFailed, or caller-defined
	StartedAt    time.Time
	FinishedAt   time.Time // zero while running
}

// InsertReplayRun stores r (its ID is ignored) and returns the new run's id.
// SessionID, ContentHash and SettingsHash are required (ErrInvalid).
func (db *DB) InsertReplayRun(ctx context.Context, r ReplayRun) (int64, error) {
	if r.SessionID == "" || r.ContentHash == "" || r.SettingsHash == "" {
		return 0, fmt.Errorf("storage: insert replay run (session %q): %w: session id, content hash and settings hash are required", r.SessionID, ErrInvalid)
	}
	var id int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO replay_runs(session_id, content_hash, settings_hash, scorer, schedule, status, started_at, finished_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
			r.SessionID, r.ContentHash, r.SettingsHash, r.Scorer, r.Schedule, r.Status, timeText(r.StartedAt), timeText(r.FinishedAt)).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("storage: insert replay run (session %q): %w", r.SessionID, err)
	}
	return id, nil
}

// FinishReplayRun sets the status and finish time of run id. ErrNotFound for an
// unknown id.
func (db *DB) FinishReplayRun(ctx context.Context, id int64, status string, at time.Time) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE replay_runs SET status = $1, finished_at = $2 WHERE id = $3`, status, timeText(at), id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: finish replay run %d: %w", id, err)
	}
	return nil
}

// ReplayRunFilter selects replay runs; an empty field matches every value.
type ReplayRunFilter struct {
	SessionID    string
	ContentHash  string
	SettingsHash string
	Status       string
}

// ReplayRuns returns the runs matching f, oldest first (by id).
func (db *DB) ReplayRuns(ctx context.Context, f ReplayRunFilter) ([]ReplayRun, error) {
	where, args := conditions([]cond{{"session_id", f.SessionID}, {"content_hash", f.ContentHash},
		{"settings_hash", f.SettingsHash}, {"status", f.Status}})
	rows, err := db.r.QueryContext(ctx, `SELECT id, session_id, content_hash, settings_hash, scorer, schedule, status, started_at, finished_at
		FROM replay_runs`+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("storage: replay runs %+v: %w", f, db.classify(err))
	}
	defer rows.Close()
	var out []ReplayRun
	for rows.Next() {
		var r ReplayRun
		var started, finished sql.NullString
		if err := rows.Scan(&r.ID, &r.SessionID, &r.ContentHash, &r.SettingsHash, &r.Scorer, &r.Schedule, &r.Status, &started, &finished); err != nil {
			return nil, fmt.Errorf("storage: replay runs %+v: %w", f, err)
		}
		if r.StartedAt, err = parseTime(started); err != nil {
			return nil, fmt.Errorf("storage: replay run %d: %w", r.ID, err)
		}
		if r.FinishedAt, err = parseTime(finished); err != nil {
			return nil, fmt.Errorf("storage: replay run %d: %w", r.ID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: replay runs %+v: %w", f, db.classify(err))
	}
	return out, nil
}

// cond is one optional equality condition of a filter: column = value unless value
// is empty. Column names are constants of this package, never user input.
type cond struct {
	column string
	value  string
}

// conditions builds " WHERE a = $1 AND b = $2" (or "") and its arguments.
func conditions(cs []cond) (string, []any) {
	var parts []string
	var args []any
	for _, c := range cs {
		if c.value == "" {
			continue
		}
		args = append(args, c.value)
		parts = append(parts, c.column+" = $"+strconv.Itoa(len(args)))
	}
	if len(parts) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(parts, " AND "), args
}

// signalsText encodes an ask's signals as stored (” for the zero value).
func signalsText(s cards.Signals) string {
	if s == (cards.Signals{}) {
		return ""
	}
	data, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	return string(data)
}

// parseSignals decodes stored signals (” is the zero value).
func parseSignals(text string) (cards.Signals, error) {
	var s cards.Signals
	if text == "" {
		return s, nil
	}
	err := json.Unmarshal([]byte(text), &s)
	return s, err
}

// RecordSteps stores step records, all in one transaction (all or none). Each
// needs a session id and a step >= 1 (ErrInvalid names the index of the first bad
// one). Empty steps is a no-op. Crash-safe (RecordBatch).
func (db *DB) RecordSteps(ctx context.Context, steps []advisor.StepRecord) error {
	return db.RecordBatch(ctx, nil, nil, steps)
}

// checkSteps is RecordSteps' validation.
func checkSteps(steps []advisor.StepRecord) error {
	for i, r := range steps {
		if r.SessionID == "" || r.Step < 1 {
			return fmt.Errorf("storage: record steps: step record %d (step %d of %q): %w: session id and a step >= 1 are required", i, r.Step, r.SessionID, ErrInvalid)
		}
	}
	return nil
}

// stepColumns and stepRow are the steps row of r.
const stepColumns = `steps(session_id, step, at, context_tokens, full_tokens, rewrite, pruned, frees, suffix, cost_usd, saving_usd, max_growth)`

func stepRow(r advisor.StepRecord) []any {
	return []any{r.SessionID, r.Step, timeText(r.At), r.ContextTokens, r.FullTokens, r.Rewrite, r.Pruned, r.Frees, r.Suffix, r.CostUSD, r.SavingUSD, r.MaxGrowth}
}

// joinInts is ns as the TEXT the name_digests and digest_live columns hold: decimal numbers
// separated by single spaces ("" for none).
func joinInts(ns []int) string {
	b := make([]byte, 0, 4*len(ns))
	for i, n := range ns {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return string(b)
}

// splitInts reads joinInts's TEXT back; nil for "". Errors: a field that is not a
// decimal integer (a column written by something else), named with its position.
func splitInts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	fields := strings.Fields(s)
	out := make([]int, len(fields))
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("field %d %q: %w", i+1, f, ErrInvalid)
		}
		out[i] = n
	}
	return out, nil
}

// intBool is b as the INTEGER the preview columns hold (1 or 0): PostgreSQL's
// driver does not encode a Go bool into an integer column (SQLite's does), and
// database/sql reads 1 and 0 back into a bool.
func intBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

// markSteps raises each session's latest advised step (session_versions.last_step,
// read by SessionMark) to the highest step of steps, inside tx: the step records
// and the mark commit together, so a reader that sees the mark sees the records
// (and the asks RecordBatch wrote with them). A mark never goes down. Sessions are
// marked in the order of their ids, so that two rounds of different processes on
// PostgreSQL take the rows' locks in one order and cannot deadlock.
func markSteps(ctx context.Context, tx *sql.Tx, steps []advisor.StepRecord) error {
	last := map[string]int{}
	for _, r := range steps {
		last[r.SessionID] = max(last[r.SessionID], r.Step)
	}
	for _, id := range slices.Sorted(maps.Keys(last)) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO session_versions(session_id, version, last_step) VALUES ($1, 0, $2)
			ON CONFLICT(session_id) DO UPDATE SET last_step = CASE WHEN excluded.last_step > session_versions.last_step
				THEN excluded.last_step ELSE session_versions.last_step END`, id, last[id]); err != nil {
			return err
		}
	}
	return nil
}

// Steps returns the step records of a session in the order recorded.
func (db *DB) Steps(ctx context.Context, sessionID string) ([]advisor.StepRecord, error) {
	var out []advisor.StepRecord
	err := db.query(ctx, `SELECT session_id, step, at, context_tokens, full_tokens, rewrite, pruned, frees, suffix, cost_usd, saving_usd, max_growth
		FROM steps WHERE session_id = $1 ORDER BY id`, []any{sessionID}, func(rows *sql.Rows) error {
		var r advisor.StepRecord
		var at sql.NullString
		if err := rows.Scan(&r.SessionID, &r.Step, &at, &r.ContextTokens, &r.FullTokens, &r.Rewrite, &r.Pruned,
			&r.Frees, &r.Suffix, &r.CostUSD, &r.SavingUSD, &r.MaxGrowth); err != nil {
			return err
		}
		t, err := parseTime(at)
		if err != nil {
			return err
		}
		r.At = t
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: steps of %q: %w", sessionID, err)
	}
	return out, nil
}

// SessionHistory returns the session's history: SessionHistoryBetween(ctx,
// sessionID, 0, 0), every ask recorded in it and its latest step record.
func (db *DB) SessionHistory(ctx context.Context, sessionID string) (advisor.History, error) {
	return db.SessionHistoryBetween(ctx, sessionID, 0, 0)
}

// SessionHistoryBetween implements advisor.Store: the session's asks of steps
// after step after and before step before (no bound for before <= 0), in the order
// recorded, and its latest step record before step before (a zero Last when none
// is stored). The asks are read by the index on (session_id, step) (migration
// 0012), so a replica catching up on the steps it did not advise reads those
// steps' asks only.
func (db *DB) SessionHistoryBetween(ctx context.Context, sessionID string, after, before int) (advisor.History, error) {
	var h advisor.History
	if before <= 0 {
		before = math.MaxInt32 // steps are INTEGER columns
	}
	asks, err := db.asksBetween(ctx, sessionID, after, before)
	if err != nil {
		return h, err
	}
	h.Asks = asks
	var at sql.NullString
	err = db.r.QueryRowContext(ctx, `SELECT session_id, step, at, context_tokens, full_tokens, rewrite, pruned, frees, suffix, cost_usd, saving_usd, max_growth
		FROM steps WHERE session_id = $1 AND step < $2 ORDER BY step DESC, id DESC LIMIT 1`, sessionID, before).Scan(&h.Last.SessionID, &h.Last.Step, &at,
		&h.Last.ContextTokens, &h.Last.FullTokens, &h.Last.Rewrite, &h.Last.Pruned, &h.Last.Frees, &h.Last.Suffix, &h.Last.CostUSD, &h.Last.SavingUSD, &h.Last.MaxGrowth)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return h, nil
	case err != nil:
		return h, fmt.Errorf("storage: history of %q: %w", sessionID, db.classify(err))
	}
	if h.Last.At, err = parseTime(at); err != nil {
		return h, fmt.Errorf("storage: history of %q: %w", sessionID, err)
	}
	return h, nil
}

// asksBetween returns the asks of session id at steps after step after and
// before step before, in the order recorded.
func (db *DB) asksBetween(ctx context.Context, id string, after, before int) ([]advisor.AskRecord, error) {
	what := fmt.Sprintf("storage: asks of %q between steps %d and %d", id, after, before)
	rows, err := db.r.QueryContext(ctx, `SELECT session_id, output_key, step, card_hash, scorer, score, ok, fail_kind, latency_ns, tokens, signals
		FROM asks WHERE session_id = $1 AND step > $2 AND step < $3 ORDER BY id`, id, after, before)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, db.classify(err))
	}
	return db.scanAsks(rows, what)
}
