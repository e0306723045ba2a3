package storage

import (
	"context"
	"database/sql"
	"sync"
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
// after commits this goroutine runs PRAGMA wal_checkpoint(PASSIVE) on a connection
// of its own, checkpointDelay after the first commit it has not checkpointed yet:
// it waits for no reader or writer, and what a reader holds back is copied on a
// later round, as with the automatic checkpoint. A failed checkpoint is tried again
// after the next commit. Close stops it; closing the last connection to the file
// checkpoints what is left (SQLite does it).
type checkpointer struct {
	h    *sql.DB       // one connection
	kick chan struct{} // a commit happened (capacity 1)
	stop chan struct{} // closed by close
	done sync.WaitGroup
}

// startCheckpointer opens the checkpointer's connection with dsn and starts it.
func startCheckpointer(dsn string) (*checkpointer, error) {
	h, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	h.SetMaxOpenConns(1)
	h.SetMaxIdleConns(1)
	h.SetConnMaxIdleTime(0)
	c := &checkpointer{h: h, kick: make(chan struct{}, 1), stop: make(chan struct{})}
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
		if _, err := c.h.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
			c.committed() // try again after the delay
		}
	}
}

// close stops the checkpointer and closes its connection.
func (c *checkpointer) close() error {
	close(c.stop)
	c.done.Wait()
	return c.h.Close()
}
