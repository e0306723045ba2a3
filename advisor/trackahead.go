package advisor

import (
	"runtime"

	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// trackAheadMessages is the number of new messages from which index feeds the use
// tracker on a goroutine of its own (trackAhead): the first request of a long
// session (BenchmarkProxy200k/cold: 80 outputs, about 10 ms of tracker time beside
// 12 ms for the rest of the index); below it, a step's few new messages cost less
// than the hand-over.
var trackAheadMessages = 32

// trackedMsg is the tracker's answer for one message, filled by trackAhead's
// goroutine; wait blocks until it is there.
type trackedMsg struct {
	done chan struct{}
	uses []evidence.Use
	err  error
}

func (t *trackedMsg) wait() ([]evidence.Use, error) {
	<-t.done
	return t.uses, t.err
}

// trackAhead starts feeding msgs, in order, to st.tracker on a goroutine and
// returns one answer per message, which index applies in order (noteUses) exactly
// where it would have called the tracker itself; nil (index calls the tracker
// itself) when there is no tracker, fewer than trackAheadMessages messages, one
// processor, or recalls still to apply: a recall adds to the tracker from inside
// index (Advisor.recall), which must stay in message order. The tracker depends
// only on the messages it is fed (it reads them; nothing in index writes them), so
// the uses, the order they are applied in and the tracker's state afterwards are
// those of the sequential path. After an error the goroutine stops: noteUses
// stops the tracker at that message and waits for no later answer.
func trackAhead(st *state, msgs []*transcript.Message) []trackedMsg {
	if st.tracker == nil || len(msgs) < trackAheadMessages || runtime.GOMAXPROCS(0) < 2 || len(st.recalled) > 0 {
		return nil
	}
	out := make([]trackedMsg, len(msgs))
	for i := range out {
		out[i].done = make(chan struct{})
	}
	tr := st.tracker
	go func() {
		for i, m := range msgs {
			out[i].uses, out[i].err = tr.Add(m)
			close(out[i].done)
			if out[i].err != nil {
				return
			}
		}
	}()
	return out
}

// corpusAhead starts adding the text of every output of msgs, in order, to
// st.corpus on a goroutine of its own, beside trackAhead's, and returns the wait
// for it; nil (indexOutput adds each text itself) under the same conditions as
// trackAhead's but the tracker's: fewer than trackAheadMessages messages or one
// processor. indexOutput adds every output of every message index walks, in that
// order, and nothing in index reads the corpus (the scorers read it after index),
// so the corpus after the wait is the sequential path's. The term corpus is about
// half of the rest of the index on a first request (BenchmarkProxy200k/cold: 6 of
// 12 ms), so the index's three parts (the corpus, the tracker, the rest) share two
// processors more evenly.
func corpusAhead(st *state, msgs []*transcript.Message) (wait func()) {
	if len(msgs) < trackAheadMessages || runtime.GOMAXPROCS(0) < 2 {
		return nil
	}
	c, done := st.corpus, make(chan struct{})
	go func() {
		defer close(done)
		for _, m := range msgs {
			for _, o := range m.Outputs {
				c.Add(o.Text)
			}
		}
	}()
	return func() { <-done }
}
