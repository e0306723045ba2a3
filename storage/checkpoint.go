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
// later round, as with the automatic checkpoint; they also let the WAL restart
// under a steady stream of commits. A failed checkpoint is tried again after the
// next commit. Close stops it; closing the last connection to the file
// checkpoints what is left (SQLite does it).
type checkpointer struct {
	h    *sql.DB       // one connection
	w    *sql.DB       // the writer pool, for catchUp's last round
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

// catchUpRounds bounds the passive checkpoints of one catchUp.
const catchUpRounds = 16

// catchUpPause is how long catchUp waits, the WAL all copied, for a writer to begin
// (and restart it) before it checks again.
const catchUpPause = 2 * time.Millisecond

// walBoundFrames is the WAL's size, in frames (a page and a 24-byte header: about
// 16 MiB at 4 KiB pages), past which catchUp, when its passive rounds saw no
// restart, runs one more on the writer's own connection. Tests lower it.
var walBoundFrames atomic.Int64

func init() { walBoundFrames.Store(4096) }

// catchUp copies the WAL into the database file so that the next writer can
// restart it from its beginning, overwriting the file instead of extending it.
//
// A passive checkpoint copies the frames that were there when it began. Under a
// steady stream of commits more come meanwhile, the WAL is never all copied when
// the next writer begins, and SQLite never restarts it
// (https://sqlite.org/wal.html#avoiding_excessively_large_wal_files): the WAL grows
// without bound, and each commit's frames extend the file, whose fsync then also
// commits the file's new size. On this VM's ext4, 72 frames and an fdatasync took
// 2.6 ms at p50 appended, 1.4 ms overwritten (docs/PERFORMANCE.md, "The prune
// commit (H25)").
//
// So catchUp runs passive rounds one after the other (a round finding nothing new
// waits catchUpPause), each copying only the commits made during the one before,
// until one sees the WAL restarted (fewer frames than the round before), a reader
// holds the rest back, or catchUpRounds have run. They make no writer or reader
// wait (a RESTART checkpoint would: the 62 ms stalls in docs/PERFORMANCE.md). A
// writer restarts the WAL only when it begins with every frame copied, and one that
// began before the last round appends; when no round saw a restart and the WAL holds
// more than walBoundFrames, a last round runs on the writer's connection (w, nil
// for none), which no writer of this process can begin during: the next one
// restarts the WAL unless another process wrote meanwhile or a reader was still
// reading. That round makes this process's writers wait while it copies the
// frames of the commits since the round before it, and the WAL stays bounded.
func (c *checkpointer) catchUp(ctx context.Context) error {
	prevLog, prevDone := -1, -1
	for range catchUpRounds {
		log, done, err := checkpoint(ctx, c.h)
		switch {
		case err != nil:
			return err
		case log < prevLog: // a writer restarted the WAL
			return nil
		case done < log && done == prevDone: // a reader holds the rest back
			return nil
		case log == prevLog: // all copied, no commit since the round before
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(catchUpPause):
			}
		}
		prevLog, prevDone = log, done
	}
	if c.w == nil || int64(prevLog) <= walBoundFrames.Load() {
		return nil
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
