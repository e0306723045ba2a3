package storage

import (
	"errors"
	"os"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// A database file deleted or replaced while open refuses writes with ErrGone (SQLite
// would write into the deleted file, lost at exit) and goes on reading from its open
// handles; cmd/pruneadvisor TestStorageFaults shows it under a running serve.
func TestWritesRefusedWhenFileGone(t *testing.T) {
	for _, tt := range []struct {
		name    string
		breakIt func(t *testing.T, path string)
	}{
		{"deleted", func(t *testing.T, path string) {
			for _, s := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(path + s); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
		}},
		{"replaced", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, path := openTemp(t)
			ctx := t.Context()
			before := original("s1", "k1", "the first original")
			if err := db.SaveOriginal(ctx, before); err != nil {
				t.Fatal(err)
			}
			tt.breakIt(t, path)
			err := db.SaveOriginal(ctx, original("s1", "k2", "the second original"))
			if !errors.Is(err, ErrGone) {
				t.Fatalf("SaveOriginal after the file went: %v; want ErrGone", err)
			}
			err = db.SaveStub(ctx, advisor.StubRecord{RecallID: before.RecallID, SessionID: "s1", OutputKey: "k1", Stub: "[pruned]", Step: 2})
			if !errors.Is(err, ErrGone) {
				t.Fatalf("SaveStub after the file went: %v; want ErrGone", err)
			}
			got, err := db.Original(ctx, before.RecallID)
			if err != nil || got.Text != before.Text {
				t.Fatalf("Original after the file went: %q, %v; want the first original", got.Text, err)
			}
		})
	}
}
