package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/storage/pgtest"
)

// bigSession builds the Anthropic Messages request bodies of one long session, the
// way a coding agent sends them: a system prompt and tool definitions, then per turn
// an assistant message (text and a Read tool_use) and a user message holding its
// tool_result of about 2,700 o200k tokens (four pieces of sessionOutput, unique to
// the session). The first piece of every odd turn's result is NOISE, so the
// noise-test scorer sends half the results under the cutoff. As Claude Code does,
// the last message's last block carries a cache_control marker, which moves to the
// new last message on the next request (so the previous last message's bytes change
// between requests, as they do in real traffic).
type bigSession struct {
	s     int
	turns []string // turn k-1: `,{assistant},{"role":"user","content":[{tool_result…` without the closing of its content
	buf   []byte   // reuse's and fresh's buffer
	text  []byte   // fresh's scratch: a turn's result text
}

// bigHead is the part of every body before the messages' turns.
const bigHead = `{"model":"claude-test","max_tokens":8192,"stream":false,` +
	`"system":[{"type":"text","text":"You are a coding agent working in /src. Read before you edit.","cache_control":{"type":"ephemeral"}}],` +
	`"tools":[` +
	`{"name":"Read","description":"Reads a file from the local filesystem.","input_schema":{"type":"object","properties":{"file_path":{"type":"string","description":"The absolute path to the file to read"},"offset":{"type":"number"},"limit":{"type":"number"}},"required":["file_path"]}},` +
	`{"name":"Edit","description":"Performs exact string replacements in files.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"}},"required":["file_path","old_string","new_string"]}},` +
	`{"name":"Bash","description":"Executes a bash command.","input_schema":{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"}},"required":["command"]}}],` +
	`"messages":[{"role":"user","content":[{"type":"text","text":"Fix the parser: expressions with a trailing comma fail."}]}`

// turn returns turn k's two messages, the result block left open so a marker can
// be added.
func (b *bigSession) turn(k int) string { return b.reading(k, k) }

// reading returns turn k's two messages when it reads /src/fJ.go, the file turn j
// reads, and gets turn j's result (turn(k) is reading(k, k)).
func (b *bigSession) reading(k, j int) string {
	var out strings.Builder
	for i := range 4 {
		out.WriteString(sessionOutput(b.s, 4*j+i+j%2))
	}
	q, _ := json.Marshal(out.String())
	return fmt.Sprintf(`,{"role":"assistant","content":[{"type":"text","text":"Step %d: reading f%d.go."},{"type":"tool_use","id":"toolu_%d_%d","name":"Read","input":{"file_path":"/src/f%d.go"}}]}`+
		`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d_%d","content":%s`, k, j, b.s, k, j, b.s, k, q)
}

// body returns the request body after n turns, in a new slice of its exact size.
func (b *bigSession) body(n int) []byte { return b.appendBody(nil, n) }

// reuse returns the request body after n turns in the session's own buffer, which
// the next call of reuse overwrites: for a benchmark that is done with a body once
// its request returned, so that building 844 KB bodies does not itself give the
// collector work during the timed requests (building each body anew allocated more
// than the proxy did: 3 MB a request, with the buffer's growth).
func (b *bigSession) reuse(n int) []byte {
	b.buf = b.appendBody(b.buf[:0], n)
	return b.buf
}

// appendBody appends the request body after n turns to dst, growing it once.
func (b *bigSession) appendBody(dst []byte, n int) []byte {
	for len(b.turns) < n {
		b.turns = append(b.turns, b.turn(len(b.turns)+1))
	}
	const marker, closing = `,"cache_control":{"type":"ephemeral"}`, `}]}`
	size := len(bigHead) + len(marker) + n*len(closing) + len(`]}`)
	for _, t := range b.turns[:n] {
		size += len(t)
	}
	dst = slices.Grow(dst, size)
	dst = append(dst, bigHead...)
	for k := 1; k <= n; k++ {
		dst = append(dst, b.turns[k-1]...)
		if k == n {
			dst = append(dst, marker...)
		}
		dst = append(dst, closing...)
	}
	return append(dst, `]}`...)
}

// fresh returns the request body after n turns, as body(n) does, in the
// session's own buffer (as reuse), building each turn straight into it: for a
// session whose body is sent once (the cold benchmark), so that making its 844 KB
// of unique text is not, as turn's strings were (about 9 MB a body), most of the
// garbage the collector works through during the timed requests.
// TestFreshMatchesBody checks the bytes.
func (b *bigSession) fresh(n int) []byte {
	const marker, closing = `,"cache_control":{"type":"ephemeral"}`, `}]}`
	dst := append(b.buf[:0], bigHead...)
	for k := 1; k <= n; k++ {
		dst = b.appendTurn(dst, k)
		if k == n {
			dst = append(dst, marker...)
		}
		dst = append(dst, closing...)
	}
	b.buf = append(dst, `]}`...)
	return b.buf
}

// appendTurn appends turn(k) to dst, its result's text built in b.text.
func (b *bigSession) appendTurn(dst []byte, k int) []byte {
	t := b.text[:0]
	for i := range 4 {
		t = appendSessionOutput(t, b.s, 4*k+i+k%2)
	}
	b.text = t
	num := func(dst []byte, v int) []byte { return strconv.AppendInt(dst, int64(v), 10) }
	dst = num(append(dst, `,{"role":"assistant","content":[{"type":"text","text":"Step `...), k)
	dst = num(append(dst, `: reading f`...), k)
	dst = num(append(dst, `.go."},{"type":"tool_use","id":"toolu_`...), b.s)
	dst = num(append(dst, '_'), k)
	dst = num(append(dst, `","name":"Read","input":{"file_path":"/src/f`...), k)
	dst = num(append(dst, `.go"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_`...), b.s)
	dst = num(append(dst, '_'), k)
	dst = append(dst, `","content":`...)
	return appendJSONString(dst, t)
}

// appendSessionOutput appends sessionOutput(s, k) to dst.
func appendSessionOutput(dst []byte, s, k int) []byte {
	num := func(dst []byte, v int) []byte { return strconv.AppendInt(dst, int64(v), 10) }
	dst = num(append(dst, "session "...), s)
	dst = append(num(append(dst, " output "...), k), '\n')
	for i := 1; i <= 30; i++ {
		if k%2 == 1 {
			dst = num(append(dst, "NOISE build log "...), k)
			dst = num(append(dst, " line "...), i)
			dst = num(append(dst, ": compiling package internal/p"...), i)
			dst = append(dst, " <ok> & cached\n"...)
		} else {
			dst = num(append(dst, "parser.go:"...), 100+i)
			dst = num(append(dst, ": func parseExpr"...), i)
			dst = append(dst, "(tok Token) (*Node, error) { return nil, errEOF }\n"...)
		}
	}
	return dst
}

// appendJSONString appends text as json.Marshal encodes a string (HTML characters
// escaped), for ASCII text; other text goes through json.Marshal.
func appendJSONString(dst, text []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range text {
		switch {
		case c >= 0x80:
			q, _ := json.Marshal(string(text))
			return append(dst[:len(dst)-1], q...)
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// bigTurns is the number of turns of the 200k-token body: 80 turns make 844 KB and
// about 219,000 o200k tokens, as in TestLatency200kTokens.
const bigTurns = 80

// discardTransport is an upstream inside the process: it reads the forwarded body
// (as an upstream would; kept in last when keep is set) and answers a small JSON at
// once, so a request's time through the handler is the proxy's own work.
type discardTransport struct {
	keep bool
	last []byte
	// ttfb is how long the upstream works on a request, after reading its body and
	// before answering (its time to first byte); 0: it answers at once.
	ttfb time.Duration
}

func (d *discardTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		if d.keep {
			d.last, _ = io.ReadAll(r.Body)
		} else {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		r.Body.Close()
	}
	if d.ttfb > 0 {
		time.Sleep(d.ttfb)
	}
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(strings.NewReader(`{"ok":true}`)),
		Request: r,
	}, nil
}

// benchProxy is a server on a SQLite store (PostgreSQL with
// PRUNEADVISOR_BENCH_POSTGRES=1: a schema on the pgtest server) with the default
// advisor configuration (200,000-token window, budget 100,000, K = 3) and the
// noise-test scorer, forwarding into a discardTransport.
func benchProxy(b *testing.B) (*server.Server, *discardTransport) {
	return benchProxyWith(b, advisor.DefaultConfig())
}

// benchProxyWith is benchProxy with the advisor configuration cfg.
func benchProxyWith(b *testing.B, cfg advisor.Config) (*server.Server, *discardTransport) {
	up := &discardTransport{}
	opts := server.Options{Config: cfg, AnthropicUpstream: "http://upstream.invalid", Transport: up}
	if os.Getenv("PRUNEADVISOR_BENCH_POSTGRES") == "1" {
		dsn := pgtest.URL(b)
		db, err := storage.Open(context.Background(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = db.Close() })
		return newProxyOn(b, opts, db, dsn).srv, up
	}
	return newProxy(b, opts).srv, up
}

// rewrites returns how many requests applied pending prunes so far
// (pruneadvisor_rewrites_total).
func rewrites(b *testing.B, srv *server.Server) float64 {
	mfs, err := srv.Registry().Gather()
	if err != nil {
		b.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "pruneadvisor_rewrites_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// send passes one request through h and returns the time it took.
func send(b testing.TB, h http.Handler, session string, body []byte) time.Duration {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/messages", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set(server.HeaderSession, session)
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, req)
	d := time.Since(start)
	if rec.Code != 200 {
		b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	return d
}

// bareProxy is the baseline of the proxy benchmarks: a bare httputil.ReverseProxy
// forwarding to the same upstream transport, timed the same way (send).
func bareProxy(up http.RoundTripper) http.Handler {
	target, _ := url.Parse("http://upstream.invalid")
	return &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, Transport: up, FlushInterval: -1}
}

// reportAdded reports the bare proxy's median and 99th percentile (bare-p50-ms,
// bare-p99-ms) and what the proxy adds over them (added-p50-ms, added-p99-ms:
// the difference of the percentiles, measured in the same run).
func reportAdded(b *testing.B, lat, bare []time.Duration) {
	if len(bare) == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	reportLatency(b, "bare-", bare)
	b.ReportMetric(ms(percentile(lat, 0.5)-percentile(bare, 0.5)), "added-p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)-percentile(bare, 0.99)), "added-p99-ms")
}

// reportLatency reports the median and 99th percentile of lat in milliseconds, with
// the unit's names prefixed by prefix.
func reportLatency(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(lat, 0.5)), prefix+"p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), prefix+"p99-ms")
	if prefix == "" {
		b.ReportMetric(ms(slices.Max(lat)), "max-ms")
	}
}

// coldSessions numbers the cold benchmark's sessions, so that no run of it (-count)
// meets texts an earlier one left in the token-count cache.
var coldSessions atomic.Int64

func init() { coldSessions.Store(5000) }

// BenchmarkProxy200k measures the latency the proxy adds to an Anthropic Messages
// request of about 200,000 tokens (bigSession, 80 turns, 844 KB), timed inside the
// process from the handler's start to the end of the forwarded response: reading,
// advising, the SQLite calls, rewriting and forwarding, without any network.
//
//   - steady: the second and later requests of a session, each the previous history
//     plus one new turn (the cache_control marker moved to it), after pruning has
//     started (about 40 stubs in every forwarded body). A session runs 20 requests
//     (81 to 100 turns) and the next session starts from a first request, untimed.
//     Every other turn's result is a new candidate for pruning, so about one request
//     in four applies new prunes (a rewrite: each pruned original and its stub are
//     committed to SQLite before the request goes on); rw-p50-ms and rw-p99-ms are
//     over those requests, plain-p50-ms and plain-p99-ms over the others.
//   - steady-rewrites: steady with Config.PriceForced off, so that a rewrite forced by
//     the budget goes without waiting until it pays: with the default (on), these
//     20-request sessions apply no rewrite after their first request (rewrites/op 0),
//     and this is the run that measures requests applying one.
//   - steady-ttfb50ms: steady with an upstream that answers each request 50 ms
//     after reading its body (a real model's time to first byte on a 200,000-token
//     request is far longer), the bare proxy's requests too: the added latency of
//     a proxy whose work after forwarding (waiting for the step's records, below)
//     overlaps the upstream's, as it does in real use.
//   - cold: the first request of a session never seen before (every text unknown
//     to the token-count cache; the cache of o200k pieces keeps what earlier
//     requests left, as in a proxy that has been serving).
//
// ns/op is the mean; p50-ms, p99-ms and max-ms are over the timed requests. Each
// body also goes, untimed for ns/op, through a bare httputil.ReverseProxy into the
// same upstream transport (bareProxy): bare-p50-ms and bare-p99-ms are its
// percentiles, added-p50-ms and added-p99-ms the proxy's percentiles minus them.
func BenchmarkProxy200k(b *testing.B) {
	b.Run("steady", func(b *testing.B) { benchSteady(b, advisor.DefaultConfig()) })
	b.Run("steady-rewrites", func(b *testing.B) {
		cfg := advisor.DefaultConfig()
		cfg.PriceForced = false
		benchSteady(b, cfg)
	})
	b.Run("steady-ttfb50ms", func(b *testing.B) { benchSteadyTTFB(b, advisor.DefaultConfig(), 50*time.Millisecond) })
	b.Run("cold", func(b *testing.B) {
		srv, up := benchProxy(b)
		h := srv.Handler()
		bare := bareProxy(up)
		var lat, bareLat []time.Duration
		var cpu time.Duration
		sess := &bigSession{}
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			sess.s = int(coldSessions.Add(1))
			body := sess.fresh(bigTurns)
			bareLat = append(bareLat, send(b, bare, "bare", body))
			b.StartTimer()
			c0 := cpuTime()
			lat = append(lat, send(b, h, fmt.Sprintf("cold-%d", i), body))
			cpu += cpuTime() - c0
		}
		reportLatency(b, "", lat)
		reportAdded(b, lat, bareLat)
		reportCPU(b, cpu, len(lat))
	})
}

// benchSteady is BenchmarkProxy200k/steady on a proxy with the advisor
// configuration cfg.
func benchSteady(b *testing.B, cfg advisor.Config) { benchSteadyTTFB(b, cfg, 0) }

// benchSteadyTTFB is benchSteady with an upstream that takes ttfb to answer each
// request (the bare proxy's requests too).
func benchSteadyTTFB(b *testing.B, cfg advisor.Config, ttfb time.Duration) {
	srv, up := benchProxyWith(b, cfg)
	up.ttfb = ttfb
	h := srv.Handler()
	perSession := 20
	if v := os.Getenv("PA_PER_SESSION"); v != "" {
		fmt.Sscan(v, &perSession)
	}
	bare := bareProxy(up)
	var lat, plain, rw, bareLat []time.Duration
	var cpu time.Duration
	var sess *bigSession
	var id string
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if i%perSession == 0 {
			sess = &bigSession{s: 1000 + i/perSession}
			id = fmt.Sprintf("steady-%d", i/perSession)
			send(b, h, id, sess.reuse(bigTurns))
		}
		body := sess.reuse(bigTurns + 1 + i%perSession)
		up.keep = false
		bareLat = append(bareLat, send(b, bare, id, body))
		up.keep = i == 0
		before := rewrites(b, srv)
		b.StartTimer()
		c0 := cpuTime()
		var d time.Duration
		pprof.Do(context.Background(), timedLabel, func(context.Context) { d = send(b, h, id, body) })
		cpu += cpuTime() - c0
		lat = append(lat, d)
		b.StopTimer()
		if rewrites(b, srv) > before {
			rw = append(rw, d)
		} else {
			plain = append(plain, d)
		}
		b.StartTimer()
		if i == 0 {
			b.StopTimer()
			if n := bytes.Count(up.last, []byte("[pruned: Read /src/")); n < 30 {
				b.Fatalf("%d stubs in the forwarded body; want about 40", n)
			}
			b.StartTimer()
		}
	}
	reportLatency(b, "", lat)
	reportLatency(b, "plain-", plain)
	reportLatency(b, "rw-", rw)
	reportAdded(b, lat, bareLat)
	reportCPU(b, cpu, len(lat))
	b.ReportMetric(float64(len(rw))/float64(len(lat)), "rewrites/op")
}

// timedLabel marks the timed requests' samples in a CPU profile, apart from the
// setup's first requests: go tool pprof -tagfocus phase=timed.
var timedLabel = pprof.Labels("phase", "timed")

// reportCPU reports cpu-ms/op: the process's CPU time (cpuTime) while the n timed
// requests ran (cpu, summed around each), per request. Unlike the latencies it hardly moves
// with the machine's load (what other processes run does not count), though it
// takes in whatever the process's own background work (the collector, the record
// writer, the checkpointer) did meanwhile.
func reportCPU(b *testing.B, cpu time.Duration, n int) {
	if n > 0 {
		b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(n), "cpu-ms/op")
	}
}

// TestFreshMatchesBody checks that fresh builds the bytes body builds (the turns
// the other benchmarks and tests use), for sessions whose numbers have 1 to 5
// digits, at the cold benchmark's size and at a few turns.
func TestFreshMatchesBody(t *testing.T) {
	gen := &bigSession{}
	for _, s := range []int{0, 7, 5001, 12345} {
		for _, n := range []int{1, 2, bigTurns} {
			gen.s = s
			got, want := gen.fresh(n), (&bigSession{s: s}).body(n)
			if !bytes.Equal(got, want) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Fatalf("session %d, %d turns: fresh differs from body at byte %d: %.80q, want %.80q", s, n, i, got[i:], want[i:])
			}
		}
	}
}
