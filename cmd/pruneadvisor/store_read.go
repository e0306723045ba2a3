package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pruneadvisor/pruneadvisor/storage"
)

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
