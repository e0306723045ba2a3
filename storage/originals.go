package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// SaveOriginal commits o's text (into blobs, once per SHA-256) and its outputs row
// in one transaction; when it returns nil the original is durable (SQLite: a
// synchronous=FULL WAL commit; PostgreSQL: a committed transaction). o.Hash may be
// empty (it is computed); when set it must equal the hex SHA-256 of o.Text. Saving
// the same original again is a no-op. Errors (wrapped): ErrInvalid for a malformed
// recall id or an empty session id or output key or a wrong hash; ErrConflict when
// the recall id already holds another text or another output, or the session's
// output key is stored under another recall id; ErrReadOnly on a read-only database.
func (db *DB) SaveOriginal(ctx context.Context, o advisor.Original) error {
	return db.SavePrunes(ctx, []advisor.Prune{{Original: o}})
}

// checkOriginal validates o and returns the hex SHA-256 of its text.
func checkOriginal(o advisor.Original) (string, error) {
	sum := sha256.Sum256([]byte(o.Text))
	hash := hex.EncodeToString(sum[:])
	switch {
	case !advisor.ValidRecallID(o.RecallID):
		return "", fmt.Errorf("%w: recall id must be \"o_\" and 12 digits (or the legacy 10 lowercase hex digits)", ErrInvalid)
	case o.SessionID == "":
		return "", fmt.Errorf("%w: empty session id", ErrInvalid)
	case o.OutputKey == "":
		return "", fmt.Errorf("%w: empty output key", ErrInvalid)
	case o.Hash != "" && o.Hash != hash:
		return "", fmt.Errorf("%w: hash %s is not the SHA-256 of the text (%s)", ErrInvalid, o.Hash, hash)
	}
	return hash, nil
}

// Original returns the stored original with recall id id, its Text byte for byte as
// saved. Errors (wrapped): ErrNotFound and advisor.ErrNotFound (both in the chain,
// so consumers of the domain interface can test for it) for an unknown id,
// ErrCorrupt when the stored bytes no longer hash to the recorded SHA-256.
func (db *DB) Original(ctx context.Context, id string) (advisor.Original, error) {
	o := advisor.Original{RecallID: id}
	var text []byte
	err := db.r.QueryRowContext(ctx, `SELECT o.session_id, o.output_key, o.tool, o.summary, o.hash, o.tokens, o.step, b.text
		FROM outputs o JOIN blobs b ON b.hash = o.hash WHERE o.recall_id = $1`, id).
		Scan(&o.SessionID, &o.OutputKey, &o.Tool, &o.Summary, &o.Hash, &o.Tokens, &o.Step, &text)
	if errors.Is(err, sql.ErrNoRows) {
		return advisor.Original{}, fmt.Errorf("storage: original %q: %w: %w", id, ErrNotFound, advisor.ErrNotFound)
	}
	if err != nil {
		return advisor.Original{}, fmt.Errorf("storage: original %q: %w", id, db.classify(err))
	}
	sum := sha256.Sum256(text)
	if got := hex.EncodeToString(sum[:]); got != o.Hash {
		return advisor.Original{}, fmt.Errorf("storage: original %q: %w: recorded %s, stored bytes hash to %s", id, ErrCorrupt, o.Hash, got)
	}
	o.Text = string(text)
	return o, nil
}

// SaveStub records the stub applied to an output. A stub is stored once (it is
// frozen, docs/DESIGN.md "Recall"): saving the stub already stored is a no-op, another
// stub for the same recall id fails with ErrConflict and writes nothing (first
// writer wins). The outputs row with the same recall id, session id and output key
// must exist: otherwise it fails with ErrNoOriginal and writes nothing, so a stub
// never exists without its original. ErrInvalid for empty ids or stub text;
// ErrReadOnly on a read-only database.
func (db *DB) SaveStub(ctx context.Context, s advisor.StubRecord) error {
	what := fmt.Sprintf("storage: save stub %q (session %q, output %q)", s.RecallID, s.SessionID, s.OutputKey)
	err := checkStub(s)
	if err == nil {
		err = db.write(ctx, func(tx *sql.Tx) error {
			saved, err := db.saveStubsTx(ctx, tx, []advisor.StubRecord{s})
			if err != nil || saved[s.SessionID] == 0 {
				return err
			}
			return bumpVersion(ctx, tx, s.SessionID, 1)
		})
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// checkStub validates a stub record.
func checkStub(s advisor.StubRecord) error {
	switch {
	case s.RecallID == "" || s.SessionID == "" || s.OutputKey == "":
		return fmt.Errorf("%w: recall id, session id and output key are required", ErrInvalid)
	case s.Stub == "":
		return fmt.Errorf("%w: empty stub text", ErrInvalid)
	}
	return nil
}

// SavePrunes implements advisor.Store: every original, then its stub, in one
// transaction, so a rewrite costs one commit instead of two per pruned output. All
// or nothing: a bad record, a conflict or a failed write stores none of them. A
// Prune whose Stub is the zero StubRecord stores the original alone (SaveOriginal).
//
// Rows are written in one order whatever the order of prunes (blobs by hash,
// outputs and stubs by recall id, then each session's version once), so that on
// PostgreSQL two replicas' rewrites of overlapping outputs wait for each other
// instead of deadlocking; the later one then finds the earlier one's stubs, and
// fails with ErrConflict (and advisor.ErrConflict) when one of them differs from
// its own. A stub already stored with the same text is not saved again and does not
// move the session's version. Errors are those of SaveOriginal and SaveStub, naming
// the record.
func (db *DB) SavePrunes(ctx context.Context, prunes []advisor.Prune) error {
	rows := make([]pruneRow, len(prunes))
	for i, p := range prunes {
		h, err := checkOriginal(p.Original)
		if err == nil && p.Stub != (advisor.StubRecord{}) {
			err = checkStub(p.Stub)
		}
		if err != nil {
			return pruneError(p, err)
		}
		rows[i] = pruneRow{p, h}
	}
	slices.SortStableFunc(rows, func(a, b pruneRow) int { return strings.Compare(a.Original.RecallID, b.Original.RecallID) })
	err := db.write(ctx, func(tx *sql.Tx) error { return db.savePrunesTx(ctx, tx, rows) })
	if err != nil {
		if len(prunes) == 1 {
			return pruneError(prunes[0], err)
		}
		return fmt.Errorf("storage: save %d prunes: %w", len(prunes), err)
	}
	return nil
}

// pruneRow is a checked Prune and the hex SHA-256 of its original's text.
type pruneRow struct {
	advisor.Prune
	hash string
}

// pruneError names the record an error is about, as SaveOriginal's errors do.
func pruneError(p advisor.Prune, err error) error {
	o := p.Original
	verb := "save prune"
	if p.Stub == (advisor.StubRecord{}) {
		verb = "save original"
	}
	return fmt.Errorf("storage: %s %q (session %q, output %q): %w", verb, o.RecallID, o.SessionID, o.OutputKey, err)
}

var _ advisor.Store = (*DB)(nil)

// SessionStubs returns the stubs applied in session sessionID keyed by output key
// (an empty map, not nil, when there are none).
func (db *DB) SessionStubs(ctx context.Context, sessionID string) (map[string]advisor.StubRecord, error) {
	what := fmt.Sprintf("storage: stubs of session %q", sessionID)
	rows, err := db.r.QueryContext(ctx, `SELECT recall_id, session_id, output_key, stub, step, reason, score, at
		FROM stubs WHERE session_id = $1`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, db.classify(err))
	}
	defer rows.Close()
	out := map[string]advisor.StubRecord{}
	for rows.Next() {
		var s advisor.StubRecord
		var score sql.NullFloat64
		var at sql.NullString
		if err := rows.Scan(&s.RecallID, &s.SessionID, &s.OutputKey, &s.Stub, &s.Step, &s.Reason, &score, &at); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		s.Score = floatBack(score)
		if s.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("%s: output %q: %w", what, s.OutputKey, err)
		}
		out[s.OutputKey] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, db.classify(err))
	}
	return out, nil
}

// RecordRecall stores one recall event. The output must have a stored original with
// the same recall id, session id and output key, else ErrNoOriginal (nothing
// written). An event with Step 0 is stored with the session's latest recorded step
// (0 when it has none), read in the same transaction. ErrInvalid for an empty recall
// id; ErrReadOnly on a read-only database.
func (db *DB) RecordRecall(ctx context.Context, e advisor.RecallEvent) error {
	what := fmt.Sprintf("storage: record recall %q (session %q, output %q)", e.RecallID, e.SessionID, e.OutputKey)
	if e.RecallID == "" {
		return fmt.Errorf("%s: %w: empty recall id", what, ErrInvalid)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO recalls(recall_id, session_id, output_key, step, at) VALUES ($1, $2, $3,
			CASE WHEN $4 > 0 THEN $4 ELSE COALESCE((SELECT MAX(step) FROM steps WHERE session_id = $2), 0) END, $5)`,
			e.RecallID, e.SessionID, e.OutputKey, e.Step, timeText(e.At))
		if err != nil {
			return err
		}
		return bumpVersion(ctx, tx, e.SessionID, 1)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SessionRecalls returns the recall events of session sessionID in the order they
// were recorded (nil when there are none).
func (db *DB) SessionRecalls(ctx context.Context, sessionID string) ([]advisor.RecallEvent, error) {
	what := fmt.Sprintf("storage: recalls of session %q", sessionID)
	rows, err := db.r.QueryContext(ctx, `SELECT recall_id, session_id, output_key, step, at FROM recalls
		WHERE session_id = $1 ORDER BY id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, db.classify(err))
	}
	defer rows.Close()
	var out []advisor.RecallEvent
	for rows.Next() {
		var e advisor.RecallEvent
		var at sql.NullString
		if err := rows.Scan(&e.RecallID, &e.SessionID, &e.OutputKey, &e.Step, &at); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if e.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, db.classify(err))
	}
	return out, nil
}

// bumpVersion adds n to the session's version inside tx (on PostgreSQL the upsert
// holds the session's row lock until the transaction ends, so concurrent writers of
// one session add up).
func bumpVersion(ctx context.Context, tx *sql.Tx, sessionID string, n int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO session_versions(session_id, version) VALUES ($1, $2)
		ON CONFLICT(session_id) DO UPDATE SET version = session_versions.version + excluded.version`, sessionID, n)
	return err
}

// SessionVersion is the session's version alone: SessionMark's Version.
func (db *DB) SessionVersion(ctx context.Context, sessionID string) (int64, error) {
	m, err := db.SessionMark(ctx, sessionID)
	return m.Version, err
}

// SessionMark implements advisor.Store: in one indexed read, the session's version
// (a counter that grows by exactly one for every stub saved and every recall
// recorded in the session, by any process sharing the database; 0 for a session
// with neither) and its latest advised step (the highest step record stored,
// RecordBatch; 0 for none). It runs on every advised request, so its statement is
// prepared once per read connection (versionStmt) rather than parsed anew each
// time.
func (db *DB) SessionMark(ctx context.Context, sessionID string) (advisor.Mark, error) {
	st, err := db.versionStmt(ctx)
	var m advisor.Mark
	if err == nil {
		err = st.QueryRowContext(ctx, sessionID).Scan(&m.Version, &m.Step)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return advisor.Mark{}, nil
	}
	if err != nil {
		return advisor.Mark{}, fmt.Errorf("storage: version of session %q: %w", sessionID, db.classify(err))
	}
	return m, nil
}

// versionStmt returns SessionMark's statement on the read pool, prepared on its
// first use (not at open: a read-only open of a schema older than migration 0012
// has no last_step column, and only this method should fail then). A failed
// prepare is tried again on the next call.
func (db *DB) versionStmt(ctx context.Context) (*sql.Stmt, error) {
	db.stmtMu.Lock()
	defer db.stmtMu.Unlock()
	if db.version == nil {
		st, err := db.r.PrepareContext(ctx, `SELECT version, last_step FROM session_versions WHERE session_id = $1`)
		if err != nil {
			return nil, err
		}
		db.version = st
	}
	return db.version, nil
}
