package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// immutableDir makes dir and the given files in it immutable (chattr +i: even root
// cannot write them or add files to dir, as on a read-only file system) until
// cleanup; it skips the test where chattr is missing or not supported.
func immutableDir(t *testing.T, dir string, files ...string) {
	t.Helper()
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr is not installed")
	}
	paths := append(append([]string(nil), files...), dir)
	if out, err := exec.Command("chattr", append([]string{"+i"}, paths...)...).CombinedOutput(); err != nil {
		t.Skipf("no immutable attribute here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("chattr", append([]string{"-i"}, paths...)...).CombinedOutput(); err != nil {
			t.Errorf("chattr -i: %v: %s", err, out)
		}
	})
}

// A database in a folder that cannot be written: the read-write open says so
// (ErrNotWritable); the read-only open reads it (immutable, since SQLite cannot make
// its -shm file there), and every write fails with ErrReadOnly.
func TestReadOnlyFolder(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	o := original("s", "k", "kept on read-only media")
	if err := db.SaveOriginal(ctx, o); err != nil {
		t.Fatal(err)
	}
	secret, err := db.RecallSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	immutableDir(t, dir, path)

	if db, err := Open(ctx, path); err == nil {
		db.Close()
		t.Fatal("read-write open of an immutable folder succeeded")
	} else if !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), "unable to open database file (14) (the folder "+dir+" cannot be written") {
		t.Errorf("read-write open = %v; want ErrNotWritable naming the folder", err)
	}
	ro, err := OpenWith(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	defer ro.Close()
	if !ro.ReadOnly() || !ro.Immutable() {
		t.Errorf("ReadOnly %v, Immutable %v; want both", ro.ReadOnly(), ro.Immutable())
	}
	got, err := ro.Original(ctx, o.RecallID)
	if err != nil || got.Text != o.Text {
		t.Errorf("Original = %q, %v; want the saved text", got.Text, err)
	}
	if s, err := ro.RecallSecret(ctx); err != nil || string(s) != string(secret) {
		t.Errorf("RecallSecret = %x, %v; want %x", s, err, secret)
	}
	if err := ro.SaveOriginal(ctx, original("s", "k2", "new")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("SaveOriginal = %v; want ErrReadOnly", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the folder holds %d files; the read-only open must add none", len(entries))
	}
}

// A -wal file holding commits that are not in the database file yet cannot be read
// without its -shm; the read-only open refuses instead of serving an old state.
func TestReadOnlyFolderWithUnreadWAL(t *testing.T) {
	ctx := t.Context()
	src := t.TempDir()
	path := filepath.Join(src, "s.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.SaveOriginal(ctx, original("s", "k", "only in the WAL")); err != nil {
		t.Fatal(err)
	}
	// A copy of the files as a crash would leave them: the database and its -wal
	// (the open DB has not checkpointed), no -shm.
	dir := filepath.Join(t.TempDir(), "crashed")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal"} {
		copyFile(t, path+suffix, filepath.Join(dir, "s.db"+suffix))
	}
	st, err := os.Stat(filepath.Join(dir, "s.db-wal"))
	if err != nil || st.Size() == 0 {
		t.Fatalf("the copy has no WAL to test with (%v)", err)
	}
	cp := filepath.Join(dir, "s.db")
	immutableDir(t, dir, cp, cp+"-wal")
	ro, err := OpenWith(ctx, cp, Options{ReadOnly: true})
	if err == nil {
		ro.Close()
		t.Fatal("read-only open ignored a WAL with commits")
	}
	t.Logf("read-only open: %v", err)
	want := fmt.Sprintf("%s-wal holds %d bytes of commits not yet in the database file", cp, st.Size())
	if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), want) {
		t.Errorf("read-only open = %v; want ErrReadOnly with %q", err, want)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
