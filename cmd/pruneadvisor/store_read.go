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
func requireStore(path, hint string) error {
	if storage.IsPostgres(path) {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w %s: %s", errNoStore, path, hint)
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
// stored and writes only by the way (recall and mcp record recall events; a ledger
// report would write nothing): read-write when the database can be written, so the
// recalls are recorded; when its file or folder cannot be written (a read-only file
// system, an immutable folder: storage.ErrNotWritable) read-only instead, with one
// note on stderr saying what is not recorded. Any other failure is returned as is.
func openStoreReading(ctx context.Context, stderr io.Writer, path string) (*storage.DB, func(), error) {
	db, closeDB, err := openStore(ctx, path)
	if err == nil || !errors.Is(err, storage.ErrNotWritable) {
		return db, closeDB, err
	}
	ro, rerr := storage.OpenWith(ctx, path, storage.Options{ReadOnly: true})
	if rerr != nil {
		return nil, nil, errors.Join(err, fmt.Errorf("read-only: %w", rerr))
	}
	fmt.Fprintf(stderr, "pruneadvisor: %s cannot be written; opened read-only: recalls are served but not recorded as evidence\n", safe(path))
	return ro, func() { _ = ro.Close() }, nil
}
