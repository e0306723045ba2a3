package server

import (
	"io"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
)

// A proxied request body of a 200,000-token conversation is about 850 KB, read
// whole into one buffer on every request. Allocated anew, those buffers were about
// three quarters of what a steady request allocated (1.35 MB of 1.8 MB a request in
// BenchmarkProxy200k/steady), and the collector's cycles that paid for them showed
// in the requests' tail. The body pool hands the buffer of a finished request to a
// later one.
//
// When a buffer is finished: the handler that read it is done with it when it
// returns, and the transport when it closes the outbound body (every reader
// GetBody makes holds the buffer until its Close; http.RoundTripper's contract
// says the transport closes the body, possibly after RoundTrip returned). Nothing
// else keeps its bytes: transcript.Read copies what the session and the message
// cache keep (transcript's TestReadKeepsNoBodyBytes), the ledger's note and the
// records hold strings, and the rewritten body's parts are slices of the buffer and
// of the cache's patched messages, sent by the transport before it closes. A
// buffer whose holders never all let go (a transport that never closes) is left to
// the collector, as before.

// Buffers come in powers of two, from 2^bodyPoolMinShift bytes (64 KiB; smaller
// bodies are allocated: a pool round trip is not worth it) to 2^bodyPoolMaxShift
// (32 MiB, DefaultMaxBody); a larger body is allocated and not kept.
const (
	bodyPoolMinShift = 16
	bodyPoolMaxShift = 25
)

// bodyPool recycles request body buffers (see above). The zero value is ready;
// sync.Pool lets the collector drop idle buffers, so the pool holds no memory a
// quiet server does not need. Safe for concurrent use.
type bodyPool struct {
	classes [bodyPoolMaxShift - bodyPoolMinShift + 1]sync.Pool
}

// bodyBuf is one request body's buffer and its holders.
type bodyBuf struct {
	b     []byte // len: the body's size; cap: its class's size
	refs  atomic.Int32
	class int // index in bodyPool.classes; -1 when not kept
	pool  *bodyPool
}

// get returns a buffer of n bytes (n > 0) held once, by the caller.
func (p *bodyPool) get(n int64) *bodyBuf {
	class := bodyClass(n)
	if class < 0 {
		buf := &bodyBuf{b: make([]byte, n), class: -1}
		buf.refs.Store(1)
		return buf
	}
	buf, _ := p.classes[class].Get().(*bodyBuf)
	if buf == nil {
		buf = &bodyBuf{b: make([]byte, 0, 1<<(class+bodyPoolMinShift)), class: class, pool: p}
	}
	buf.b = buf.b[:n]
	buf.refs.Store(1)
	return buf
}

// bodyClass is the class of a buffer for n bytes, -1 when none is kept for n.
func bodyClass(n int64) int {
	if n <= 1<<(bodyPoolMinShift-1) || n > 1<<bodyPoolMaxShift {
		return -1
	}
	shift := bits.Len64(uint64(n - 1)) // the smallest power of two >= n
	return max(shift, bodyPoolMinShift) - bodyPoolMinShift
}

// hold adds a holder. Call it only while another holder still holds b.
func (b *bodyBuf) hold() {
	if b != nil {
		b.refs.Add(1)
	}
}

// release lets go of one hold; the last one gives the buffer back to its pool.
// Nil does nothing.
func (b *bodyBuf) release() {
	if b == nil {
		return
	}
	if b.refs.Add(-1) == 0 && b.pool != nil {
		b.pool.classes[b.class].Put(b)
	}
}

// heldBuffers is an outbound request body over parts that holds buf until it is
// closed (once; the transport may close it more than once).
type heldBuffers struct {
	net.Buffers
	buf    *bodyBuf
	closed atomic.Bool
}

// newHeldBuffers returns a reader of parts (the list is copied: reading consumes
// it, not the bytes) holding buf, which may be nil.
func newHeldBuffers(parts [][]byte, buf *bodyBuf) io.ReadCloser {
	buf.hold()
	return &heldBuffers{Buffers: append(net.Buffers(nil), parts...), buf: buf}
}

// Close lets go of the buffer the first time it is called.
func (h *heldBuffers) Close() error {
	if h.closed.CompareAndSwap(false, true) {
		h.buf.release()
	}
	return nil
}
