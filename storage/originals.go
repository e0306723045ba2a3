package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

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

// saveBlobTx stores text under its hash inside tx unless it is stored already (the
// text is sent only then).
func saveBlobTx(ctx context.Context, tx *sql.Tx, hash, text string) error {
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM blobs WHERE hash = $1`, hash).Scan(&have); err != nil {
		return err
	}
	if have > 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO blobs(hash, text, bytes) VALUES ($1, $2, $3) ON CONFLICT(hash) DO NOTHING`,
		hash, []byte(text), len(text))
	return err
}

// saveOutputTx stores o's outputs row inside tx (its blob stored first), or checks
// that the row already stored under o.RecallID is o's; see SaveOriginal. The insert
// does nothing on any key already taken (a row committed by another process
// meanwhile included: on PostgreSQL it waits for that transaction), and the row read
// back decides.
func saveOutputTx(ctx context.Context, tx *sql.Tx, o advisor.Original, hash string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO outputs(recall_id, session_id, output_key, tool, summary, hash, tokens, step, saved_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
		o.RecallID, o.SessionID, o.OutputKey, o.Tool, o.Summary, hash, o.Tokens, o.Step, timeText(time.Now()))
	if err != nil {
		return err
	}
	var oldSession, oldKey, oldHash string
	err = tx.QueryRowContext(ctx, `SELECT session_id, output_key, hash FROM outputs WHERE recall_id = $1`, o.RecallID).
		Scan(&oldSession, &oldKey, &oldHash)
	switch {
	case errors.Is(err, sql.ErrNoRows): // the session's output key is taken
		var other string
		if err := tx.QueryRowContext(ctx, `SELECT recall_id FROM outputs WHERE session_id = $1 AND output_key = $2`,
			o.SessionID, o.OutputKey).Scan(&other); err != nil {
			return err
		}
		return conflict("this session output is stored under recall id %q", other)
	case err != nil:
		return err
	case oldSession != o.SessionID || oldKey != o.OutputKey || oldHash != hash:
		return conflict("recall id holds session %q, output %q, hash %s", oldSession, oldKey, oldHash)
	}
	return nil
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
// frozen, DESIGN.md "Recall"): saving the stub already stored is a no-op, another
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
			saved, err := saveStubTx(ctx, tx, s)
			if err != nil || !saved {
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

// saveStubTx stores s inside tx unless its recall id has a stub already (a
// concurrent writer's included: on PostgreSQL the insert waits for it), and reports
// whether it did. The stored stub must then be s's text for s's output, else
// ErrConflict. The stubs table's foreign key refuses a stub whose original is not
// stored. The caller moves the session's version (bumpVersion) by the stubs saved.
func saveStubTx(ctx context.Context, tx *sql.Tx, s advisor.StubRecord) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO stubs(recall_id, session_id, output_key, stub, step, reason, score, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT(recall_id) DO NOTHING`,
		s.RecallID, s.SessionID, s.OutputKey, s.Stub, s.Step, s.Reason, nullFloat(s.Score), timeText(s.At))
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return n == 1, err
	}
	var session, key, stub string
	if err := tx.QueryRowContext(ctx, `SELECT session_id, output_key, stub FROM stubs WHERE recall_id = $1`, s.RecallID).
		Scan(&session, &key, &stub); err != nil {
		return false, err
	}
	if session != s.SessionID || key != s.OutputKey || stub != s.Stub {
		return false, conflict("output %q of session %q already has another stub (first writer wins): %q", key, session, stub)
	}
	return false, nil
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
	err := db.write(ctx, func(tx *sql.Tx) error { return savePrunesTx(ctx, tx, rows) })
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

// savePrunesTx writes rows (sorted by recall id) inside tx in lock order: blobs by
// hash, outputs, stubs, then the versions of the sessions whose stubs were saved.
func savePrunesTx(ctx context.Context, tx *sql.Tx, rows []pruneRow) error {
	blobs := map[string]string{} // hash -> text
	for _, p := range rows {
		blobs[p.hash] = p.Original.Text
	}
	for _, h := range slices.Sorted(maps.Keys(blobs)) {
		if err := saveBlobTx(ctx, tx, h, blobs[h]); err != nil {
			return fmt.Errorf("blob %s: %w", h, err)
		}
	}
	for _, p := range rows {
		if err := saveOutputTx(ctx, tx, p.Original, p.hash); err != nil {
			return fmt.Errorf("original %q: %w", p.Original.RecallID, err)
		}
	}
	saved := map[string]int64{} // session id -> stubs saved
	for _, p := range rows {
		if p.Stub == (advisor.StubRecord{}) {
			continue
		}
		ok, err := saveStubTx(ctx, tx, p.Stub)
		if err != nil {
			return fmt.Errorf("stub %q: %w", p.Stub.RecallID, err)
		}
		if ok {
			saved[p.Stub.SessionID]++
		}
	}
	for _, session := range slices.Sorted(maps.Keys(saved)) {
		if err := bumpVersion(ctx, tx, session, saved[session]); err != nil {
			return fmt.Errorf("version of session %q: %w", session, err)
		}
	}
	return nil
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

// SessionVersion implements advisor.Store: a counter that grows by exactly
// one for every stub saved and every recall recorded in the session, by any process
// sharing the database; 0 for a session with neither.
func (db *DB) SessionVersion(ctx context.Context, sessionID string) (int64, error) {
	var v int64
	err := db.r.QueryRowContext(ctx, `SELECT version FROM session_versions WHERE session_id = $1`, sessionID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("storage: version of session %q: %w", sessionID, err)
	}
	return v, nil
}
