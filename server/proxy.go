package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
	"github.com/pruneadvisor/pruneadvisor/wire"
)

// apiKind is the wire API a proxied request speaks: its row of the one table of
// wire APIs (package wire), which gives its reader, provider, usage shape and
// credentials.
type apiKind = wire.API

const (
	kindOpenAI    = wire.Chat      // POST /v1/chat/completions
	kindAnthropic = wire.Messages  // POST /v1/messages
	kindResponses = wire.Responses // POST /v1/responses (OpenAI upstream)
	kindGemini    = wire.Gemini    // POST /v1beta/models/{model}:generateContent, :streamGenerateContent
)

// formatOf is the transcript format of k's request bodies.
func formatOf(k apiKind) transcript.Format { return wire.MustLookup(k).Format }

// providerOf is the provider k's requests go to and are priced under.
func providerOf(k apiKind) prices.Provider { return wire.MustLookup(k).Provider }

// defaultUpstream is the public API of provider p.
func defaultUpstream(p prices.Provider) string {
	switch p {
	case prices.Anthropic:
		return DefaultAnthropicUpstream
	case prices.Gemini:
		return DefaultGeminiUpstream
	}
	return DefaultOpenAIUpstream
}

// isProxyPath reports whether p is a path of the proxy (every /v1/ and /v1beta/
// path but the sidecar's own routes).
func isProxyPath(p string) bool {
	if p == "/v1/advise" || p == "/v1/recall" || strings.HasPrefix(p, "/v1/recall/") {
		return false
	}
	return strings.HasPrefix(p, "/v1/") || p == "/v1beta" || strings.HasPrefix(p, "/v1beta/")
}

// routeOf routes a request to a proxy path by wire.Route: its path, and the
// credentials (headers, the key= query parameter) and version header it carries: a
// header counts when any of its values is not empty (every value is forwarded).
// The error (wire.ErrTwoProviders, wire.ErrWrongRoute) names headers, never values.
func routeOf(r *http.Request) (wire.Routing, error) {
	return wire.Route(r.URL.Path, func(name string, isQuery bool) bool {
		if isQuery {
			return queryHas(r.URL.RawQuery, name)
		}
		for _, v := range r.Header.Values(name) {
			if v != "" {
				return true
			}
		}
		return false
	})
}

// queryHas reports whether the raw query holds a non-empty value for name, read as
// leniently as any upstream might: pairs split at '&' and ';', the name unescaped
// when it can be and compared without case. (url.ParseQuery drops a pair holding a
// ';' and a name with a bad escape; a key hidden there would still reach the
// upstream.)
func queryHas(raw, name string) bool {
	for raw != "" {
		var pair string
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			pair, raw = raw[:i], raw[i+1:]
		} else {
			pair, raw = raw, ""
		}
		k, v, _ := strings.Cut(pair, "=")
		if u, err := url.QueryUnescape(k); err == nil {
			k = u
		}
		if v != "" && strings.EqualFold(strings.TrimSpace(k), name) {
			return true
		}
	}
	return false
}

// proxyKind tells which API's error shape answers a request (its route's, see
// routeOf, also when the route refuses it); ok is false for the sidecar's own
// routes and paths outside /v1/ and /v1beta/.
func proxyKind(r *http.Request) (k apiKind, ok bool) {
	if !isProxyPath(r.URL.Path) {
		return "", false
	}
	rt, _ := routeOf(r)
	return rt.Spec.API, true
}

// dispatch serves every proxy path (isProxyPath) by its route (routeOf), so that
// the path the table routes is the path that is forwarded: a request the route's API
// advises (wire.Spec.Advised, on a path the API claims) goes to that API's proxy
// handler, every other, and one the route refuses, to the passthrough, which sends
// it to the provider the route names. Both check the token and then the
// credentials (checkCredentials) before anything else.
func (s *Server) dispatch() http.Handler {
	advised := map[apiKind]http.Handler{}
	for _, spec := range wire.Specs() {
		advised[spec.API] = s.instrument(string(spec.API), s.auth(true, s.checkCredentials(s.proxy(spec.API))))
	}
	pass := s.instrument("passthrough", s.auth(true, s.checkCredentials(http.HandlerFunc(s.passthrough))))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt, err := routeOf(r); err == nil && rt.Claimed && rt.Spec.Advised(r.Method, r.URL.Path) {
			advised[rt.Spec.API].ServeHTTP(w, r)
			return
		}
		pass.ServeHTTP(w, r)
	})
}

// checkCredentials refuses, before h sees it, a request whose credentials do not fit
// its route (routeOf): 400 in the route's error shape with a message that names the
// headers, logged once (the path without its query, the headers' names) and counted
// in requests_refused_total{route,reason}. No value of any header or of the query
// reaches the log, the message or the metrics.
func (s *Server) checkCredentials(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, err := routeOf(r)
		if err == nil {
			h.ServeHTTP(w, r)
			return
		}
		reason := "wrong_route"
		if errors.Is(err, wire.ErrTwoProviders) {
			reason = "two_providers"
		}
		s.metrics.refused.WithLabelValues(string(rt.Spec.API), reason).Inc()
		s.log.Warn("request refused: its credentials do not fit its route", "method", r.Method, "path", textcut.BytesDots(r.URL.Path, 200), "err", err)
		writeAPIError(w, rt.Spec.API, http.StatusBadRequest, "invalid_request_error", err.Error())
	})
}

// proxy advises one Chat Completions or Messages request and forwards it. A
// compressed body is advised decoded and forwarded as sent when nothing changes, or
// rewritten and encoded again the same way; a body in an encoding the server does
// not know is forwarded untouched (counted and logged).
func (s *Server) proxy(kind apiKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fail := func(code int, msg string) { writeAPIError(w, kind, code, errType(code), msg) }
		hints := requestHints(r)
		hints.prefix = s.prefixFeed(kind, r)
		body, buf, ok := s.readBody(w, r, fail, hints.prefix)
		if !ok {
			return
		}
		defer buf.release()
		start := time.Now()
		note := s.ledger.note(kind, r.Header.Get(HeaderSession))
		plain, enc, err := s.decodeRequest(string(kind), r, body)
		if errors.Is(err, errUnknownCoding) {
			s.log.Warn("request body in an unknown encoding; forwarded unchanged", "route", string(kind), "err", err)
			s.forward(w, r, kind, body, buf, note)
			return
		}
		if err != nil {
			fail(decodeStatus(err), err.Error())
			return
		}
		if kind == kindResponses && transcript.ResponsesContinuation(plain) {
			s.metrics.untouched.WithLabelValues(string(kind), "previous_response_id").Inc()
			s.forward(w, r, kind, body, buf, note)
			return
		}
		out, changed, err := s.adviseBody(r.Context(), kind, hints, plain, note)
		if changed && enc != nil {
			encoded, eerr := enc.encode(bytes.Join(out, nil))
			if eerr != nil {
				s.failOpen(string(kind), "encode", "", eerr)
				changed = false
			}
			out = [][]byte{encoded}
		}
		if !changed {
			out = [][]byte{body} // the client's own bytes, compressed or not
		}
		s.metrics.adviseSeconds.WithLabelValues(string(kind)).Observe(time.Since(start).Seconds())
		var bad *badRequest
		if errors.As(err, &bad) {
			msg := bad.msg
			if enc != nil && bad.json {
				msg += " (in the body decoded from " + enc.String() + ")"
			}
			writeAPIError(w, kind, http.StatusBadRequest, "invalid_request_error", msg)
			return
		}
		if r.Context().Err() != nil {
			return // the client is gone
		}
		s.send(w, r, &forwarding{kind: kind, body: out, buf: buf, note: note, records: s.records.mark()})
	}
}

// decodeRequest undoes the request's Content-Encoding on body, at most MaxBody bytes
// decoded, and counts the encoding. It returns body itself and a nil coding for a
// body sent plain. Errors: errUnknownCoding (body not decoded), errDecodedTooLarge,
// errCorruptBody (see decodeStatus).
func (s *Server) decodeRequest(route string, r *http.Request, body []byte) ([]byte, *bodyCoding, error) {
	enc, err := parseCoding(r.Header)
	if err != nil {
		s.metrics.requestEncodings.WithLabelValues(route, encodingUnknown).Inc()
		return nil, nil, err
	}
	s.metrics.requestEncodings.WithLabelValues(route, enc.label()).Inc()
	if enc == nil {
		return body, nil, nil
	}
	plain, err := enc.decode(body, s.maxBody)
	if err != nil {
		return nil, nil, fmt.Errorf("Content-Encoding %s: %w", enc, err)
	}
	return plain, enc, nil
}

// decodeStatus is the status a decoding error is answered with: 413 for a body over
// the decoded limit, 415 for an unknown encoding, 400 for corrupt data.
func decodeStatus(err error) int {
	switch {
	case errors.Is(err, errDecodedTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errUnknownCoding):
		return http.StatusUnsupportedMediaType
	}
	return http.StatusBadRequest
}

// errType is the API error type for a status the proxy itself answers with.
func errType(code int) string {
	switch code {
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusBadGateway:
		return "api_error"
	}
	return "invalid_request_error"
}

// badRequest is a client error the proxy answers itself instead of forwarding; json
// marks a body that is not JSON (msg names the position).
type badRequest struct {
	msg  string
	json bool
}

func (e *badRequest) Error() string { return e.msg }

// readBody reads the request body up to the limit; on failure it answers through
// fail (413 over the limit, 400 otherwise, 408 for a body not sent in time) and
// returns false. A body of known length is read into one buffer of exactly that
// length from the body pool (readSized; buf holds it: release it when the request is
// done, see bodypool.go), each read handed to feed (may be nil); a chunked one grows
// a buffer as it comes (buf nil).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, fail func(code int, msg string), feed *transcript.PrefixFeed) (body []byte, buf *bodyBuf, ok bool) {
	if r.ContentLength > s.maxBody {
		fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is over the limit of %d bytes (--max-body)", r.ContentLength, s.maxBody))
		return nil, nil, false
	}
	var err error
	if r.ContentLength > 0 {
		buf = s.bodies.get(r.ContentLength)
		body, err = readSized(http.MaxBytesReader(w, r.Body, s.maxBody), buf.b, feed)
		if err != nil {
			buf.release()
			buf = nil
		}
	} else {
		var buf bytes.Buffer
		_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.maxBody))
		body = buf.Bytes()
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over the limit of %d bytes (--max-body)", s.maxBody))
		return nil, nil, false
	case bodyTimedOut(r, err):
		fail(http.StatusRequestTimeout, s.bodyTimeoutMessage(int64(len(body))))
		return nil, nil, false
	case err != nil:
		fail(http.StatusBadRequest, "reading the request body: "+err.Error())
		return nil, nil, false
	}
	return body, buf, true
}

// readSized reads a body of len(body) bytes (its Content-Length, > 0) into body,
// then makes sure the body ends there. (bytes.Buffer.ReadFrom on a buffer grown to
// the length needs room for the read that sees the end, so it allocated and copied a
// second buffer of twice the size for every body: measured as 10% of a steady
// 844 KB request's CPU.) After each read feed (may be nil) compares what came with
// the conversation's previous body, while the next bytes are on their way. A body
// shorter than body fails with io.ErrUnexpectedEOF (io.EOF when it is empty), a
// longer one with errBodyLength; on an error the bytes read so far are returned with
// it.
func readSized(r io.Reader, body []byte, feed *transcript.PrefixFeed) ([]byte, error) {
	got := 0
	for got < len(body) {
		n, err := r.Read(body[got:])
		if got += n; n > 0 {
			feed.Add(body[:got])
		}
		switch {
		case err == io.EOF && got < len(body) && got > 0:
			return body[:got], io.ErrUnexpectedEOF
		case err != nil && (err != io.EOF || got < len(body)):
			return body[:got], err
		}
	}
	var one [1]byte
	switch extra, err := r.Read(one[:]); {
	case extra > 0:
		return body, errBodyLength
	case err != nil && err != io.EOF:
		return body, err
	}
	return body, nil
}

// errBodyLength means a request body went on past its Content-Length.
var errBodyLength = errors.New("request body is longer than its Content-Length")

// adviseBody advises a proxied request body and returns the body to forward with
// changed true when stubs went in: body with the content of each pruned tool result
// replaced by its stub, as the parts transcript.Session.RewriteParts gives (slices
// of body and of the message cache's patched messages, never to be modified).
// changed is false when nothing is pruned or advising failed (fail open: logged and
// counted); out is then nil and body goes as it came. A body that is not JSON gives a
// *badRequest naming the position. note (may be nil) gets the session and the plan
// for the ledger. The session read is recycled (transcript.Session.Recycle) once the
// parts are made: they are slices of the body and of the cache, not of the session.
func (s *Server) adviseBody(ctx context.Context, kind apiKind, hints hints, body []byte, note *ledgerNote) (out [][]byte, changed bool, err error) {
	route := string(kind)
	done, err := s.advisingSlot(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.failOpen(route, "queue", "", err)
		}
		return nil, false, nil
	}
	defer done()
	ctx = s.records.prefetchVersion(ctx, hints.session) // beside the read
	sess, err := transcript.Read("request body", body, transcript.Options{Format: formatOf(kind), Cache: s.msgCache, Prefix: hints.prefix})
	if err != nil {
		if at := jsonErrorAt(body); at != "" {
			return nil, false, &badRequest{msg: at, json: true}
		}
		s.failOpen(route, "read", "", err)
		return nil, false, nil
	}
	defer sess.Recycle() // done with once the parts are made: the next request takes its messages
	id, err := proxySessionID(kind, hints.session, sess)
	if err != nil {
		return nil, false, &badRequest{msg: err.Error()}
	}
	tool, agent, err := s.headersOf(hints)
	if err != nil {
		return nil, false, &badRequest{msg: err.Error()}
	}
	sess.ID = id
	sess.CompactTrigger = transcript.CompactTrigger(body) // the compaction point when set
	sess.ToolTokens = tokencount.Tools(body)              // counted by the agent's point, held by no message
	note.setSession(id)
	e, err := s.acquireSession(tool, providerOf(kind), agent, body, id)
	if err != nil {
		s.failOpen(route, "advise", id, err)
		return nil, false, nil
	}
	defer s.sessions.release(e)
	plan, err := s.runStep(ctx, e, sess)
	if err != nil {
		if ctx.Err() == nil {
			s.failOpen(route, "advise", id, err)
		}
		return nil, false, nil
	}
	s.logPlan(id, plan, s.metrics.observePlan(plan))
	note.setPlan(plan)
	out, changed = s.rewriteParts(route, id, sess, plan.Stubs)
	return out, changed, nil
}

// rewriteParts is the request body's parts with stubs in place (adviseBody's out);
// changed is false when there are no stubs or the rewrite failed (fail open:
// logged and counted).
func (s *Server) rewriteParts(route, id string, sess *transcript.Session, stubs map[string]string) (out [][]byte, changed bool) {
	if len(stubs) == 0 {
		return nil, false
	}
	out, err := sess.RewriteParts(stubs)
	if err != nil {
		s.failOpen(route, "rewrite", id, err)
		return nil, false
	}
	return out, true
}

// headersOf checks the recall tool (recallToolHeader) and the agent (agentOf) a
// request's headers give.
func (s *Server) headersOf(h hints) (tool, agent string, err error) {
	if tool, err = recallToolHeader(h.recallTool); err != nil {
		return "", "", err
	}
	if agent, err = s.agentOf(h.agent, h.userAgent); err != nil {
		return "", "", err
	}
	return tool, agent, nil
}

// errAdviseQueue means a request waited the whole advise timeout for an advising
// slot (Options.MaxAdvising); it is forwarded unchanged.
var errAdviseQueue = errors.New("no advising slot free within the advise timeout")

// advisingSlot takes one of the Options.MaxAdvising slots, waiting at most the
// advise timeout (then errAdviseQueue) or until ctx ends (its error); done gives
// the slot back.
func (s *Server) advisingSlot(ctx context.Context) (done func(), err error) {
	done = func() { <-s.advising }
	select {
	case s.advising <- struct{}{}:
		return done, nil
	default:
	}
	t := time.NewTimer(s.adviseTimeout)
	defer t.Stop()
	select {
	case s.advising <- struct{}{}:
		return done, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, errAdviseQueue
	}
}

// failOpen logs and counts an advising failure; the request goes on unchanged.
func (s *Server) failOpen(route, stage, session string, err error) {
	s.metrics.adviseFailures.WithLabelValues(route, stage).Inc()
	s.log.Warn("advising failed; forwarding the request unchanged", "route", route, "stage", stage, "session", session, "err", err)
}

// maxSessionHeader bounds the X-Pruneadvisor-Session value.
const maxSessionHeader = 200

// maxRecallToolHeader bounds the X-Pruneadvisor-Recall-Tool value (the advisor
// configuration's own bound on RecallTool).
const maxRecallToolHeader = 128

// hints are what a proxied request's own headers tell the server.
type hints struct {
	session    string // X-Pruneadvisor-Session
	recallTool string // X-Pruneadvisor-Recall-Tool
	agent      string // X-Pruneadvisor-Agent
	userAgent  string // User-Agent
	// prefix compared the body with the conversation's previous one as it was read
	// (prefixFeed); nil when it did not.
	prefix *transcript.PrefixFeed
}

// prefixFeed returns a feed of the message cache for r's body when the body memory
// can use it: an Anthropic Messages body sent plain (a compressed body's bytes are
// not the JSON the memory holds); nil otherwise.
func (s *Server) prefixFeed(kind apiKind, r *http.Request) *transcript.PrefixFeed {
	if kind != kindAnthropic || r.Header.Get("Content-Encoding") != "" {
		return nil
	}
	return s.msgCache.NewPrefixFeed()
}

func requestHints(r *http.Request) hints {
	return hints{session: r.Header.Get(HeaderSession), recallTool: r.Header.Get(HeaderRecallTool),
		agent: r.Header.Get(HeaderAgent), userAgent: r.Header.Get("User-Agent")}
}

// recallToolHeader checks an X-Pruneadvisor-Recall-Tool value: "" (the server's
// --recall-tool), or at most 128 bytes of letters, digits and "_-.:/" (the names
// agents give tools: mcp__pruneadvisor__recall, mcp_pruneadvisor_recall,
// pruneadvisor_recall, recall).
func recallToolHeader(v string) (string, error) {
	if len(v) > maxRecallToolHeader {
		return "", fmt.Errorf("%s header is %d bytes; at most %d", HeaderRecallTool, len(v), maxRecallToolHeader)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-.:/", c) >= 0) {
			return "", fmt.Errorf("%s header must hold a tool name (letters, digits, _-.:/)", HeaderRecallTool)
		}
	}
	return v, nil
}

// proxySessionID returns the session a proxied request belongs to: the
// X-Pruneadvisor-Session header when given (printable ASCII, at most 200 bytes),
// else "<kind>-" followed by 16 hex digits of SHA-256 over the kind, the system
// prompt and the first user message's text. Texts, not raw bytes, are hashed: clients
// move cache_control markers between requests.
func proxySessionID(kind apiKind, header string, s *transcript.Session) (string, error) {
	if header != "" {
		if len(header) > maxSessionHeader {
			return "", fmt.Errorf("%s header is %d bytes; at most %d", HeaderSession, len(header), maxSessionHeader)
		}
		for i := 0; i < len(header); i++ {
			if c := header[i]; c < 0x21 || c > 0x7e {
				return "", fmt.Errorf("%s header must be printable ASCII without spaces", HeaderSession)
			}
		}
		return header, nil
	}
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	// Codex and Gemini CLI open with injected context (the working directory, the
	// date) that is the same for every conversation in a folder: for them the first
	// prompt the user typed counts too.
	typed := kind == kindResponses || kind == kindGemini
	users := 0
	for _, m := range s.Messages {
		if m.Role == transcript.RoleSystem && users == 0 {
			h.Write([]byte(m.Text))
			h.Write([]byte{0})
			continue
		}
		if m.Role == transcript.RoleUser {
			h.Write([]byte{1})
			h.Write([]byte(m.Text))
			users++
			if !typed || !m.Meta {
				break
			}
		}
	}
	return string(kind) + "-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}
