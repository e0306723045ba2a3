package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
)

// Forwarding: every proxied request (advised or passed through) goes upstream
// through one httputil.ReverseProxy per Server (newForwarder). Its hooks keep what
// the proxy promises:
//
//   - Rewrite: the upstream URL (upstreamURL) and the client's headers as they were
//     sent, less the hop-by-hop ones and the server's own (copyHeader, which also
//     puts back the Forwarded and X-Forwarded-* headers Rewrite mode strips: the
//     upstream sees what the client sent), the body the advisor gave (or the
//     client's, streamed), no request trailers.
//   - ModifyResponse: the step's records are durable before the client sees the
//     response (records.writtenUpTo the mark taken when it was advised), the server's own headers are dropped, and the
//     ledger reads the body as it is forwarded (teeBody).
//   - ErrorHandler: 502 in the API's error shape for an unreachable upstream, 408
//     for a request body the client did not send in time, nothing for a client
//     that is gone.
//   - FlushInterval -1: every chunk is flushed as it is read. A response the
//     upstream cuts short makes the ReverseProxy panic with http.ErrAbortHandler,
//     which closes the client's connection without the response's end.
//
// What one request carries through the hooks is a *forwarding in its context.

// forwarding is one request on its way through the forwarder's hooks.
type forwarding struct {
	in     *http.Request // the client's request
	kind   apiKind
	body   [][]byte // the body to send, its parts in order (none: no body); unused when stream is set
	buf    *bodyBuf // the request's body buffer, which body's parts may be slices of; nil when none
	stream bool     // send the client's own body as it arrives (passthrough)
	note   *ledgerNote
	// records is the record queue's mark when the request was advised: the
	// response waits for the records queued before it (this step's asks and step
	// record among them), not for those other requests queue meanwhile. 0 (a
	// passthrough, which advised nothing) waits for none.
	records  uint64
	sent     bool      // Rewrite ran: the request went to the transport
	answered bool      // a response came back (ModifyResponse ran)
	tee      *usageTee // the ledger's reader of the response; nil without a note
}

type forwardingKey struct{}

// forwardingOf returns the forwarding r (an inbound or outbound request of the
// forwarder) belongs to.
func forwardingOf(r *http.Request) *forwarding {
	return r.Context().Value(forwardingKey{}).(*forwarding)
}

// newForwarder builds the server's ReverseProxy (see the top of this file). Its own
// log lines (a body copy error, which teeBody logs too) go to the logger at debug
// level.
func (s *Server) newForwarder() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        s.rewriteOut,
		Transport:      requestTransport{s.transport},
		FlushInterval:  -1,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ErrorHandler:   s.forwardError,
		ModifyResponse: s.forwardResponse,
	}
}

// forward sends body upstream with the client's headers (hop-by-hop ones removed)
// and streams the response back as it arrives, flushing after every read. Upstream
// errors come back as they came; an unreachable upstream gives 502; a response the
// upstream cuts short is cut short for the client too (the connection is closed
// without the response's end: panic(http.ErrAbortHandler)). With a note, the
// ledger reads the response as it goes (ledger.go).
func (s *Server) forward(w http.ResponseWriter, r *http.Request, kind apiKind, body []byte, buf *bodyBuf, note *ledgerNote) {
	s.send(w, r, &forwarding{kind: kind, body: [][]byte{body}, buf: buf, note: note, records: s.records.mark()})
}

// passthrough forwards any other /v1/ or /v1beta/ request untouched, body
// streamed, to the upstream routeOf names (checkCredentials refused it before when
// its credentials do not fit).
func (s *Server) passthrough(w http.ResponseWriter, r *http.Request) {
	rt, err := routeOf(r)
	if err != nil { // not reached behind checkCredentials; never forward it
		writeAPIError(w, rt.Spec.API, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	s.send(w, r, &forwarding{kind: rt.Spec.API, stream: true})
}

// send runs f through the forwarder. A client gone while the response is copied
// ends the handler quietly, as a client gone before it does (the ReverseProxy
// panics with http.ErrAbortHandler on any copy error; only an upstream's cut
// aborts the connection and counts as "aborted").
func (s *Server) send(w http.ResponseWriter, r *http.Request, f *forwarding) {
	f.in = r
	defer func() {
		f.tee.done()
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler && r.Context().Err() != nil {
				return // the client is gone: there is no one to tell
			}
			panic(p)
		}
	}()
	s.forwarder.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardingKey{}, f)))
}

// rewriteOut is the forwarder's Rewrite: the outbound request goes to the kind's
// upstream with the client's headers less hop-by-hop ones and the server's own
// (copyHeader, not the ReverseProxy's own handling, which strips Forwarded and
// X-Forwarded-* and passes Te: trailers and upgrades on) and the body to send.
func (s *Server) rewriteOut(pr *httputil.ProxyRequest) {
	f := forwardingOf(pr.In)
	f.sent = true
	out := pr.Out
	out.URL = upstreamURL(s.upstream[providerOf(f.kind)], pr.In)
	out.Host = "" // the upstream's host, from the URL
	out.Header = make(http.Header, len(pr.In.Header))
	copyHeader(out.Header, pr.In.Header)
	out.Header.Del("Content-Length") // the transport sends out.ContentLength
	out.Trailer = nil
	if f.stream {
		return // the ReverseProxy's copy of the client's body and length
	}
	// The body is read already (and maybe rewritten): the client's "Expect:
	// 100-continue" was answered by this server, and the upstream's 100 would
	// only be relayed as an interim response to a client that sent its body.
	out.Header.Del("Expect")
	parts := f.body
	out.ContentLength = f.bodySize()
	if out.ContentLength == 0 {
		out.Body, out.GetBody = http.NoBody, nil
		return
	}
	// GetBody lets the transport send the request again on a connection the
	// upstream closed while idle. The parts are sent as they are, without joining
	// them into one copy (net.Buffers: the transport's io.Copy writes each in turn),
	// and each reader holds the body's buffer until the transport closes it
	// (bodypool.go).
	out.GetBody = func() (io.ReadCloser, error) { return newHeldBuffers(parts, f.buf), nil }
	out.Body, _ = out.GetBody()
}

// bodySize is the length in bytes of the body f sends (its parts together).
func (f *forwarding) bodySize() int64 { return buffersLen(f.body) }

// forwardResponse is the forwarder's ModifyResponse, run before the response's
// headers go to the client.
func (s *Server) forwardResponse(resp *http.Response) error {
	f := forwardingOf(resp.Request)
	f.answered = true
	// The asks and step records of this request's step, written in the background
	// while the upstream worked, are in the store before the client sees the
	// response, so a process killed after it still restores them for the session's
	// next step.
	if err := s.records.writtenUpTo(f.in.Context(), f.records); err != nil {
		return err // the client is gone (forwardError writes nothing)
	}
	for _, h := range ownHeaders {
		resp.Header.Del(h)
	}
	f.tee = s.ledger.tee(f.note, resp)
	resp.Body = &teeBody{ReadCloser: resp.Body, tee: f.tee, s: s, f: f}
	return nil
}

// forwardError is the forwarder's ErrorHandler. out is the outbound request (the
// inbound one when Rewrite did not run).
func (s *Server) forwardError(w http.ResponseWriter, out *http.Request, err error) {
	f := forwardingOf(out)
	if !f.sent { // the ReverseProxy refused the request (an Upgrade it cannot parse)
		writeAPIError(w, f.kind, http.StatusBadRequest, "invalid_request_error", "cannot forward the request: "+err.Error())
		return
	}
	// Before the context check: the failed body read cancelled the context.
	if !f.answered && f.hasBody() && bodyTimedOut(f.in, err) {
		writeAPIError(w, f.kind, http.StatusRequestTimeout, "invalid_request_error", s.bodyTimeoutMessage(-1))
		return
	}
	if f.in.Context().Err() != nil {
		return // the client is gone
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text holds the URL, and a Gemini ?key= with it
	}
	target := s.upstream[providerOf(f.kind)].Redacted()
	if f.answered {
		s.log.Warn("upstream response not forwarded", "api", string(f.kind), "upstream", target, "err", err)
		writeAPIError(w, f.kind, http.StatusBadGateway, "api_error", fmt.Sprintf("upstream %s: %v", target, err))
		return
	}
	s.log.Warn("upstream unreachable", "api", string(f.kind), "upstream", target, "err", err)
	writeAPIError(w, f.kind, http.StatusBadGateway, "api_error", fmt.Sprintf("upstream %s unreachable: %v", target, err))
}

// hasBody reports whether the request sends a body (of any length, or unknown).
func (f *forwarding) hasBody() bool {
	if f.stream {
		return f.in.ContentLength != 0
	}
	return f.bodySize() != 0
}

// teeBody is a response body that feeds the ledger's tee. The ReverseProxy writes
// and flushes each chunk before it reads the next, so a chunk is handed to the tee
// at the next Read: after its flush, as the ledger requires. A read that returns
// bytes and an error is split in two, so that the tee sees the bytes before the
// end.
type teeBody struct {
	io.ReadCloser
	tee     *usageTee
	s       *Server
	f       *forwarding
	pending []byte // the bytes of the last Read, not yet given to the tee
	err     error  // the upstream's read error, held back while pending is out
}

func (b *teeBody) Read(p []byte) (int, error) {
	if b.pending != nil {
		b.tee.write(b.pending) // written and flushed by now
		b.pending = nil
	}
	if b.err != nil {
		return 0, b.end(b.err)
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.pending, b.err = p[:n], err
		return n, nil
	}
	if err != nil {
		return 0, b.end(err)
	}
	return 0, nil
}

// end notes the end of the upstream's body and returns err.
func (b *teeBody) end(err error) error {
	b.tee.end(err)
	if err != io.EOF && b.f.in.Context().Err() == nil {
		b.s.log.Warn("upstream response cut short; closing the client's connection", "api", string(b.f.kind), "err", err)
	}
	return err
}

// requestTransport sets Response.Request where a RoundTripper (Options.Transport)
// leaves it nil: forwardResponse finds the request's forwarding through it.
type requestTransport struct{ http.RoundTripper }

func (t requestTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if resp != nil && resp.Request == nil {
		resp.Request = r
	}
	return resp, err
}

// ownHeaders are the server's own headers: never forwarded, either way.
var ownHeaders = []string{HeaderSession, HeaderToken, HeaderRecallTool, HeaderAgent}

// hopHeaders are the hop-by-hop headers (RFC 9110 section 7.6.1) a proxy must not
// forward, plus the server's own headers.
var hopHeaders = append([]string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}, ownHeaders...)

// hopSet is hopHeaders as a set, made once.
var hopSet = func() map[string]bool {
	m := make(map[string]bool, len(hopHeaders))
	for _, h := range hopHeaders {
		m[h] = true
	}
	return m
}()

// copyHeader copies src into dst without hop-by-hop headers (including those the
// Connection header names).
func copyHeader(dst, src http.Header) {
	var named []string // the headers Connection names, canonical
	for _, v := range src.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				named = append(named, textproto.CanonicalMIMEHeaderKey(f))
			}
		}
	}
	for k, vs := range src {
		if hopSet[k] || slices.Contains(named, k) {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

// upstreamURL joins the upstream base and the request's path (its escaped form
// kept) and query (as sent).
func upstreamURL(base *url.URL, r *http.Request) *url.URL {
	u := *base
	u.Path = strings.TrimSuffix(base.Path, "/") + r.URL.Path
	u.RawPath = ""
	if base.RawPath != "" || r.URL.RawPath != "" {
		u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + r.URL.EscapedPath()
	}
	u.RawQuery = r.URL.RawQuery
	return &u
}
