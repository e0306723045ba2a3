// Package storage is pruneadvisor's store (docs/DESIGN.md "Storage" and "Storage beyond
// one machine"): originals of pruned outputs (each text stored once, by content
// hash), stubs, recalls, asks, decisions, steps, sessions, later-use evidence and
// replay runs.
//
// One type, DB, on either of two backends, chosen by the database argument of Open:
//
//   - a file path: SQLite through modernc.org/sqlite (pure Go, driver name "sqlite")
//     in WAL mode with a busy timeout and foreign keys on. A DB holds two handles on
//     the file: one writer connection (every write goes through it, in BEGIN
//     IMMEDIATE transactions, so writes of one process never contend with each
//     other), a small pool of read-only connections, and one connection that
//     checkpoints the WAL in the background (checkpointer). Several processes (proxy,
//     MCP server, replay) may open the same file at once; their writers then take
//     turns, each waiting up to the busy timeout.
//   - a postgres:// or postgresql:// URL: PostgreSQL through github.com/jackc/pgx/v5
//     (its database/sql driver), one pool of connections for reads and writes. Every
//     process opening the same database (proxy replicas on several machines, replays
//     sharded across machines) sees every other's writes once committed. Writes run
//     in READ COMMITTED transactions whose row locks are taken in one order (blobs by
//     hash, outputs and stubs by recall id, session versions by session), and a
//     transaction PostgreSQL aborts as a deadlock or serialization failure is run
//     again (up to writeAttempts times).
//
// The same SQL serves both ($1, $2... parameters; ON CONFLICT; RETURNING). Times are
// stored as RFC 3339 text with nanoseconds in UTC on both, so both return the same
// values byte for byte; booleans are BOOLEAN in PostgreSQL and 0/1 in SQLite.
//
// Concurrency contract (advisor.Store): a stub is stored once per output, first
// writer wins. SavePrunes of a stub whose output already has another stub stores
// nothing and fails with ErrConflict (and advisor.ErrConflict); the loser reads the
// winner's stub with SessionStubs. Saving the very stub already stored is a no-op.
//
// The schema is created by numbered migrations embedded from migrations/NNNN_*.sql
// (SQLite) and pgmigrations/NNNN_*.sql (PostgreSQL), applied in order, each in its
// own transaction, and recorded in schema_version. A database whose version is newer
// than the program's migrations is refused (ErrSchema). storage imports advisor (the
// domain); advisor never imports storage.
package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// DB implements advisor.Store and the recall service's store.
var _ advisor.Store = (*DB)(nil)

// Errors returned (wrapped) by this package; test with errors.Is.
var (
	// ErrNotFound means no row has the requested id (recall id, replay run id).
	ErrNotFound = errors.New("not found")
	// ErrNoOriginal means a stub or recall names an output whose original is not
	// stored (the foreign key to outputs failed); nothing was written.
	ErrNoOriginal = errors.New("no original stored for this output")
	// ErrConflict means the id is already stored with different content (a recall id
	// with another text, or a session output under another recall id, or another
	// stub for the output: first writer wins). Errors wrapping it also wrap
	// advisor.ErrConflict.
	ErrConflict = errors.New("already stored with different content")
	// ErrInvalid means a record is missing a required field or is malformed.
	ErrInvalid = errors.New("invalid record")
	// ErrReadOnly means a write was refused because the database is read-only
	// (Options.ReadOnly, a file the process may not write, or a PostgreSQL server or
	// role that refuses writes).
	ErrReadOnly = errors.New("database is read-only")
	// ErrNotWritable means a read-write open failed because the SQLite database file
	// or its folder cannot be written (a read-only file system, an immutable file or
	// folder, permissions): open it with Options.ReadOnly to read it.
	ErrNotWritable = errors.New("database cannot be written")
	// ErrNotWAL means the database could not be put in WAL mode (e.g. an in-memory
	// database, or a file system without shared memory support).
	ErrNotWAL = errors.New("journal mode is not WAL")
	// ErrSchema means the database's schema version is not the one this program
	// needs: newer than its migrations, or older on a read-only open.
	ErrSchema = errors.New("unsupported schema version")
	// ErrCorrupt means a stored original no longer matches its SHA-256.
	ErrCorrupt = errors.New("stored text does not match its hash")
	// ErrGone means the database file was deleted, or replaced by another file, after
	// it was opened. Writes are refused: SQLite would go on writing to the deleted
	// file through its open handles, and whatever it wrote (the originals of new
	// stubs) would be lost when the process ends. Reads go on from the open handles.
	ErrGone = errors.New("database file was deleted or replaced while open")
	// ErrUnreachable means no PostgreSQL server answered at the URL's host and port
	// (the error names them, never the password).
	ErrUnreachable = errors.New("cannot reach the PostgreSQL server")
)

// Defaults for Options.
const (
	// DefaultBusyTimeout is how long an SQLite connection waits for another writer's
	// lock before failing with SQLITE_BUSY.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultMaxReaders is the size of the SQLite read connection pool.
	DefaultMaxReaders = 4
	// DefaultMaxConns is the size of the PostgreSQL connection pool: a proxy replica
	// writes one rewrite, the background record writer one batch, and reads a few
	// sessions at a time.
	DefaultMaxConns = 8
	// DefaultConnectTimeout bounds connecting to PostgreSQL when the URL sets no
	// connect_timeout.
	DefaultConnectTimeout = 10 * time.Second
)

// Options configure OpenWith. The zero value is the default read-write store.
type Options struct {
	// ReadOnly opens the store for reading: migrations are not applied (the
	// database must have a pruneadvisor schema no newer than this program's, else
	// ErrSchema; an older one is read as it is, and a method needing a newer table
	// fails with the driver's error) and every write method fails with ErrReadOnly.
	// PostgreSQL sets default_transaction_read_only on each connection. SQLite opens
	// every connection with mode=ro (a missing file is an error). Use it for a
	// database file the process must not or cannot change: on a read-only file
	// system, or in a folder that cannot be written, where SQLite cannot make the
	// -shm file WAL mode reads through, the file is opened immutable (SQLite's
	// immutable=1: no locks, no WAL), which is right as long as no other process
	// writes it, and refused (ErrReadOnly) when a -wal file beside it still holds
	// commits not yet in the database file. Without ReadOnly, a chmod 0444 SQLite
	// file opened by a non-root user also fails writes with ErrReadOnly (SQLite
	// falls back to reading), but root may write any file.
	ReadOnly bool
	// BusyTimeout is how long to wait for another process's SQLite write lock
	// (busy_timeout, rounded down to milliseconds), and the time OpenWith keeps
	// retrying a busy open. Zero means DefaultBusyTimeout. Unused by PostgreSQL.
	BusyTimeout time.Duration
	// MaxReaders bounds the SQLite read connection pool. Zero means
	// DefaultMaxReaders. Unused by PostgreSQL.
	MaxReaders int
	// MaxConns bounds the PostgreSQL connection pool (reads and writes). Zero means
	// DefaultMaxConns. Unused by SQLite.
	MaxConns int
}

// backend is the database behind a DB.
type backend int

const (
	sqliteBackend backend = iota
	postgresBackend
)

// DB is an open store. All methods are safe for concurrent use; ctx comes first on
// every method that does I/O.
type DB struct {
	kind      backend
	path      string // SQLite: the file's absolute path; PostgreSQL: the URL without secrets
	readOnly  bool
	immutable bool        // SQLite read-only, opened with immutable=1 (ReadOnly on a folder that cannot be written)
	file      os.FileInfo // SQLite: the file as opened, to notice it deleted or replaced (ErrGone)
	w         *sql.DB     // SQLite: exactly one connection, all writes; PostgreSQL: the pool
	r         *sql.DB     // SQLite: read pool, query_only; PostgreSQL: the same pool as w

	ckpt *checkpointer // SQLite read-write: WAL checkpoints off the commits; nil otherwise

	stmtMu  sync.Mutex
	version *sql.Stmt            // SessionMark's statement on r, once prepared (versionStmt)
	inserts map[string]*sql.Stmt // small INSERTs' statements on w, by text (prepareInserts)
}

// Open opens the store named by dsn with default Options and brings its schema up to
// date. See OpenWith.
func Open(ctx context.Context, dsn string) (*DB, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith opens the store named by dsn: a postgres:// or postgresql:// URL opens
// PostgreSQL (IsPostgres), anything else is the path of an SQLite file.
//
// SQLite, read-write, creates a missing file, switches it to WAL and applies pending
// migrations; it returns ErrNotWAL when the file did not take WAL mode, and the
// driver's error (wrapped, with the path) when the file cannot be opened.
// PostgreSQL connects (within the URL's connect_timeout, default
// DefaultConnectTimeout) and applies pending migrations; it returns ErrUnreachable
// naming the host and port when no server answers, and the server's error (an
// unknown role or database, a refused password) otherwise; no error carries the
// URL's password. Both return ErrSchema when the database was written by a newer
// program (or, read-only, by an older one). Close the DB when done.
func OpenWith(ctx context.Context, dsn string, opts Options) (*DB, error) {
	if IsPostgres(dsn) {
		return openPostgres(ctx, dsn, opts)
	}
	return openSQLite(ctx, dsn, opts)
}

// Close closes the connection pools. Pending reads and writes are not interrupted;
// call it after they return.
func (db *DB) Close() error {
	var errs []error
	db.stmtMu.Lock()
	if db.version != nil {
		errs = append(errs, db.version.Close())
		db.version = nil
	}
	for _, st := range db.inserts {
		errs = append(errs, st.Close())
	}
	db.inserts = nil
	db.stmtMu.Unlock()
	if db.ckpt != nil {
		errs = append(errs, db.ckpt.close())
		db.ckpt = nil
	}
	if db.r != nil && db.r != db.w {
		errs = append(errs, db.r.Close())
	}
	if db.w != nil {
		errs = append(errs, db.w.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("storage: close %s: %w", db.path, err)
	}
	return nil
}

// Path returns where the store is: the absolute path of the SQLite file, or the
// PostgreSQL URL without its password (Redact), fit for messages and logs.
func (db *DB) Path() string { return db.path }

// ReadOnly reports whether the DB was opened read-only (every write fails with
// ErrReadOnly).
func (db *DB) ReadOnly() bool { return db.readOnly }

// Immutable reports an SQLite open with immutable=1 (see Options.ReadOnly).
func (db *DB) Immutable() bool { return db.immutable }

//go:embed migrations/*.sql pgmigrations/*.sql
var migrationFS embed.FS

// migration is one embedded NNNN_name.sql file.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// migrationDir is the folder of the backend's migrations in migrationFS.
func (k backend) migrationDir() string {
	if k == postgresBackend {
		return "pgmigrations"
	}
	return "migrations"
}

// migrations returns the backend's embedded migrations in version order. Versions
// must run 1, 2, 3... without gaps or repeats.
func (k backend) migrations() ([]migration, error) {
	return loadMigrations(migrationFS, k.migrationDir())
}

// loadMigrations reads NNNN_name.sql files from dir of fsys (split out for tests).
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %s/%s: name must be NNNN_lowercase_name.sql", dir, e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		text, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("migration %s/%s: %w", dir, e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(text)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s/%s: version %d, want %d (versions run 1, 2, 3... without gaps)", dir, m.name, m.version, i+1)
		}
	}
	return ms, nil
}

// LatestSchemaVersion is the schema version this program's migrations produce for
// the store's backend (the number of its embedded migrations; 0 only if they were
// malformed, which TestOpenMigratesOnceAndReopens rules out).
func (db *DB) LatestSchemaVersion() int {
	ms, err := db.kind.migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// SchemaVersion returns the highest migration version applied to the database (0
// for one without a schema_version table).
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	v, err := db.schemaVersion(ctx, db.w)
	if err != nil {
		return 0, fmt.Errorf("storage: schema version of %s: %w", db.path, err)
	}
	return v, nil
}

// queryer is what *sql.DB and *sql.Tx share.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion reads the applied version through q (0 without a schema_version
// table: on PostgreSQL, none in the search path).
func (db *DB) schemaVersion(ctx context.Context, q queryer) (int, error) {
	exists := `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'`
	if db.kind == postgresBackend {
		exists = `SELECT count(*) FROM (SELECT to_regclass('schema_version') AS t) x WHERE t IS NOT NULL`
	}
	var n int
	if err := q.QueryRowContext(ctx, exists).Scan(&n); err != nil {
		return 0, db.classify(err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return 0, db.classify(err)
	}
	return v, nil
}

// migrateLock is the PostgreSQL advisory lock key every migration transaction takes
// first, so that replicas starting at once apply each migration exactly once (and
// never race on CREATE TABLE IF NOT EXISTS): the first 8 bytes of
// SHA-256("pruneadvisor migrations") (d4949aee887e5c4d) as a big-endian signed
// integer.
const migrateLock = int64(-3128705491832775603)

// migrate applies pending migrations on the writer, one transaction each. The
// version is re-read inside each transaction, which holds SQLite's write lock
// (IMMEDIATE) or PostgreSQL's migration lock, so two processes opening a fresh
// database at once apply every migration exactly once.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := db.kind.migrations()
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", db.path, err)
	}
	latest := len(ms)
	if db.readOnly {
		v, err := db.schemaVersion(ctx, db.w)
		if err != nil {
			return fmt.Errorf("storage: open %s: %w", db.path, err)
		}
		if v == 0 || v > latest {
			return fmt.Errorf("storage: open %s read-only: %w: database is at version %d, this program reads versions 1 to %d", db.path, ErrSchema, v, latest)
		}
		return nil
	}
	err = db.write(ctx, func(tx *sql.Tx) error {
		if err := db.lockMigrations(ctx, tx); err != nil {
			return err
		}
		ddl := `CREATE TABLE IF NOT EXISTS schema_version (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TEXT NOT NULL
		)`
		if db.kind == sqliteBackend {
			ddl += " STRICT"
		}
		_, err := tx.ExecContext(ctx, ddl)
		return err
	})
	if err != nil {
		return fmt.Errorf("storage: open %s: creating schema_version: %w", db.path, err)
	}
	for _, m := range ms {
		err := db.write(ctx, func(tx *sql.Tx) error {
			if err := db.lockMigrations(ctx, tx); err != nil {
				return err
			}
			v, err := db.schemaVersion(ctx, tx)
			if err != nil {
				return err
			}
			if v > latest {
				return fmt.Errorf("%w: database is at version %d, newer than this program's %d", ErrSchema, v, latest)
			}
			if v >= m.version {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO schema_version(version, name, applied_at) VALUES ($1, $2, $3)`,
				m.version, m.name, time.Now().UTC().Format(time.RFC3339Nano))
			return err
		})
		if err != nil {
			return fmt.Errorf("storage: open %s: migration %s: %w", db.path, m.name, err)
		}
	}
	return nil
}

// lockMigrations takes PostgreSQL's migration lock inside tx (released at its end);
// SQLite's IMMEDIATE transaction already holds the file's write lock.
func (db *DB) lockMigrations(ctx context.Context, tx *sql.Tx) error {
	if db.kind != postgresBackend {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock)
	return err
}

// writeAttempts is how many times write runs a PostgreSQL transaction the server
// aborted as a deadlock or a serialization failure (retryable).
const writeAttempts = 4

// write runs fn in one transaction and commits it; any error rolls it back. On
// SQLite it is an IMMEDIATE transaction on the writer connection, refused with
// ErrGone when the file went; on PostgreSQL, a READ COMMITTED transaction from the
// pool, run again when the server aborted it as retryable. Errors are classified
// (ErrReadOnly...) but not prefixed: callers add what they were doing.
func (db *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.writeAs(ctx, durable, fn)
}

// commitLevel is how durable a write's commit is.
type commitLevel int

const (
	// durable: the commit survives a power failure (SQLite synchronous=FULL, an
	// fsync of the WAL; PostgreSQL's default synchronous_commit).
	durable commitLevel = iota
	// crashSafe: the commit survives the process's death (kill -9) but a power
	// failure or an OS crash may lose the last ones: SQLite synchronous=NORMAL (the
	// WAL is written, not fsynced; the next durable commit or checkpoint syncs it,
	// https://sqlite.org/pragma.html#pragma_synchronous), PostgreSQL
	// synchronous_commit off for the transaction (a server crash may lose the last
	// few hundred milliseconds of such commits, never corrupt:
	// https://www.postgresql.org/docs/current/wal-async-commit.html). For records
	// nothing depends on for correctness (asks, decisions, step records).
	crashSafe
)

// writeAs is write at the given commit level.
func (db *DB) writeAs(ctx context.Context, level commitLevel, fn func(tx *sql.Tx) error) error {
	if db.kind == sqliteBackend {
		if err := db.checkFile(); err != nil {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		err := db.writeOnce(ctx, level, fn)
		if err == nil && db.ckpt != nil {
			db.ckpt.committed()
		}
		if err == nil || attempt == writeAttempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
	}
}

// writeOnce is one attempt of writeAs.
func (db *DB) writeOnce(ctx context.Context, level commitLevel, fn func(tx *sql.Tx) error) error {
	if level == crashSafe && db.kind == sqliteBackend {
		return db.writeOnceNormal(ctx, fn)
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return db.classify(err)
	}
	if level == crashSafe {
		if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit TO OFF`); err != nil {
			_ = tx.Rollback()
			return db.classify(err)
		}
	}
	return db.finish(tx, fn(tx))
}

// writeOnceNormal is one crashSafe attempt on SQLite: the writer connection (the
// only one) commits at synchronous=NORMAL and goes back to FULL; a connection that
// cannot go back is discarded (the pool opens a new one with the DSN's FULL), so no
// durable write ever commits at NORMAL.
func (db *DB) writeOnceNormal(ctx context.Context, fn func(tx *sql.Tx) error) error {
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return db.classify(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous=NORMAL`); err != nil {
		return db.classify(err)
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous=FULL`); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return db.classify(err)
	}
	return db.finish(tx, fn(tx))
}

// finish commits tx when err is nil and rolls it back otherwise.
func (db *DB) finish(tx *sql.Tx, err error) error {
	if err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			return errors.Join(db.classify(err), fmt.Errorf("rollback: %w", rerr))
		}
		return db.classify(err)
	}
	if err := tx.Commit(); err != nil {
		return db.classify(err)
	}
	return nil
}

// classify adds this package's sentinels to driver errors: a read-only database
// becomes ErrReadOnly and a foreign key violation ErrNoOriginal (the only foreign
// keys point at outputs and blobs). The driver error stays in the chain.
func (db *DB) classify(err error) error {
	if err == nil {
		return nil
	}
	var sentinel error
	if db.kind == postgresBackend {
		sentinel = classifyPostgres(err)
	} else {
		sentinel = classifySQLite(err)
	}
	if sentinel == nil || errors.Is(err, sentinel) {
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// conflict wraps a description of a conflict with ErrConflict and
// advisor.ErrConflict.
func conflict(format string, args ...any) error {
	return fmt.Errorf("%w (%w): %s", ErrConflict, advisor.ErrConflict, fmt.Sprintf(format, args...))
}

// timeText formats t for a TEXT column: RFC 3339 with nanoseconds in UTC, or NULL for
// the zero time.
func timeText(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// parseTime reads a timeText column back (zero time for NULL).
func parseTime(s sql.NullString) (time.Time, error) {
	if !s.Valid || s.String == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s.String)
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing stored time %q: %w", s.String, err)
	}
	return t, nil
}

// nullFloat stores NaN as NULL (SQLite has no NaN; PostgreSQL stores the same for
// parity); floatBack reads it back.
func nullFloat(f float64) any {
	if f != f {
		return nil
	}
	return f
}

// floatBack turns a nullFloat column back into a float64 (NaN for NULL).
func floatBack(n sql.NullFloat64) float64 {
	if !n.Valid {
		return math.NaN()
	}
	return n.Float64
}
