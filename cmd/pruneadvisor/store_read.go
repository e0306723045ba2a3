package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/pruneadvisor/pruneadvisor/storage"
)

// errNoStore means --db names an SQLite file that does not exist, given to a
// command that only reads what another command stored.
var errNoStore = errors.New("no database at")

// requireStore returns errNoStore, naming path and followed by hint (what makes
// the database), when path is an SQLite file that does not exist. The commands that
// read what others stored (recall, ledger, calibrate, backoff, fit without PATHs)
// check it first, so that a mistyped --db is said as such instead of leaving an
// empty database behind and reporting nothing in it. A postgres:// URL is the
// server's to answer.
//
// A folder, or an empty file (SQLite would make a new database in it), is
// errNoStore too, saying which.
func requireStore(path, hint string) error {
	if storage.IsPostgres(path) {
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w %s: %s", errNoStore, path, hint)
	case err != nil:
		return nil // the open says what is wrong
	case st.IsDir():
		return fmt.Errorf("%w %s: it is a folder, and --db names the database file", errNoStore, path)
	case st.Size() == 0:
		return fmt.Errorf("%w %s: the file is empty, and not a database to open or make", errNoStore, path)
	}
	return nil
}

// hintMadeByAny is requireStore's hint for the stores recall and ledger read.
const hintMadeByAny = "advise, replay, serve and wrap create it; --db names it (default $PRUNEADVISOR_DB, else ~/.local/share/pruneadvisor/pruneadvisor.db)"

// hintReplayFirst is requireStore's hint for the replay stores calibrate, backoff
// and fit read.
func hintReplayFirst(path string) string {
	return fmt.Sprintf("run `pruneadvisor replay --db %s PATH...` first", path)
}

// openStoreReading opens the store at path for a command that reads what others
// stored and writes only by the way (recall and mcp record recall events;
// calibrate, backoff and report write nothing): read-write when the database can be
// written, so that recalls are recorded and an older schema is migrated; when its
// file or folder cannot be written (permissions, a read-only file system, an
// immutable folder: storage.ErrNotWritable, or a file the process may not open for
// writing) read-only instead, with note, when not "", on stderr after "<path>
// cannot be written; opened read-only: " (what is not recorded). Any other failure
// is returned as is.
func openStoreReading(ctx context.Context, stderr io.Writer, path, note string) (*storage.DB, func(), error) {
	var err error
	if !fileWritable(path) {
		err = storage.ErrNotWritable
	} else {
		var db *storage.DB
		var closeDB func()
		db, closeDB, err = openStore(ctx, path)
		if err == nil || !errors.Is(err, storage.ErrNotWritable) {
			return db, closeDB, err
		}
	}
	ro, rerr := storage.OpenWith(ctx, path, storage.Options{ReadOnly: true})
	if rerr != nil {
		if err == storage.ErrNotWritable {
			return nil, nil, rerr
		}
		return nil, nil, errors.Join(err, fmt.Errorf("read-only: %w", rerr))
	}
	if note != "" {
		fmt.Fprintf(stderr, "pruneadvisor: %s cannot be written; opened read-only: %s\n", safe(path), note)
	}
	return ro, func() { _ = ro.Close() }, nil
}

// noteRecallsNotRecorded is openStoreReading's note for recall and mcp.
const noteRecallsNotRecorded = "recalls are served but not recorded as evidence"

// fileWritable reports whether path can be opened for writing, or is not a plain
// file that exists (a postgres:// URL, a missing file: the open decides). Opening
// for writing without O_CREATE or O_TRUNC changes nothing.
func fileWritable(path string) bool {
	if storage.IsPostgres(path) {
		return true
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return !errors.Is(err, fs.ErrPermission)
	}
	f.Close()
	return true
}
