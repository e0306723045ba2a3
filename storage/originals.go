package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// SaveOriginal commits o's text (into blobs, once per SHA-256) and its outputs row
// in one transaction; when it returns nil the original is durable (synchronous=FULL
// WAL commit). o.Hash may be empty (it is computed); when set it must equal the
// hex SHA-256 of o.Text. Saving the same original again is a no-op. Errors
// (wrapped): ErrInvalid for a malformed recall id or an empty session id or output
// key or a wrong hash; ErrConflict when the recall id already holds another text or
// another output, or the session's output key is stored under another recall id;
// ErrReadOnly on a read-only database.
func (db *DB) SaveOriginal(ctx context.Context, o advisor.Original) error {
	what := fmt.Sprintf("storage: save original %q (session %q, output %q)", o.RecallID, o.SessionID, o.OutputKey)
	hash, err := checkOriginal(o)
	if err == nil {
		err = db.write(ctx, func(tx *sql.Tx) error { return saveOriginalTx(ctx, tx, o, hash) })
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// checkOriginal validates o and returns the hex SHA-256 of its text.
func checkOriginal(o advisor.Original) (string, error) {
	sum := sha256.Sum256([]byte(o.Text))
	hash := hex.EncodeToString(sum[:])
	switch {
	case !advisor.ValidRecallID(o.RecallID):
		return "", fmt.Errorf("%w: recall id must be \"o_\" and 10 lowercase hex digits", ErrInvalid)
	case o.SessionID == "":
		return "", fmt.Errorf("%w: empty session id", ErrInvalid)
	case o.OutputKey == "":
		return "", fmt.Errorf("%w: empty output key", ErrInvalid)
	case o.Hash != "" && o.Hash != hash:
		return "", fmt.Errorf("%w: hash %s is not the SHA-256 of the text (%s)", ErrInvalid, o.Hash, hash)
	}
	return hash, nil
}

// saveOriginalTx stores o (text once by hash) inside tx; see SaveOriginal.
func saveOriginalTx(ctx context.Context, tx *sql.Tx, o advisor.Original, hash string) error {
	var oldSession, oldKey, oldHash string
	err := tx.QueryRowContext(ctx, `SELECT session_id, output_key, hash FROM outputs WHERE recall_id = ?`, o.RecallID).
		Scan(&oldSession, &oldKey, &oldHash)
	switch {
	case err == nil:
		if oldSession != o.SessionID || oldKey != o.OutputKey || oldHash != hash {
			return fmt.Errorf("%w: recall id holds session %q, output %q, hash %s", ErrConflict, oldSession, oldKey, oldHash)
		}
		return nil // already saved
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	var other string
	err = tx.QueryRowContext(ctx, `SELECT recall_id FROM outputs WHERE session_id = ? AND output_key = ?`, o.SessionID, o.OutputKey).Scan(&other)
	switch {
	case err == nil:
		return fmt.Errorf("%w: this session output is stored under recall id %q", ErrConflict, other)
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM blobs WHERE hash = ?`, hash).Scan(&have); err != nil {
		return err
	}
	if have == 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO blobs(hash, text, bytes) VALUES (?, ?, ?)`,
			hash, []byte(o.Text), len(o.Text)); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO outputs(recall_id, session_id, output_key, tool, summary, hash, tokens, step, saved_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`,
		o.RecallID, o.SessionID, o.OutputKey, o.Tool, o.Summary, hash, o.Tokens, o.Step)
	return err
}

// Original returns the stored original with recall id id, its Text byte for byte as
// saved. Errors (wrapped): ErrNotFound and advisor.ErrNotFound (both in the chain,
// so consumers of the domain interface can test for it) for an unknown id,
// ErrCorrupt when the stored bytes no longer hash to the recorded SHA-256.
func (db *DB) Original(ctx context.Context, id string) (advisor.Original, error) {
	o := advisor.Original{RecallID: id}
	var text []byte
	err := db.r.QueryRowContext(ctx, `SELECT o.session_id, o.output_key, o.tool, o.summary, o.hash, o.tokens, o.step, b.text
		FROM outputs o JOIN blobs b ON b.hash = o.hash WHERE o.recall_id = ?`, id).
		Scan(&o.SessionID, &o.OutputKey, &o.Tool, &o.Summary, &o.Hash, &o.Tokens, &o.Step, &text)
	if errors.Is(err, sql.ErrNoRows) {
		return advisor.Original{}, fmt.Errorf("storage: original %q: %w: %w", id, ErrNotFound, advisor.ErrNotFound)
	}
	if err != nil {
		return advisor.Original{}, fmt.Errorf("storage: original %q: %w", id, classify(err))
	}
	sum := sha256.Sum256(text)
	if got := hex.EncodeToString(sum[:]); got != o.Hash {
		return advisor.Original{}, fmt.Errorf("storage: original %q: %w: recorded %s, stored bytes hash to %s", id, ErrCorrupt, o.Hash, got)
	}
	o.Text = string(text)
	return o, nil
}

// SaveStub records the stub applied to an output, replacing an earlier stub of the
// same recall id (an output pruned again after a recall). The outputs row with the
// same recall id, session id and output key must exist: otherwise it fails with
// ErrNoOriginal and writes nothing, so a stub never exists without its original.
// ErrInvalid for empty ids or stub text; ErrReadOnly on a read-only database.
func (db *DB) SaveStub(ctx context.Context, s advisor.StubRecord) error {
	what := fmt.Sprintf("storage: save stub %q (session %q, output %q)", s.RecallID, s.SessionID, s.OutputKey)
	err := checkStub(s)
	if err == nil {
		err = db.write(ctx, func(tx *sql.Tx) error { return saveStubTx(ctx, tx, s) })
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

// saveStubTx stores s inside tx and moves the session's version; the stubs table's
// foreign key refuses a stub whose original is not stored.
func saveStubTx(ctx context.Context, tx *sql.Tx, s advisor.StubRecord) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO stubs(recall_id, session_id, output_key, stub, step, reason, score, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(recall_id) DO UPDATE SET session_id = excluded.session_id, output_key = excluded.output_key,
			stub = excluded.stub, step = excluded.step, reason = excluded.reason, score = excluded.score, at = excluded.at`,
		s.RecallID, s.SessionID, s.OutputKey, s.Stub, s.Step, s.Reason, nullFloat(s.Score), timeText(s.At))
	if err != nil {
		return err
	}
	return bumpVersion(ctx, tx, s.SessionID)
}

// SavePrunes implements advisor.PruneStore: every original, then its stub, in one
// transaction, so a rewrite costs one commit (synchronous=FULL) instead of two per
// pruned output. All or nothing: a bad record or a failed write stores none of them.
// Errors are those of SaveOriginal and SaveStub, naming the record.
func (db *DB) SavePrunes(ctx context.Context, prunes []advisor.Prune) error {
	hashes := make([]string, len(prunes))
	for i, p := range prunes {
		h, err := checkOriginal(p.Original)
		if err == nil {
			err = checkStub(p.Stub)
		}
		if err != nil {
			return fmt.Errorf("storage: save prune %q (session %q, output %q): %w", p.Original.RecallID, p.Original.SessionID, p.Original.OutputKey, err)
		}
		hashes[i] = h
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		for i, p := range prunes {
			if err := saveOriginalTx(ctx, tx, p.Original, hashes[i]); err != nil {
				return fmt.Errorf("original %q: %w", p.Original.RecallID, err)
			}
			if err := saveStubTx(ctx, tx, p.Stub); err != nil {
				return fmt.Errorf("stub %q: %w", p.Stub.RecallID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: save %d prunes: %w", len(prunes), err)
	}
	return nil
}

var _ advisor.Store = (*DB)(nil)

// SessionStubs returns the stubs applied in session sessionID keyed by output key
// (an empty map, not nil, when there are none).
func (db *DB) SessionStubs(ctx context.Context, sessionID string) (map[string]advisor.StubRecord, error) {
	what := fmt.Sprintf("storage: stubs of session %q", sessionID)
	rows, err := db.r.QueryContext(ctx, `SELECT recall_id, session_id, output_key, stub, step, reason, score, at
		FROM stubs WHERE session_id = ?`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, classify(err))
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
		return nil, fmt.Errorf("%s: %w", what, classify(err))
	}
	return out, nil
}

// RecordRecall stores one recall event. The output must have a stored original with
// the same recall id, session id and output key, else ErrNoOriginal (nothing
// written). ErrInvalid for an empty recall id; ErrReadOnly on a read-only database.
func (db *DB) RecordRecall(ctx context.Context, e advisor.RecallEvent) error {
	what := fmt.Sprintf("storage: record recall %q (session %q, output %q)", e.RecallID, e.SessionID, e.OutputKey)
	if e.RecallID == "" {
		return fmt.Errorf("%s: %w: empty recall id", what, ErrInvalid)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO recalls(recall_id, session_id, output_key, step, at) VALUES (?, ?, ?, ?, ?)`,
			e.RecallID, e.SessionID, e.OutputKey, e.Step, timeText(e.At))
		if err != nil {
			return err
		}
		return bumpVersion(ctx, tx, e.SessionID)
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
		WHERE session_id = ? ORDER BY id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, classify(err))
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
		return nil, fmt.Errorf("%s: %w", what, classify(err))
	}
	return out, nil
}

// bumpVersion adds one to the session's version inside tx.
func bumpVersion(ctx context.Context, tx *sql.Tx, sessionID string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO session_versions(session_id, version) VALUES (?, 1)
		ON CONFLICT(session_id) DO UPDATE SET version = version + 1`, sessionID)
	return err
}

// SessionVersion implements advisor.VersionedStore: a counter that grows by exactly
// one for every stub saved and every recall recorded in the session, by any process
// sharing the database; 0 for a session with neither.
func (db *DB) SessionVersion(ctx context.Context, sessionID string) (int64, error) {
	var v int64
	err := db.r.QueryRowContext(ctx, `SELECT version FROM session_versions WHERE session_id = ?`, sessionID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("storage: version of session %q: %w", sessionID, err)
	}
	return v, nil
}
