package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// openSQLite opens the SQLite file at path (OpenWith).
func openSQLite(ctx context.Context, path string, opts Options) (*DB, error) {
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
	db := &DB{kind: sqliteBackend, path: abs, readOnly: opts.ReadOnly}

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
	if !db.readOnly {
		if db.ckpt, err = startCheckpointer(db.dsn(busy, false), db.w); err != nil {
			db.Close()
			return nil, fmt.Errorf("storage: open %s: %w", abs, err)
		}
	}
	return db, nil
}

// openWriter opens the writer pool and checks WAL mode. A read-only open that
// cannot make the -shm file (SQLITE_CANTOPEN on a read-only file system,
// SQLITE_READONLY_DIRECTORY in a folder the process may not write) falls back to
// immutable=1, unless a -wal file with commits is beside the database.
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
	case !isCantOpen(err) && !isReadOnlyCode(err):
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

// isReadOnlyCode reports SQLite's SQLITE_READONLY (any extended code): a read-only
// open of a WAL database whose -shm file is missing, in a folder the process may
// not write, fails with SQLITE_READONLY_DIRECTORY (1544) where an immutable file
// system gives SQLITE_CANTOPEN.
func isReadOnlyCode(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_READONLY
}

// isCantOpen reports SQLite's SQLITE_CANTOPEN (any extended code).
func isCantOpen(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CANTOPEN
}

// notWritable is a failed read-write open with its cause found; it is ErrNotWritable.
type notWritable struct{ error }

func (notWritable) Is(target error) bool { return target == ErrNotWritable }
func (e notWritable) Unwrap() error      { return e.error }

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
// immutable, and the path may hold any character) with the connection pragmas.
// synchronous(FULL) makes a committed transaction durable (an fsync of the WAL per
// commit), which SaveOriginal promises. The writer begins transactions IMMEDIATE so
// two processes' writers wait on the busy timeout instead of failing on a
// read-to-write lock upgrade, and a read-write writer does not checkpoint in its
// commits (wal_autocheckpoint(0): the checkpointer does, checkpoint.go); readers
// (and the checkpointer, whose PRAGMA wal_checkpoint query_only allows) are
// query_only.
func (db *DB) dsn(busy time.Duration, writer bool) string {
	q := []string{
		"_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")",
		"_pragma=journal_mode(WAL)",
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(FULL)",
	}
	if writer {
		q = append(q, "_txlock=immediate")
		if !db.readOnly {
			q = append(q, "_pragma=wal_autocheckpoint(0)") // the checkpointer's job (checkpoint.go)
		}
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
		return fmt.Errorf("storage: open %s: %w", db.path, db.classify(err))
	}
	if db.immutable {
		return nil
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("storage: open %s: %w: PRAGMA journal_mode is %q, want \"wal\" (WAL needs a local file system with shared memory)", db.path, ErrNotWAL, mode)
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

// classifySQLite returns the sentinel for an SQLite error: ErrReadOnly for
// SQLITE_READONLY, ErrNoOriginal for a foreign key violation; nil otherwise.
func classifySQLite(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return nil
	}
	switch {
	case se.Code()&0xff == sqlite3.SQLITE_READONLY:
		return ErrReadOnly
	case se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return ErrNoOriginal
	}
	return nil
}
