package storage

import (
	"encoding/binary"
	"fmt"
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

// Under commits back to back (no moment when the WAL is all copied before the next
// writer begins), the WAL still restarts from its beginning, at every checkpoint
// once it holds more than walBoundFrames: the checkpointer's second round runs on
// the writer's connection. With a passive checkpoint alone its checkpoint sequence
// stayed 0 and the file grew by every commit.
func TestWALRestartsUnderSteadyCommits(t *testing.T) {
	old := walBoundFrames.Load()
	walBoundFrames.Store(64)
	t.Cleanup(func() { walBoundFrames.Store(old) })
	db, path := openTemp(t)
	ctx := t.Context()
	text := strings.Repeat("0123456789abcdef", 11_000/16)
	deadline := time.Now().Add(20 * checkpointDelay)
	commits := 0
	for walSequence(t, path) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("WAL restarted %d times in %v of back-to-back commits (%d); want 2", walSequence(t, path), 20*checkpointDelay, commits)
		}
		key := fmt.Sprintf("k%d", commits)
		if err := db.SavePrunes(ctx, []advisor.Prune{prune("s", key, key+text, "[pruned]")}); err != nil {
			t.Fatal(err)
		}
		commits++
	}
	o, err := db.Original(ctx, advisor.RecallID("s", "k0"))
	if err != nil || o.Text != "k0"+text {
		t.Errorf("Original(k0) = %d bytes, %v", len(o.Text), err)
	}
}

// walSequence is the checkpoint sequence number in the header of path's WAL
// (https://sqlite.org/fileformat2.html#walformat, bytes 12-15, big-endian): how
// many times the WAL has been restarted.
func walSequence(t *testing.T, path string) uint32 {
	t.Helper()
	f, err := os.Open(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr [16]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(hdr[12:])
}
