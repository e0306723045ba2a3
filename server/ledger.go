package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/wire"
)

// The live ledger (docs/DESIGN.md "ledger"): every upstream response of a proxied model
// call is read, as it is forwarded, for its `usage`; once the response has ended,
// one goroutine prices it (ledger.KeepAll), counts it in /metrics and stores it
// (LedgerStore). Nothing of it runs between reading a chunk from the upstream and
// flushing it to the client: the copy is read after the flush, and everything else
// after the response's last byte.

// LedgerStore keeps the ledger's entries. storage.DB implements it.
type LedgerStore interface {
	// RecordLedger stores entries, in order, all or none.
	RecordLedger(ctx context.Context, entries []ledger.Entry) error
	// LedgerTail returns the session's latest entry (false when it has none): the
	// previous request's unpruned size after a restart.
	LedgerTail(ctx context.Context, sessionID string) (ledger.Entry, bool, error)
}

// ledgerRoute is how the ledger reads and prices one proxy route's responses.
type ledgerRoute struct {
	provider prices.Provider
	format   usageFormat
}

// ledgerRouteOf gives the provider and usage reader of route's responses from the
// table of wire APIs; false for a route that is not an advised wire API (the
// passthrough: count_tokens, model lists, files are not model calls and are not
// read).
func ledgerRouteOf(route apiKind) (ledgerRoute, bool) {
	spec, ok := wire.Lookup(route)
	if !ok {
		return ledgerRoute{}, false
	}
	return ledgerRoute{spec.Provider, usageFormat(spec.Usage)}, true
}

// Bounds of the ledger's memory.
const (
	// maxLedgerCapture bounds the bytes of one response kept for reading when it is
	// not read as it streams (a JSON body, or a compressed body of any kind); past
	// it the response is counted without usage. Model call responses are
	// kilobytes.
	maxLedgerCapture = 16 << 20
	// maxLedgerDecoded bounds a compressed response's decoded size.
	maxLedgerDecoded = 64 << 20
	// maxLedgerQueue bounds the responses waiting for the ledger's goroutine; past
	// it, the end of a response waits for it to catch up (as the record queue does).
	maxLedgerQueue = 4096
	// maxLedgerSessions bounds the sessions whose latest request size is held in
	// memory; past it the table is dropped (the next request of each session then
	// reads its previous size from the store).
	maxLedgerSessions = 8 * DefaultMaxSessions
)

// ledgerNote is what the proxy knows about a request when it forwards it.
type ledgerNote struct {
	l       *ledgerWriter
	route   apiKind
	at      time.Time
	session string
	advised bool
	step    int
	plan    ledger.Request
	planned float64 // the planner's price of the request's rewrite, dollars
}

// setPlan records the advisor's plan for the request, and the unpruned size of the
// session's previous advised request: the advisor's (Plan.PrevFullTokens, which
// another process sharing the store may have advised), else this process's own
// latest, taken in the order the requests were advised (their responses may end
// in another order).
func (n *ledgerNote) setPlan(p advisor.Plan) {
	if n == nil {
		return
	}
	n.advised, n.step = true, p.Step
	n.plan = ledger.Request{Advised: true, Context: p.ContextTokens, Full: p.ContextTokens + p.SavedTokens, Cold: p.Cold, Window: n.l.window}
	if p.Rewrite {
		n.plan.Rewrite, n.planned = p.RewriteReason, p.RewriteCostUSD
	}
	n.plan.PrevFull, n.plan.PrevKnown = n.l.swapFull(n.session, n.plan.Full)
	if p.PrevKnown {
		n.plan.PrevFull, n.plan.PrevKnown = p.PrevFullTokens, true
	}
}

// swapFull records full as the session's latest unpruned request size and returns
// the one before (false when this process has not seen the session since it
// started, or forgot it past maxLedgerSessions).
func (l *ledgerWriter) swapFull(session string, full int) (int, bool) {
	if session == "" {
		return 0, false
	}
	l.fullMu.Lock()
	defer l.fullMu.Unlock()
	prev, ok := l.lastFull[session]
	if !ok && len(l.lastFull) >= maxLedgerSessions {
		clear(l.lastFull)
	}
	l.lastFull[session] = full
	return prev, ok
}

// setSession records the request's session.
func (n *ledgerNote) setSession(id string) {
	if n != nil {
		n.session = id
	}
}

// ledgerJob is one ended response waiting to be priced and stored.
type ledgerJob struct {
	note   *ledgerNote
	status int
	stream bool
	acc    usageAcc
	body   []byte      // the captured body, when it was not read as it streamed
	coding *bodyCoding // the body's Content-Encoding; nil for identity
	cut    string      // why the response ended early; "" when it ended well
}

// ledgerWriter prices, counts and stores ended responses on one goroutine, which
// runs only while there is something to do (flush waits for it).
type ledgerWriter struct {
	store   LedgerStore // nil: /metrics only
	prices  func(prices.Provider) prices.Model
	clock   func() time.Time
	log     *slog.Logger
	metrics *ledgerMetrics

	queue *batchQueue[*ledgerJob] // ended responses, settled and stored by its writer

	mu      sync.Mutex
	open    int           // responses being forwarded (tee called, done not yet)
	drained chan struct{} // closed when open drops to 0; replaced when it leaves 0

	fullMu   sync.Mutex
	lastFull map[string]int // session -> its latest advised request's unpruned size

	window int // the config's context window, tokens: keep-all's cap (ledger.Request.Window)
}

func newLedgerWriter(store LedgerStore, price func(prices.Provider) prices.Model, clock func() time.Time,
	log *slog.Logger, reg prometheus.Registerer) *ledgerWriter {
	l := &ledgerWriter{store: store, prices: price, clock: clock, log: log, metrics: newLedgerMetrics(reg),
		drained: make(chan struct{}), lastFull: map[string]int{}}
	close(l.drained)
	l.queue = newBatchQueue(maxLedgerQueue, l.write)
	return l
}

// note starts the ledger's record of a request on route; nil when the route is not
// one the ledger reads (or the ledger is off), and every use of a nil note is a
// no-op. header is the X-Pruneadvisor-Session value, the session until advising
// names it.
func (l *ledgerWriter) note(route apiKind, header string) *ledgerNote {
	if l == nil {
		return nil
	}
	if _, ok := ledgerRouteOf(route); !ok {
		return nil
	}
	return &ledgerNote{l: l, route: route, at: l.clock(), session: header}
}

// clientGone is the note of a response whose client went away before its end.
const clientGone = "client gone before the response ended"

// usageTee reads one response's bytes as the proxy forwards them.
type usageTee struct {
	l      *ledgerWriter
	job    *ledgerJob
	sse    *sseScanner // a plain event stream is read as it goes
	over   bool        // the capture passed maxLedgerCapture
	ended  bool
	closed bool
}

// tee starts reading resp for note's request; nil (every method a no-op) without a
// note.
func (l *ledgerWriter) tee(note *ledgerNote, resp *http.Response) *usageTee {
	if l == nil || note == nil {
		return nil
	}
	l.mu.Lock()
	if l.open == 0 {
		l.drained = make(chan struct{})
	}
	l.open++
	l.mu.Unlock()
	route, _ := ledgerRouteOf(note.route)
	job := &ledgerJob{note: note, status: resp.StatusCode, acc: usageAcc{format: route.format}}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	job.stream = mt == "text/event-stream"
	t := &usageTee{l: l, job: job}
	coding, err := parseCoding(resp.Header)
	switch {
	case err != nil:
		job.acc.note = "response in an unknown Content-Encoding: " + textcut.BytesDots(resp.Header.Get("Content-Encoding"), 40)
		t.over = true // nothing to read
	case coding != nil:
		job.coding = coding
	case job.stream:
		t.sse = &sseScanner{acc: &job.acc}
	}
	return t
}

// write reads the next bytes forwarded (after they were flushed).
func (t *usageTee) write(p []byte) {
	switch {
	case t == nil || t.over:
	case t.sse != nil:
		t.sse.write(p)
	case len(t.job.body)+len(p) > maxLedgerCapture:
		t.over, t.job.body = true, nil
		t.job.acc.note = "response body over 16 MiB was not read"
	default:
		t.job.body = append(t.job.body, p...)
	}
}

// end notes that the upstream's body ended, with err (io.EOF when it ended well).
func (t *usageTee) end(err error) {
	if t == nil {
		return
	}
	t.ended = true
	switch {
	case err == nil || errors.Is(err, io.EOF):
	case errors.Is(err, context.Canceled):
		t.cutByClient() // the client's request context ended the upstream read
	default:
		t.job.cut = "upstream response cut short: " + textcut.BytesDots(err.Error(), 80)
	}
}

// cutByClient notes that the client went away before the upstream's body ended,
// unless the stream's last event had already gone by (an SDK stops reading at
// Chat Completions' [DONE], before the body's end): that client had it all.
func (t *usageTee) cutByClient() {
	if !t.job.acc.finished {
		t.job.cut = clientGone
	}
}

// done hands the response to the ledger's goroutine. Without end, the client went
// away before the response ended.
func (t *usageTee) done() {
	if t == nil || t.closed {
		return
	}
	t.closed = true
	if t.sse != nil {
		t.sse.end()
	}
	if !t.ended {
		t.cutByClient()
	}
	t.l.enqueue(t.job)
}

// enqueue queues job, waiting while the queue is full, and starts the writer.
// The job's response is no longer open.
func (l *ledgerWriter) enqueue(job *ledgerJob) {
	l.queue.add(func() {
		l.mu.Lock()
		if l.open--; l.open == 0 {
			close(l.drained)
		}
		l.mu.Unlock()
	}, job)
}

// write settles and stores one round of ended responses (the queue's writer).
func (l *ledgerWriter) write(jobs []*ledgerJob) {
	entries := make([]ledger.Entry, len(jobs))
	for i, j := range jobs {
		entries[i] = l.settle(j)
	}
	if l.store == nil {
		return
	}
	if err := l.store.RecordLedger(context.Background(), entries); err != nil {
		l.metrics.storeErrors.Add(float64(len(entries)))
		l.log.Warn("storage: cannot record ledger entries", "entries", len(entries), "err", err)
	}
}

// flush waits until every response being forwarded has ended (a client can have
// read a response whole before its handler saw the upstream's end) and every
// response ended is counted and stored, or ctx ends (its error).
func (l *ledgerWriter) flush(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	drained := l.drained
	l.mu.Unlock()
	select {
	case <-drained:
	case <-ctx.Done():
		return ctx.Err()
	}
	return l.queue.flush(ctx)
}

// settle reads what the response said (a captured body is decoded and parsed
// here), prices it and counts it.
func (l *ledgerWriter) settle(j *ledgerJob) ledger.Entry {
	j.read()
	n := j.note
	route, _ := ledgerRouteOf(n.route)
	e := ledger.Entry{
		SessionID: n.session, Step: n.step, At: n.at, Route: string(n.route), Provider: route.provider,
		Model: j.acc.model, Status: j.status, Stream: j.stream, Advised: n.advised,
		ContextTokens: n.plan.Context, FullTokens: n.plan.Full, Rewrite: n.plan.Rewrite, Cold: n.plan.Cold,
		PlannedRewriteUSD: n.planned,
	}
	e.Result, e.Note = j.acc.result(j.status)
	if j.cut != "" {
		e.Note = joinNotes(e.Note, j.cut)
	}
	if e.Result == ledger.ResultOK {
		m := l.prices(route.provider)
		p := n.plan
		if p.Advised && !p.PrevKnown {
			p.PrevFull, p.PrevKnown = l.storedFull(n.session)
		}
		est := ledger.KeepAll(j.acc.usage, m, p)
		e.Usage, e.PaidUSD = j.acc.usage, j.acc.usage.Cost(m)
		e.KeepAllUSD, e.RemovedTokens, e.RewriteTokens, e.RewriteUSD = est.KeepAllUSD, est.Removed, est.RewriteTokens, est.RewriteUSD
	}
	l.metrics.observe(e)
	return e
}

// storedFull is the unpruned size of the session's latest advised request in the
// store: the previous request of a session this process had not seen (after a
// restart).
func (l *ledgerWriter) storedFull(session string) (int, bool) {
	if l.store == nil || session == "" {
		return 0, false
	}
	e, ok, err := l.store.LedgerTail(context.Background(), session)
	if err != nil {
		l.log.Warn("storage: cannot read the session's last ledger entry; its rewrite is priced without it", "session", session, "err", err)
		return 0, false
	}
	return e.FullTokens, ok && e.Advised
}

// read parses what was captured of the body (decoded first when compressed).
func (j *ledgerJob) read() {
	body := j.body
	j.body = nil
	if j.coding != nil {
		if body == nil {
			return
		}
		plain, err := j.coding.decode(body, maxLedgerDecoded)
		if err != nil {
			j.acc.note = "response body: Content-Encoding " + j.coding.String() + ": " + textcut.BytesDots(err.Error(), 80)
			return
		}
		if j.stream {
			s := &sseScanner{acc: &j.acc}
			s.write(plain)
			s.end()
			return
		}
		body = plain
	}
	if body != nil {
		j.acc.document(body)
	}
}

func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// ledgerMetrics are the ledger's series on /metrics (docs/INTEGRATIONS.md).
type ledgerMetrics struct {
	responses   *prometheus.CounterVec // route, result
	tokens      *prometheus.CounterVec // route, kind
	paid        *prometheus.CounterVec // route
	keepAll     *prometheus.CounterVec // route
	rewrite     *prometheus.CounterVec // route
	storeErrors prometheus.Counter
}

func newLedgerMetrics(reg prometheus.Registerer) *ledgerMetrics {
	m := &ledgerMetrics{
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_ledger_responses_total",
			Help: "Upstream responses of proxied model calls, by route and what their usage was: ok (read), none (no usage in the response), malformed (a usage that could not be read), error (an HTTP error status without usage).",
		}, []string{"route", "result"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_ledger_tokens_total",
			Help: "Tokens the providers reported in the responses' usage, by route and kind (input: uncached, cache_read, cache_write_5m, cache_write_1h, output).",
		}, []string{"route", "kind"}),
		paid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_ledger_paid_dollars_total",
			Help: "Dollars the proxied calls cost under the price model, from their usage, by route.",
		}, []string{"route"}),
		keepAll: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_ledger_keep_all_dollars_total",
			Help: "Dollars the same calls would have cost with nothing pruned (keep-all, estimated as the ledger section of docs/COMMANDS.md says), by route.",
		}, []string{"route"}),
		rewrite: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pruneadvisor_ledger_rewrite_dollars_total",
			Help: "Dollars of cache writes attributed to rewrites beyond a cache read (the rewrites' price as paid), by route.",
		}, []string{"route"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pruneadvisor_ledger_store_errors_total",
			Help: "Ledger entries that could not be stored (counted in the other ledger series all the same).",
		}),
	}
	reg.MustRegister(m.responses, m.tokens, m.paid, m.keepAll, m.rewrite, m.storeErrors)
	for _, spec := range wire.Specs() {
		route := spec.API
		for _, r := range ledger.Results() {
			m.responses.WithLabelValues(string(route), string(r))
		}
		m.paid.WithLabelValues(string(route))
		m.keepAll.WithLabelValues(string(route))
		m.rewrite.WithLabelValues(string(route))
	}
	return m
}

// observe counts one entry.
func (m *ledgerMetrics) observe(e ledger.Entry) {
	m.responses.WithLabelValues(e.Route, string(e.Result)).Inc()
	if e.Result != ledger.ResultOK {
		return
	}
	u := e.Usage
	for _, k := range []struct {
		kind string
		n    int
	}{{"input", u.Input}, {"cache_read", u.CacheRead}, {"cache_write_5m", u.CacheWrite5m}, {"cache_write_1h", u.CacheWrite1h}, {"output", u.Output}} {
		m.tokens.WithLabelValues(e.Route, k.kind).Add(float64(k.n))
	}
	m.paid.WithLabelValues(e.Route).Add(e.PaidUSD)
	m.keepAll.WithLabelValues(e.Route).Add(e.KeepAllUSD)
	m.rewrite.WithLabelValues(e.Route).Add(e.RewriteUSD)
}
