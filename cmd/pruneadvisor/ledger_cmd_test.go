package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// `ledger` reads a database whose file and folder cannot be written (the immutable
// attribute binds root too), and prints the same as on a writable one.
func TestLedgerImmutableFolder(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr is not installed")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "l.db")
	db, err := storage.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	err = db.RecordLedger(context.Background(), []ledger.Entry{{SessionID: "s1", Step: 1, At: time.Unix(1e9, 0), Route: "anthropic",
		Provider: "anthropic", Status: 200, Result: ledger.ResultOK, Usage: ledger.Usage{CacheRead: 1000, Output: 10},
		PaidUSD: 0.00045, KeepAllUSD: 0.00075, Advised: true, ContextTokens: 1000, FullTokens: 2000, RemovedTokens: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ledgerOut := func() (int, string, string) {
		var out, errOut bytes.Buffer
		code := run([]string{"ledger", "--db", path}, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, want, stderr := ledgerOut()
	if code != 0 || !strings.Contains(want, "       s1         1           1") || stderr != "" {
		t.Fatalf("writable: exit %d:\n%s%s", code, want, stderr)
	}
	t.Cleanup(func() { _ = chattr(t, "-i", path, dir) })
	if err := chattr(t, "+i", path, dir); err != nil {
		t.Skipf("no immutable attribute here: %v", err)
	}
	if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
		f.Close()
		t.Fatal("the folder is still writable")
	}
	if code, got, stderr := ledgerOut(); code != 0 || got != want || stderr != "" {
		t.Errorf("immutable: exit %d:\n%s%s\nwant exit 0 and\n%s", code, got, stderr, want)
	}
}
