// Package storage is pruneadvisor's SQLite store (DESIGN.md "Storage"): originals of
// pruned outputs (each text stored once, by content hash), stubs, recalls, asks,
// decisions, sessions, later-use evidence and replay runs.
//
// It uses modernc.org/sqlite (pure Go, driver name "sqlite") in WAL mode with a busy
// timeout and foreign keys on. A DB holds two handles on the file: one writer
// connection (every write goes through it, in BEGIN IMMEDIATE transactions, so writes
// of one process never contend with each other) and a small pool of read-only
// connections. Several processes (proxy, MCP server, replay) may open the same file
// at once; their writers then take turns, each waiting up to the busy timeout.
//
// The schema is created by numbered migrations embedded from migrations/NNNN_*.sql,
// applied in order, each in its own transaction, and recorded in schema_version.
// storage imports advisor (the domain); advisor never imports storage.
package storage

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

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
	// with another text, or a session output under another recall id).
	ErrConflict = errors.New("already stored with different content")
	// ErrInvalid means a record is missing a required field or is malformed.
	ErrInvalid = errors.New("invalid record")
	// ErrReadOnly means a write was refused because the database is read-only
	// (Options.ReadOnly, or a file the process may not write).
	ErrReadOnly = errors.New("database is read-only")
	// ErrNotWritable means a read-write open failed because the database file or
	// its folder cannot be written (a read-only file system, an immutable file or
	// folder, permissions): open it with Options.ReadOnly to read it.
	ErrNotWritable = errors.New("database cannot be written")
	// ErrNotWAL means the database could not be put in WAL mode (e.g. an in-memory
	// database, or a file system without shared memory support).
	ErrNotWAL = errors.New("journal mode is not WAL")
	// ErrSchema means the file's schema version is not the one this program needs:
	// newer than its migrations, or older on a read-only open.
	ErrSchema = errors.New("unsupported schema version")
	// ErrCorrupt means a stored original no longer matches its SHA-256.
	ErrCorrupt = errors.New("stored text does not match its hash")
	// ErrGone means the database file was deleted, or replaced by another file, after
	// it was opened. Writes are refused: SQLite would go on writing to the deleted
	// file through its open handles, and whatever it wrote (the originals of new
	// stubs) would be lost when the process ends. Reads go on from the open handles.
	ErrGone = errors.New("database file was deleted or replaced while open")
)

// Defaults for Options.
const (
	// DefaultBusyTimeout is how long a connection waits for another writer's lock
	// before failing with SQLITE_BUSY.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultMaxReaders is the size of the read connection pool.
	DefaultMaxReaders = 4
)

// Options configure OpenWith. The zero value is the default read-write store.
type Options struct {
	// ReadOnly opens every connection with SQLite's mode=ro: migrations are not
	// applied (the file must have a pruneadvisor schema no newer than this
	// program's, else ErrSchema; an older one is read as it is, and a method needing
	// a newer table fails with the driver's error), a missing file is an error, and
	// every write method fails with ErrReadOnly. Use it for a database file the
	// process must not or cannot change: on a read-only file system, or in a folder
	// that cannot be written, where SQLite cannot make the -shm file WAL mode reads
	// through, the file is opened immutable (SQLite's immutable=1: no locks, no WAL),
	// which is right as long as no other process writes it, and refused (ErrReadOnly)
	// when a -wal file beside it still holds commits not yet in the database file.
	// Without ReadOnly, a chmod 0444 file opened by a non-root user also fails writes
	// with ErrReadOnly (SQLite falls back to reading), but root may write any file.
	ReadOnly bool
	// BusyTimeout is how long to wait for another process's write lock (SQLite's
	// busy_timeout, rounded down to milliseconds), and the time OpenWith keeps
	// retrying a busy open. Zero means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// MaxReaders bounds the read connection pool. Zero means DefaultMaxReaders.
	MaxReaders int
}

// DB is an open store. All methods are safe for concurrent use; ctx comes first on
// every method that does I/O.
type DB struct {
	path      string
	readOnly  bool
	immutable bool // read-only, opened with immutable=1 (ReadOnly on a folder that cannot be written)
	file     os.FileInfo // the file as opened, to notice it deleted or replaced (ErrGone)
	w        *sql.DB     // exactly one connection; all writes
	r        *sql.DB     // read pool, query_only
}

// Open opens (creating if needed) the database file at path with default Options and
// brings its schema up to date. See OpenWith.
func Open(ctx context.Context, path string) (*DB, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith opens the database file at path. Read-write, it creates a missing file,
// switches it to WAL and applies pending migrations. It returns ErrNotWAL when the
// file did not take WAL mode, ErrSchema when the file was written by a newer
// program (or, read-only, by an older one), and the driver's error (wrapped, with
// the path) when the file cannot be opened. Close the DB when done.
func OpenWith(ctx context.Context, path string, opts Options) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("storage: open: %w: empty database path", ErrInvalid)
	}
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("storage: open %q: %w: want a plain file path (two connection pools cannot share an in-memory database, and the DSN is built here)", path, ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("storage: open %q: %w", path, err)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	readers := opts.MaxReaders
	if readers <= 0 {
		readers = DefaultMaxReaders
	}
	db := &DB{path: abs, readOnly: opts.ReadOnly}

	deadline := time.Now().Add(busy)
	if err := db.openWriter(ctx, busy, deadline); err != nil {
		return nil, err
	}
	if db.file, err = os.Stat(abs); err != nil {
		db.w.Close()
		return nil, fmt.Errorf("storage: open %s: %w", abs, err)
	}
	if err := retryBusy(ctx, deadline, func() error { return db.migrate(ctx) }); err != nil {
		db.w.Close()
		return nil, err
	}

	db.r, err = sql.Open("sqlite", db.dsn(busy, false))
	if err != nil {
		db.w.Close()
		return nil, fmt.Errorf("storage: open %s: %w", abs, err)
	}
	db.r.SetMaxOpenConns(readers)
	db.r.SetMaxIdleConns(readers)
	if err := retryBusy(ctx, deadline, func() error { return db.checkWAL(ctx, db.r) }); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// openWriter opens the writer pool and checks WAL mode. A read-only open that
// cannot make the -shm file (SQLITE_CANTOPEN: a folder that cannot be written)
// falls back to immutable=1, unless a -wal file with commits is beside the database.
func (db *DB) openWriter(ctx context.Context, busy time.Duration, deadline time.Time) error {
	open := func() error {
		var err error
		if db.w, err = sql.Open("sqlite", db.dsn(busy, true)); err != nil {
			return fmt.Errorf("storage: open %s: %w", db.path, err)
		}
		db.w.SetMaxOpenConns(1)
		db.w.SetMaxIdleConns(1)
		db.w.SetConnMaxLifetime(0)
		db.w.SetConnMaxIdleTime(0)
		if err := retryBusy(ctx, deadline, func() error { return db.checkWAL(ctx, db.w) }); err != nil {
			db.w.Close()
			return err
		}
		return nil
	}
	err := open()
	switch {
	case err == nil:
		return nil
	case !db.readOnly:
		return whyNotWritable(db.path, err)
	case !isCantOpen(err):
		return err
	}
	if _, serr := os.Stat(db.path); serr != nil {
		return err // a missing file: nothing to read immutable
	}
	if st, serr := os.Stat(db.path + "-wal"); serr == nil && st.Size() > 0 {
		return fmt.Errorf("%w (%w: %s-wal holds %d bytes of commits not yet in the database file, and SQLite cannot read them without making %s-shm in a folder it cannot write: open the database once where it can be written, or copy it and its -wal to such a place)",
			err, ErrReadOnly, db.path, st.Size(), db.path)
	}
	db.immutable = true
	if ierr := open(); ierr != nil {
		return errors.Join(err, fmt.Errorf("opened immutable: %w", ierr))
	}
	return nil
}

// isCantOpen reports SQLite's SQLITE_CANTOPEN (any extended code).
func isCantOpen(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CANTOPEN
}

// notWritable is a failed read-write open with its cause found; it is ErrNotWritable.
type notWritable struct{ error }

func (notWritable) Is(target error) bool { return target == ErrNotWritable }
func (e notWritable) Unwrap() error     { return e.error }

// whyNotWritable adds the likely cause to a failed read-write open: SQLite says only
// "unable to open database file" when the folder (where the -wal and -shm files go)
// or the file itself cannot be written, as on a read-only file system.
func whyNotWritable(path string, err error) error {
	dir := filepath.Dir(path)
	probe, perr := os.CreateTemp(dir, ".pruneadvisor-probe-*")
	if perr != nil {
		return notWritable{fmt.Errorf("%w (the folder %s cannot be written: %v; SQLite keeps its -wal and -shm files beside the database)", err, dir, perr)}
	}
	probe.Close()
	os.Remove(probe.Name())
	f, ferr := os.OpenFile(path, os.O_WRONLY, 0)
	if ferr != nil {
		if errors.Is(ferr, fs.ErrNotExist) {
			return err
		}
		return notWritable{fmt.Errorf("%w (the file cannot be written: %v)", err, ferr)}
	}
	f.Close()
	return err
}

// retryBusy runs fn until it returns something other than an SQLITE_BUSY or
// SQLITE_LOCKED error, or until deadline or ctx ends (then the last error). Needed at
// open time only: SQLite answers a connection switching a fresh file to WAL while
// another process does the same with SQLITE_BUSY at once, without calling the busy
// handler.
func retryBusy(ctx context.Context, deadline time.Time, fn func() error) error {
	wait := 5 * time.Millisecond
	for {
		err := fn()
		if err == nil || !isBusy(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED (any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
}

// dsn builds the driver DSN for db's file: a file: URI (so SQLite honours mode=ro and
// immutable, and the path may hold any character) with the connection pragmas. synchronous(FULL) makes a
// committed transaction durable (an fsync of the WAL per commit), which SaveOriginal
// promises. The writer begins transactions IMMEDIATE so two processes' writers wait
// on the busy timeout instead of failing on a read-to-write lock upgrade; readers
// are query_only.
func (db *DB) dsn(busy time.Duration, writer bool) string {
	q := []string{
		"_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")",
		"_pragma=journal_mode(WAL)",
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(FULL)",
	}
	if writer {
		q = append(q, "_txlock=immediate")
	} else {
		q = append(q, "_pragma=query_only(1)")
	}
	if db.readOnly {
		q = append(q, "mode=ro")
	}
	if db.immutable {
		q = append(q, "immutable=1")
	}
	u := url.URL{Scheme: "file", Path: db.path, RawQuery: strings.Join(q, "&")}
	return u.String()
}

// checkWAL opens a connection of h and verifies PRAGMA journal_mode reports "wal"
// (an immutable open has no journal: SQLite reports "delete").
func (db *DB) checkWAL(ctx context.Context, h *sql.DB) error {
	var mode string
	if err := h.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("storage: open %s: %w", db.path, classify(err))
	}
	if db.immutable {
		return nil
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("storage: open %s: %w: PRAGMA journal_mode is %q, want \"wal\" (WAL needs a local file system with shared memory)", db.path, ErrNotWAL, mode)
	}
	return nil
}

// Close closes both connection pools. Pending reads and writes are not interrupted;
// call it after they return.
func (db *DB) Close() error {
	var errs []error
	if db.r != nil {
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

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// ReadOnly reports whether the DB was opened read-only (every write fails with
// ErrReadOnly).
func (db *DB) ReadOnly() bool { return db.readOnly }

// Immutable reports an open with immutable=1 (see ReadOnly).
func (db *DB) Immutable() bool { return db.immutable }

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded migrations/NNNN_name.sql file.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// migrations returns the embedded migrations in version order. Versions must run
// 1, 2, 3... without gaps or repeats.
func migrations() ([]migration, error) {
	return loadMigrations(migrationFS, "migrations")
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

// LatestSchemaVersion is the schema version this program's migrations produce (the
// number of embedded migrations; 0 only if they were malformed, which
// TestOpenMigratesOnceAndReopens rules out).
func LatestSchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// SchemaVersion returns the highest migration version applied to the file (0 for a
// database without a schema_version table).
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	v, err := schemaVersion(ctx, db.w)
	if err != nil {
		return 0, fmt.Errorf("storage: schema version of %s: %w", db.path, err)
	}
	return v, nil
}

// queryer is what *sql.DB and *sql.Tx share.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaVersion(ctx context.Context, q queryer) (int, error) {
	var exists int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'`).Scan(&exists); err != nil {
		return 0, classify(err)
	}
	if exists == 0 {
		return 0, nil
	}
	var v int
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return 0, classify(err)
	}
	return v, nil
}

// migrate applies pending migrations on the writer, one transaction each. The
// version is re-read inside each IMMEDIATE transaction, so two processes opening a
// fresh file at once apply every migration exactly once.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", db.path, err)
	}
	latest := len(ms)
	if db.readOnly {
		v, err := schemaVersion(ctx, db.w)
		if err != nil {
			return fmt.Errorf("storage: open %s: %w", db.path, err)
		}
		if v == 0 || v > latest {
			return fmt.Errorf("storage: open %s read-only: %w: file is at version %d, this program reads versions 1 to %d", db.path, ErrSchema, v, latest)
		}
		return nil
	}
	err = db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TEXT NOT NULL
		) STRICT`)
		return err
	})
	if err != nil {
		return fmt.Errorf("storage: open %s: creating schema_version: %w", db.path, err)
	}
	for _, m := range ms {
		err := db.write(ctx, func(tx *sql.Tx) error {
			v, err := schemaVersion(ctx, tx)
			if err != nil {
				return err
			}
			if v > latest {
				return fmt.Errorf("%w: file is at version %d, newer than this program's %d", ErrSchema, v, latest)
			}
			if v >= m.version {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UTC().Format(time.RFC3339Nano))
			return err
		})
		if err != nil {
			return fmt.Errorf("storage: open %s: migration %s: %w", db.path, m.name, err)
		}
	}
	return nil
}

// write runs fn in one IMMEDIATE transaction on the writer connection and commits
// it; any error rolls it back. Errors are classified (ErrReadOnly...) but not
// prefixed: callers add what they were doing.
func (db *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := db.checkFile(); err != nil {
		return err
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return classify(err)
	}
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			return errors.Join(classify(err), fmt.Errorf("rollback: %w", rerr))
		}
		return classify(err)
	}
	if err := tx.Commit(); err != nil {
		return classify(err)
	}
	return nil
}

// checkFile returns ErrGone when the path no longer names the file that was opened
// (one stat per write transaction).
func (db *DB) checkFile() error {
	st, err := os.Stat(db.path)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: %w", ErrGone, db.path, err)
	case !os.SameFile(st, db.file):
		return fmt.Errorf("%w: %s is another file now", ErrGone, db.path)
	}
	return nil
}

// classify adds this package's sentinels to driver errors: SQLITE_READONLY becomes
// ErrReadOnly and a foreign key violation ErrNoOriginal (the only foreign keys point
// at outputs and blobs). The driver error stays in the chain.
func classify(err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code()&0xff == sqlite3.SQLITE_READONLY:
		if errors.Is(err, ErrReadOnly) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	case se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		if errors.Is(err, ErrNoOriginal) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrNoOriginal, err)
	}
	return err
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

// nullFloat stores NaN as NULL (SQLite has no NaN); floatBack reads it back.
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
