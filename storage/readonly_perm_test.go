package storage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// envPermChild names the database the re-executed test binary opens as another
// user (TestReadOnlyByPermissions).
const envPermChild = "PRUNEADVISOR_TEST_PERM_CHILD"

// A database another user owns, mode 0444, in a folder this user may not write
// (a teammate's store, the usual read-only case): the read-only open reads it.
// SQLite answers such an open with SQLITE_READONLY_DIRECTORY (1544), not the
// SQLITE_CANTOPEN of a read-only file system, since it may not make the -shm file;
// the open falls back to immutable=1 on both. The test re-executes its own binary
// as user nobody (setpriv), so it needs root and setpriv; it skips without them.
func TestReadOnlyByPermissions(t *testing.T) {
	if path := os.Getenv(envPermChild); path != "" {
		permChild(t, path)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the open as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv is not installed")
	}
	base, err := os.MkdirTemp("", "pa-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(base, "ro"), 0o755); _ = os.RemoveAll(base) })
	dir := filepath.Join(base, "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SaveOriginal(t.Context(), original("s", "k", "a teammate's original")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for p, mode := range map[string]os.FileMode{base: 0o755, dir: 0o555, path: 0o444} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path + "-shm"); err == nil {
		t.Fatalf("%s-shm is left after close; the test needs the database without it", path)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", exe,
		"-test.run=^TestReadOnlyByPermissions$", "-test.v")
	cmd.Env = append(os.Environ(), envPermChild+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "read as nobody: a teammate's original") {
		t.Fatalf("the open as nobody: %v\n%s", err, out)
	}
}

// permChild is TestReadOnlyByPermissions as the other user: the read-write open
// says the store cannot be written, the read-only one reads it.
func permChild(t *testing.T, path string) {
	ctx := t.Context()
	if db, err := Open(ctx, path); err == nil {
		db.Close()
		t.Fatal("read-write open of another user's 0444 file succeeded")
	}
	ro, err := OpenWith(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	defer ro.Close()
	o := original("s", "k", "")
	got, err := ro.Original(ctx, o.RecallID)
	if err != nil {
		t.Fatalf("Original: %v", err)
	}
	t.Logf("read as nobody: %s", got.Text)
}
