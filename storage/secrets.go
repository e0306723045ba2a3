package storage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// recallSecretName is the secrets row RecallSecret keeps.
const recallSecretName = "recall-id"

// RecallSecretBytes is the length of the secret RecallSecret creates: 32 bytes, the
// output length of SHA-256, the least key length RFC 2104 section 3 advises for HMAC.
const RecallSecretBytes = 32

// RecallSecret returns the database's recall-id secret (advisor.Advisor.RecallSecret),
// creating it on first use: RecallSecretBytes bytes from crypto/rand, stored in the
// secrets table. Every process that opens the same database gets the same bytes (two
// first uses at once keep the one committed first). Errors (wrapped): ErrReadOnly
// when the database is read-only and holds no secret yet; the driver's error
// otherwise.
func (db *DB) RecallSecret(ctx context.Context) ([]byte, error) {
	what := fmt.Sprintf("storage: recall secret of %s", db.path)
	secret, err := db.readSecret(ctx, recallSecretName)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return secret, nil
	}
	if db.readOnly {
		return nil, fmt.Errorf("%s: %w: no secret stored yet", what, ErrReadOnly)
	}
	fresh := make([]byte, RecallSecretBytes)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	err = db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO secrets(name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT(name) DO NOTHING`,
			recallSecretName, fresh, timeText(time.Now()))
		if err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT value FROM secrets WHERE name = $1`, recallSecretName).Scan(&secret)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return secret, nil
}

// readSecret reads the secret called name; sql.ErrNoRows when there is none.
func (db *DB) readSecret(ctx context.Context, name string) ([]byte, error) {
	var v []byte
	if err := db.r.QueryRowContext(ctx, `SELECT value FROM secrets WHERE name = $1`, name).Scan(&v); err != nil {
		return nil, db.classify(err)
	}
	return v, nil
}
