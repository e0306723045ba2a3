package server

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// bodyDialer is the default transport's dialer (Options.Transport nil). Its TCP
// connections (bodyConn) write an advised request's body, its parts in memory
// (heldBuffers), with one writev instead of the transport's copy through a 32 KB
// buffer, one write each: for an 844 KB body, 26 write calls and a copy of the
// whole body less. It applies to plain-HTTP upstreams (a local gateway, the
// benchmarks); over TLS the transport writes to a *tls.Conn, which encrypts what it
// is given in records of its own, and the body goes the transport's way.
type bodyDialer struct {
	net.Dialer
	// writev counts the bodies written in one writev (tests read it).
	writev atomic.Int64
}

// newBodyDialer returns a dialer with http.DefaultTransport's timeouts (30 s to
// connect, 30 s TCP keep-alive).
func newBodyDialer() *bodyDialer {
	return &bodyDialer{Dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
}

// DialContext dials as net.Dialer does; a TCP connection comes back as a *bodyConn.
func (d *bodyDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.Dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		return &bodyConn{TCPConn: tc, d: d}, nil
	}
	return c, nil
}

// bodyConn is an upstream TCP connection whose ReadFrom writes a heldBuffers body
// at once. net/http's transport writes a request body of known length by copying
// io.LimitReader(body, ContentLength) into its bufio.Writer, whose ReadFrom, once
// the headers are flushed, hands the reader to the connection's ReadFrom
// (net/http transfer.go writeBody, bufio.Writer.ReadFrom, persistConnWriter.ReadFrom
// in Go 1.26). Any other reader, or a transport that takes another way, gets
// net.TCPConn's own ReadFrom: the same bytes, written as before.
type bodyConn struct {
	*net.TCPConn
	d *bodyDialer
}

// ReadFrom writes r to the connection. For an *io.LimitedReader over a
// *heldBuffers whose parts fit its limit, the parts go in one writev
// (net.Buffers.WriteTo: the kernel may take them in several, the call returns when
// all are written or on the connection's error) and the limit is lowered by what was
// written.
func (c *bodyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if h, ok := lr.R.(*heldBuffers); ok && buffersLen(h.Buffers) <= lr.N {
			c.d.writev.Add(1)
			n, err := h.Buffers.WriteTo(c.TCPConn)
			lr.N -= n
			return n, err
		}
	}
	return c.TCPConn.ReadFrom(r)
}

// buffersLen is the length in bytes of v's buffers together.
func buffersLen(v net.Buffers) int64 {
	var n int64
	for _, b := range v {
		n += int64(len(b))
	}
	return n
}
