package storage

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tests of what only the SQLite backend has: WAL, file paths and permissions.

// TestWAL checks WAL took by three routes: the pragma on both pools, and the file
// header, whose bytes 18 and 19 (file format write/read version) are 2 in WAL mode
// (https://www.sqlite.org/fileformat.html#the_database_header).
func TestWAL(t *testing.T) {
	db, path := openTemp(t)
	for name, h := range map[string]*sql.DB{"writer": db.w, "reader": db.r} {
		var mode string
		if err := h.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" {
			t.Errorf("%s: journal_mode = %q, want wal", name, mode)
		}
	}
	for pragma, want := range map[string]int{"foreign_keys": 1, "busy_timeout": 5000, "synchronous": 2} {
		var got int
		if err := db.w.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("writer PRAGMA %s = %d, want %d", pragma, got, want)
		}
	}
	head := make([]byte, 20)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	if string(head[:16]) != "SQLite format 3\x00" || head[18] != 2 || head[19] != 2 {
		t.Errorf("file header %q, bytes 18,19 = %d,%d; want an SQLite file with 2,2 (WAL)", head[:16], head[18], head[19])
	}
}

// TestCheckWALRefusesOtherModes feeds checkWAL a handle whose journal mode cannot be
// WAL (an in-memory database reports "memory"), since Open itself refuses such paths.
func TestCheckWALRefusesOtherModes(t *testing.T) {
	h, err := sql.Open("sqlite", ":memory:?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	err = (&DB{path: "mem"}).checkWAL(t.Context(), h)
	want := `storage: open mem: journal mode is not WAL: PRAGMA journal_mode is "memory", want "wal"`
	if !errors.Is(err, ErrNotWAL) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("checkWAL(memory) = %v, want ErrNotWAL starting %q", err, want)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	tests := []struct {
		name, path string
		want       error  // sentinel, or nil to check only the text
		text       string // substring of the message
	}{
		{"empty path", "", ErrInvalid, "empty database path"},
		{"memory", ":memory:", ErrInvalid, "plain file path"},
		{"uri", "file:x.db", ErrInvalid, "plain file path"},
		{"missing directory", filepath.Join(dir, "no", "such", "x.db"), nil, filepath.Join(dir, "no", "such", "x.db")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(ctx, tt.path)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q) succeeded, want an error", tt.path)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Open(%q) = %v, want errors.Is %v", tt.path, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("Open(%q) = %q, want it to mention %q", tt.path, err, tt.text)
			}
		})
	}
}

// TestOpenAwkwardPath checks the file: URI escaping: the file lands at the exact path.
func TestOpenAwkwardPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%e&f")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x?.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	defer db.Close()
	if err := db.SaveOriginal(t.Context(), original("s", "k", "x")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"x?.db", "x?.db-shm", "x?.db-wal"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("files in %s (-want +got):\n%s", dir, diff)
	}
}

// TestReadOnlyFilePermissions opens a chmod 0444 file read-write (default Options):
// SQLite falls back to reading, and writes fail with ErrReadOnly. Root may write any
// file, so the test needs a non-root user (run the test binary as one, e.g. nobody).
func TestReadOnlyFilePermissions(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores file permissions; use Options.ReadOnly (TestReadOnly) or run as non-root")
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "perm.db")
	o := saveAndClose(t, path)
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of a 0444 file: %v", err)
	}
	defer db.Close()
	if got, err := db.Original(ctx, o.RecallID); err != nil || got.Text != "readable" {
		t.Errorf("Original = %q, %v; want the saved text", got.Text, err)
	}
	if err := db.SaveOriginal(ctx, original("s", "k2", "new")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("SaveOriginal on a 0444 file = %v, want ErrReadOnly", err)
	}
}
