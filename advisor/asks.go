package advisor

import (
	"context"
	"sync"
	"time"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// DefaultAskTimeout bounds one background ask (AskRunner.Timeout) when the runner
// is given none: 60 s, the Ollama scorer's own default deadline
// (`--scorer-timeout`), so a scorer that never answers gives "no score" (kind
// "timeout") rather than holding its session's one ask slot for good.
const DefaultAskTimeout = 60 * time.Second

// AskRunner runs asks off the step's path (Advisor.Asks): each Advise that has
// due cards and no ask of its session in flight hands the batch to a goroutine
// and returns at once, and the answer is folded in at the first step of the
// session after it came (docs/ARCHITECTURE.md, "Asks off the request path"). One
// runner serves every Advisor of a process; Close stops its goroutines. Create it
// with NewAskRunner; it is safe for concurrent use.
type AskRunner struct {
	// Timeout bounds each ask (a context deadline on Scorer.Score); zero means
	// DefaultAskTimeout. Set it before the first ask.
	Timeout time.Duration
	// Clock measures each ask's latency (AskRecord.Latency). Default time.Now.
	Clock func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	n      int // goroutines running (Running)
}

// NewAskRunner returns a runner with no ask running.
func NewAskRunner() *AskRunner {
	ctx, cancel := context.WithCancel(context.Background())
	return &AskRunner{ctx: ctx, cancel: cancel, Clock: time.Now}
}

// Close cancels the asks in flight and waits until their goroutines have
// returned; their answers are dropped (nothing decided is lost: an answer only
// ever counts at a later step, and an unanswered ask is asked again after a
// restart). Asks started after Close are not run: their sessions get no score
// from them. Close may be called more than once.
func (r *AskRunner) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// Running returns the number of asks whose goroutine has not returned yet.
func (r *AskRunner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// start runs f's ask with sc in a goroutine; it reports false when the runner is
// closed (nothing runs).
func (r *AskRunner) start(sc Scorer, f *flight) bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.n++
	r.wg.Add(1)
	r.mu.Unlock()
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultAskTimeout
	}
	clock := r.Clock
	if clock == nil {
		clock = time.Now
	}
	go func() {
		defer func() {
			r.mu.Lock()
			r.n--
			r.mu.Unlock()
			r.wg.Done()
		}()
		ctx, cancel := context.WithTimeout(r.ctx, timeout)
		defer cancel()
		begun := clock()
		scores, err := sc.Score(ctx, f.batch)
		f.scores, f.err, f.latency = scores, err, clock().Sub(begun)
		f.dropped = r.ctx.Err() != nil // Close cut it short: no answer of the scorer's
		close(f.done)
	}()
	return true
}

// askState is a session's asks off the step's path: the one ask in flight and
// the outputs due meanwhile, waiting for the next. It is all the per-session
// state the background asks and the modelled lag add, kept in one place (state.asks).
type askState struct {
	flight  *flight     // the ask in flight, nil when none
	waiting []*outState // due while an ask was in flight (outState.inWait), asked next
	gen     uint32      // bumped by state.clear: a flight of an older generation is dropped
}

// flight is one ask off the step's path: what was asked at which step, and,
// once answered, the answer.
type flight struct {
	step  int       // the step it was asked at
	at    time.Time // the advisor's clock at that step (the modelled latency counts from it)
	gen   uint32    // askState.gen when asked
	keys  []string  // the outputs asked about, in the batch's order
	batch cards.Batch
	// done is closed by the goroutine once scores, err and latency are set (a
	// background ask); nil for a modelled lag, whose answer is set when asked.
	done    chan struct{}
	scores  []cards.Score
	err     error
	latency time.Duration
	dropped bool // the runner was closed while it ran: not folded in, not stored
}

// answered reports whether f's answer may be folded in at step T (clock now):
// a background ask once its goroutine has returned; a modelled one AskLag steps
// after it was asked (at least one), and once AskLatency has passed on the
// clock when both times are known.
func (a *Advisor) answered(f *flight, T int, now time.Time) bool {
	if f.done != nil {
		select {
		case <-f.done:
			return true
		default:
			return false
		}
	}
	if T-f.step < max(a.AskLag, 1) {
		return false
	}
	lat := a.AskLatency
	if a.AskMeasured {
		lat = f.latency
	}
	return lat <= 0 || now.IsZero() || f.at.IsZero() || !now.Before(f.at.Add(lat))
}

// offPath reports whether asks leave the step's path: run by an AskRunner, or
// answered after a modelled lag (AskLag, AskLatency).
func (a *Advisor) offPath() bool {
	return a.Asks != nil || a.AskLag > 0 || a.AskLatency > 0 || a.AskMeasured
}

// askOffPath is askDue off the step's path: it folds in the answer of the ask in
// flight when it has come, then asks about the due outputs, and those that waited,
// when no ask is in flight.
func (a *Advisor) askOffPath(ctx context.Context, st *state, sp *stepState, due []*outState) {
	a.collect(ctx, st, sp)
	for _, o := range due {
		if !o.inWait {
			o.inWait = true
			st.asks.waiting = append(st.asks.waiting, o)
		}
	}
	if st.asks.flight != nil {
		return
	}
	send := make([]*outState, 0, len(st.asks.waiting))
	for _, o := range st.asks.waiting {
		o.inWait = false
		if o.decision == DecisionKeep && o.card != nil {
			send = append(send, o)
		}
	}
	clear(st.asks.waiting)
	st.asks.waiting = st.asks.waiting[:0]
	send = a.ahead(st, sp, send)
	if len(send) > 0 {
		a.dispatch(ctx, st, sp, send)
	}
}

// ahead adds to send the outputs that become candidates at the next step (their
// recency protection ends at this one) and have never been asked about: their
// cards are known now, so an ask about them that takes no longer than a step
// gives their first score at the step they become candidates, as an ask on the
// step's path would. Only the outputs of step T-K are looked at (the last ones
// indexed), so it costs no pass over the session.
func (a *Advisor) ahead(st *state, sp *stepState, send []*outState) []*outState {
	at := sp.T - a.Config.ProtectedSteps // recent through T: a candidate at T+1
	for i := len(st.outs) - 1; i >= st.compactOuts && st.outs[i].step >= at; i-- {
		o := st.outs[i]
		if o.step != at || o.asks > 0 || o.card == nil || o.fixed != "" || o.dead || o.inWait ||
			o.retention == transcript.RetentionDisposable || o.protectTil > sp.T || o.decision != DecisionProtected {
			continue
		}
		send = append(send, o)
	}
	return send
}

// dispatch asks about send at this step: the batch is built now (the cards as
// they are at this step), each output counts the ask (the back-off runs from
// this step), and the answer comes later (answered).
func (a *Advisor) dispatch(ctx context.Context, st *state, sp *stepState, send []*outState) {
	b := a.batch(st, sp, send)
	f := &flight{step: sp.T, at: sp.now, gen: st.asks.gen, keys: make([]string, len(send)), batch: b}
	for i, o := range send {
		f.keys[i] = o.key
	}
	if a.Asks == nil {
		// A modelled lag (replay): the scorer answers now, the answer counts later.
		start := time.Now()
		f.scores, f.err = a.Scorer.Score(ctx, b)
		f.latency = time.Since(start)
	} else {
		// The session's corpus keeps changing while the ask runs: the batch goes
		// without it (the lexical scorer then counts document frequencies in the
		// batch's own cards; a card's Lexical signal was computed with it).
		f.batch.Corpus = nil
		f.done = make(chan struct{})
		if !a.Asks.start(a.Scorer, f) {
			return // the runner is closed (the process is stopping): nothing asked
		}
	}
	st.asks.flight = f
	for _, o := range send {
		o.asks++
		o.lastAsk = sp.T
	}
	sp.plan.Asked = len(send)
}

// collect folds in the answer of the session's ask in flight when it has come
// (answered): each output still indexed gets its score as of the step it was asked
// at (lateScore) and is settled at this step; the asks are recorded with that step.
func (a *Advisor) collect(ctx context.Context, st *state, sp *stepState) {
	f := st.asks.flight
	if f == nil || !a.answered(f, sp.T, sp.now) {
		return
	}
	st.asks.flight = nil
	if f.gen != st.asks.gen || f.dropped {
		// The session was reset since (its outputs are indexed anew, asked anew),
		// or the process is stopping: nothing of it counts.
		return
	}
	kind, scores := a.checkAnswer(st, f.scores, f.err, len(f.keys))
	asks := make([]AskRecord, 0, len(f.keys))
	for i, key := range f.keys {
		o := st.byKey[key]
		if o == nil {
			continue
		}
		rec := a.lateScore(st, sp, o, f.step, f.batch.Cards[i], scoreAt(scores, i), kind)
		rec.Latency = f.latency
		asks = append(asks, rec)
	}
	if err := a.Store.RecordAsks(ctx, asks); err != nil {
		a.warnOnce(st, "storage-asks", "storage: cannot record asks", err)
	}
}

// lateScore folds in one card's answer to the ask made at step asked, at a later
// step (the rule of docs/SCORERS.md, "Late answers"): the score is used as of
// asked, so a use of the output at or after that step outweighs it (scoredOut),
// and an output pruned, protected or scored afresh since is settled as it is.
func (a *Advisor) lateScore(st *state, sp *stepState, o *outState, asked int, c cards.Card, sc cards.Score, kind string) AskRecord {
	rec, ok := a.answer(st, sp, o, asked, c, sc, kind)
	if ok && o.decision != DecisionPruned && o.decision != DecisionRecalled && asked >= o.lastOKAsk {
		o.score, o.lastOKAsk = sc.Keep, asked
	}
	a.settle(st, sp, o)
	return rec
}
