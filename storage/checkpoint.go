package storage

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// checkpointDelay is how long after a commit the checkpointer copies the WAL into
// the database file: commits within it share one checkpoint.
const checkpointDelay = 500 * time.Millisecond

// checkpointer moves WAL checkpoints off the commits of a read-write SQLite DB.
// SQLite's automatic checkpoint runs inside the commit that takes the WAL past
// 1,000 pages (https://sqlite.org/wal.html#automatic_checkpoint): that commit then
// also copies those pages into the database file and fsyncs it, so one rewrite's
// SavePrunes, or the record round a response waits for, in every few took 10-15 ms
// more on this machine. The writer connection runs with wal_autocheckpoint(0), and
// after commits this goroutine runs passive checkpoints (catchUp) on a connection
// of its own, checkpointDelay after the first commit it has not checkpointed yet:
// they wait for no reader or writer, and what a reader holds back is copied on a
// later round, as with the automatic checkpoint; past a bound, one runs on the
// writer's connection so that the WAL restarts under a steady stream of commits. A failed checkpoint is tried again after the
// next commit. Close stops it; closing the last connection to the file
// checkpoints what is left (SQLite does it).
type checkpointer struct {
	h    *sql.DB       // one connection
	w    *sql.DB       // the writer pool, for catchUp's second round
	kick chan struct{} // a commit happened (capacity 1)
	stop chan struct{} // closed by close
	done sync.WaitGroup
}

// startCheckpointer opens the checkpointer's connection with dsn and starts it; w
// is the writer pool (catchUp).
func startCheckpointer(dsn string, w *sql.DB) (*checkpointer, error) {
	h, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	h.SetMaxOpenConns(1)
	h.SetMaxIdleConns(1)
	h.SetConnMaxIdleTime(0)
	c := &checkpointer{h: h, w: w, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	c.done.Add(1)
	go c.run()
	return c, nil
}

// committed tells the checkpointer a commit happened; it never waits.
func (c *checkpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run checkpoints checkpointDelay after each commit it is told of, until close.
func (c *checkpointer) run() {
	defer c.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.stop
		cancel()
	}()
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		t.Reset(checkpointDelay)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if err := c.catchUp(ctx); err != nil {
			c.committed() // try again after the delay
		}
	}
}

// walBoundFrames is the WAL's size, in frames (a page and a 24-byte header: about
// 64 MiB at 4 KiB pages), past which catchUp runs a second round on the writer's
// own connection. Tests lower it.
var walBoundFrames atomic.Int64

func init() { walBoundFrames.Store(16384) }

// catchUp runs a passive checkpoint, and when the WAL holds more than
// walBoundFrames, a second one on the writer's connection (w, nil for none), so
// that the WAL restarts from its beginning and stays bounded.
//
// A passive checkpoint copies the frames that were there when it began. Under a
// steady stream of commits more come meanwhile, the WAL is never all copied when
// the next writer begins, and SQLite never restarts it
// (https://sqlite.org/wal.html#avoiding_excessively_large_wal_files): the WAL grows
// without bound (403 MB after 1,000 ten-prune rewrites in BenchmarkSavePrunesSteady),
// and each commit's frames extend the file. No writer of this process can begin
// during the second round, so the next one restarts the WAL unless another process
// wrote meanwhile or a reader was still reading. That round makes this process's
// writers wait while it copies the commits made during the first; so it runs only
// past the bound, not at every checkpoint: at 4,096 frames, or with passive rounds
// repeated until one saw a restart, the commits' p99 went from 12 to 28-47 ms
// (docs/PERFORMANCE.md, "The prune commit (H25)").
func (c *checkpointer) catchUp(ctx context.Context) error {
	log, _, err := checkpoint(ctx, c.h)
	if err != nil || c.w == nil || int64(log) <= walBoundFrames.Load() {
		return err
	}
	conn, err := c.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, _, err = checkpoint(ctx, conn)
	return err
}

// checkpoint runs PRAGMA wal_checkpoint(PASSIVE) on q and returns the frames in the
// WAL when it began and how many of them are in the database file now.
func checkpoint(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (log, done int, err error) {
	var busy int
	err = q.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done)
	return log, done, err
}

// close stops the checkpointer and closes its connection.
func (c *checkpointer) close() error {
	close(c.stop)
	c.done.Wait()
	return c.h.Close()
}
