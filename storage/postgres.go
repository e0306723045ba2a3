package storage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// DefaultApplicationName is the application_name a PostgreSQL connection reports
// (pg_stat_activity) when the URL sets none.
const DefaultApplicationName = "pruneadvisor"

// IsPostgres reports whether dsn names a PostgreSQL database: a URL starting with
// postgres:// or postgresql:// (the schemes pgx reads as URLs). Anything else is an
// SQLite file path.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Redact returns dsn fit for a message: a PostgreSQL URL without the password of
// its user info and with the values of its password and sslpassword parameters
// replaced by "xxxxx"; an SQLite path as it is. A URL that does not parse is
// replaced whole, since where its password ends is unknown.
func Redact(dsn string) string {
	if !IsPostgres(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		scheme, _, _ := strings.Cut(dsn, "://")
		return scheme + "://(a URL that does not parse)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	masked := false
	for key := range q {
		if k := strings.ToLower(key); k == "password" || k == "sslpassword" {
			q.Set(key, "xxxxx")
			masked = true
		}
	}
	if masked {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// openPostgres opens the PostgreSQL database at the URL dsn (OpenWith).
func openPostgres(ctx context.Context, dsn string, opts Options) (*DB, error) {
	db := &DB{kind: postgresBackend, path: Redact(dsn), readOnly: opts.ReadOnly}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgconn's message shows the URL with its passwords masked.
		return nil, fmt.Errorf("storage: open %s: %w: %w", db.path, ErrInvalid, err)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = DefaultApplicationName
	}
	if opts.ReadOnly {
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
	}
	conns := opts.MaxConns
	if conns <= 0 {
		conns = DefaultMaxConns
	}
	db.w = stdlib.OpenDB(*cfg)
	db.w.SetMaxOpenConns(conns)
	db.w.SetMaxIdleConns(conns)
	db.r = db.w
	if err := db.w.PingContext(ctx); err != nil {
		db.w.Close()
		return nil, fmt.Errorf("storage: open %s: %w", db.path, connectError(cfg, err))
	}
	if err := db.migrate(ctx); err != nil {
		db.w.Close()
		return nil, err
	}
	return db, nil
}

// serverAddress names the server cfg dials: host:port, or the socket path for a
// host that is a folder.
func serverAddress(cfg *pgconn.Config) string {
	port := strconv.Itoa(int(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		return cfg.Host + "/.s.PGSQL." + port
	}
	return net.JoinHostPort(cfg.Host, port)
}

// connectError says why connecting failed: ErrUnreachable with the server's address
// when nothing answered there, the server's own refusal otherwise (pgconn's errors
// name the user and database, never the password).
func connectError(cfg *pgx.ConnConfig, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Errorf("the PostgreSQL server at %s refused the connection: %w", serverAddress(&cfg.Config), err)
	}
	return fmt.Errorf("%w at %s: %w", ErrUnreachable, serverAddress(&cfg.Config), err)
}

// PostgreSQL error codes (https://www.postgresql.org/docs/current/errcodes-appendix.html).
const (
	pgForeignKeyViolation = "23503"
	pgReadOnlyTransaction = "25006"
	pgSerializationFail   = "40001"
	pgDeadlockDetected    = "40P01"
)

// classifyPostgres returns the sentinel for a PostgreSQL error: ErrReadOnly for a
// write in a read-only transaction, ErrNoOriginal for a foreign key violation,
// ErrUnreachable when a new connection could not be made; nil otherwise.
func classifyPostgres(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case pgReadOnlyTransaction:
			return ErrReadOnly
		case pgForeignKeyViolation:
			return ErrNoOriginal
		}
		return nil
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return ErrUnreachable
	}
	return nil
}

// retryable reports whether PostgreSQL aborted a transaction that may succeed when
// run again: a deadlock or a serialization failure.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == pgDeadlockDetected || pe.Code == pgSerializationFail)
}
