package storage

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// A commit that takes the WAL past SQLite's automatic checkpoint (1,000 pages)
// leaves the pages in the WAL (the commit does not copy them into the database
// file), and the checkpointer copies them within a few checkpointDelays after it.
func TestCheckpointOffTheCommit(t *testing.T) {
	db, path := openTemp(t)
	ctx := t.Context()
	var auto int
	if err := db.w.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Errorf("writer wal_autocheckpoint = %d, want 0", auto)
	}
	size := func() int64 {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	before := size()
	text := strings.Repeat("checkpoint me, ", 6<<20/15) // 6 MiB: about 1,500 pages of 4 KiB
	if err := db.SavePrunes(ctx, []advisor.Prune{prune("s", "k", text, "[pruned]")}); err != nil {
		t.Fatal(err)
	}
	if got := size(); got > before+1<<20 {
		t.Errorf("database file grew from %d to %d bytes in the commit: the commit checkpointed", before, got)
	}
	deadline := time.Now().Add(10 * checkpointDelay)
	for size() < int64(len(text)) {
		if time.Now().After(deadline) {
			t.Fatalf("database file is %d bytes %v after the commit; want the %d-byte text checkpointed into it", size(), 10*checkpointDelay, len(text))
		}
		time.Sleep(checkpointDelay / 5)
	}
	o, err := db.Original(ctx, advisor.RecallID("s", "k"))
	if err != nil || o.Text != text {
		t.Errorf("Original after the checkpoint: %d bytes, %v", len(o.Text), err)
	}
}
