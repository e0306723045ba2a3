package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// walHeader and walFrameHeader are the sizes of the WAL's header and of each frame's
// header in bytes (https://sqlite.org/fileformat2.html#walformat).
const walHeader, walFrameHeader = 32, 24

// A power failure may lose any part of what was written to the WAL since its last
// fsync: the tail of the rewrite's own commit, or frames of a crash-safe commit
// before it (the record queue's rounds, synchronous=NORMAL) that never reached the
// disk while later ones did. Whatever it loses, a stub never survives without its
// original: this test commits a record round crash-safe and then a rewrite
// (SavePrunes: originals and stubs in one durable transaction), and recovers copies
// of the database whose WAL lost its tail at every frame boundary, or had any one
// of the record round's frames (or all of them) never reach the disk. Every copy
// opens, each recovered stub's original reads back, and the rewrite's stubs survive
// only in the copy that keeps the whole WAL (recovery stops at the first frame whose
// cumulative checksum fails, https://sqlite.org/fileformat2.html#walformat).
func TestTornWALNeverStubWithoutOriginal(t *testing.T) {
	ctx := t.Context()
	db, path := openTemp(t)
	// No checkpoint may copy frames into the database file while the test reads
	// the WAL: stop the checkpointer (the writer runs with wal_autocheckpoint(0)).
	if err := db.ckpt.close(); err != nil {
		t.Fatal(err)
	}
	db.ckpt = nil
	earlier := prune("s0", "k0", "an earlier rewrite's output", "[pruned k0]")
	if err := db.SavePrunes(ctx, []advisor.Prune{earlier}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	var page int64
	if err := db.w.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&page); err != nil {
		t.Fatal(err)
	}
	frame := walFrameHeader + page
	var ps []advisor.Prune
	for k := range 4 {
		p := prune("s1", fmt.Sprintf("k%d", k), fmt.Sprintf("output %d %0*d", k, 9000, k), fmt.Sprintf("[pruned k%d]", k))
		ps = append(ps, p)
	}
	var asks []advisor.AskRecord
	for k := range 40 {
		asks = append(asks, advisor.AskRecord{SessionID: "s1", OutputKey: fmt.Sprintf("k%d", k), Step: 4, CardHash: fmt.Sprintf("%064d", k), Scorer: "fitted", Score: 0.1, OK: true})
	}
	if err := db.RecordBatch(ctx, asks, nil, nil); err != nil {
		t.Fatal(err)
	}
	roundEnd := walSize(t, path)
	if err := db.SavePrunes(ctx, ps); err != nil {
		t.Fatal(err)
	}
	wal, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	roundFrames, stubFrames := (roundEnd-walHeader)/frame, (int64(len(wal))-roundEnd)/frame
	if roundFrames < 1 || stubFrames < 4 || (int64(len(wal))-walHeader)%frame != 0 {
		t.Fatalf("WAL of %d bytes: %d frames for the records, %d for the rewrite; want whole frames, the records' first", len(wal), roundFrames, stubFrames)
	}
	t.Logf("%d frames for the record round, %d for the rewrite", roundFrames, stubFrames)
	dbFile, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type crash struct {
		name      string
		wal       []byte
		wantStubs bool
	}
	var crashes []crash
	for n := int64(0); walHeader+n*frame <= int64(len(wal)); n++ {
		end := walHeader + n*frame
		crashes = append(crashes, crash{fmt.Sprintf("cut after %d frames", n), wal[:end], end == int64(len(wal))})
	}
	lost := func(name string, from, to int64) crash {
		w := append([]byte(nil), wal...)
		clear(w[from:to]) // never written: the file's blocks read back as zeros
		return crash{name, w, false}
	}
	crashes = append(crashes, lost("every record frame lost", walHeader, roundEnd))
	for f := range roundFrames {
		from := walHeader + f*frame
		crashes = append(crashes, lost(fmt.Sprintf("record frame %d lost", f), from, from+frame))
	}
	for _, c := range crashes {
		t.Run(c.name, func(t *testing.T) {
			stubs, err := recoverCopy(t, dbFile, c.wal)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(stubs["s1"]); got != 0 != c.wantStubs || c.wantStubs && got != len(ps) {
				t.Errorf("%d stubs of s1 recovered, want %d", got, map[bool]int{true: len(ps)}[c.wantStubs])
			}
			if len(stubs["s0"]) != 1 {
				t.Errorf("the earlier durable stub is gone: %v", stubs["s0"])
			}
		})
	}
}

// walSize is the size of path's WAL file in bytes.
func walSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// recoverCopy writes dbFile and wal as a crash would leave them (no -shm) into a
// fresh directory, opens the copy (SQLite recovers the WAL), and returns the stubs
// of sessions s0 and s1. It fails the test when a stub's original does not read
// back as the text that hashes to its recorded SHA-256.
func recoverCopy(t *testing.T, dbFile, wal []byte) (map[string]map[string]advisor.StubRecord, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crashed.db")
	if err := os.WriteFile(path, dbFile, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path+"-wal", wal, 0o644); err != nil {
		return nil, err
	}
	db, err := Open(context.Background(), path)
	if err != nil {
		return nil, fmt.Errorf("open the recovered copy: %w", err)
	}
	defer db.Close()
	out := map[string]map[string]advisor.StubRecord{}
	for _, s := range []string{"s0", "s1"} {
		stubs, err := db.SessionStubs(t.Context(), s)
		if err != nil {
			return nil, err
		}
		out[s] = stubs
		for key, st := range stubs {
			o, err := db.Original(t.Context(), st.RecallID)
			if err != nil || o.OutputKey != key || o.SessionID != s {
				t.Errorf("stub %s of %s/%s recovered without its original: %+v, %v", st.RecallID, s, key, o, err)
			}
		}
	}
	return out, nil
}
