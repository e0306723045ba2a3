package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pruneadvisor/pruneadvisor/storage"
)

// benchStreamEvents is the number of text deltas of the benchmark's streamed
// answer: about 500 output tokens, one event each, as Anthropic streams them.
const benchStreamEvents = 500

// benchStream is an Anthropic Messages event stream of benchStreamEvents deltas,
// message_start and message_delta carrying usage: 64 KB.
func benchStream() [][]byte {
	ev := func(name, data string) []byte { return []byte("event: " + name + "\ndata: " + data + "\n\n") }
	out := [][]byte{ev("message_start", `{"type":"message_start","message":{"id":"msg_b","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"cache_creation_input_tokens":6210,"cache_read_input_tokens":14058,"cache_creation":{"ephemeral_5m_input_tokens":6210,"ephemeral_1h_input_tokens":0},"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)}
	for i := range benchStreamEvents {
		out = append(out, ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" word%03d"}}`, i)))
	}
	return append(out, ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":9,"cache_creation_input_tokens":6210,"cache_read_input_tokens":14058,"output_tokens":500}}`),
		ev("message_stop", `{"type":"message_stop"}`))
}

// BenchmarkStreamLedger measures one streamed Anthropic answer (benchStream: 505
// events, each written and flushed on its own by a real upstream on loopback TCP)
// through three front ends built in the same run:
//
//   - reverseproxy: a bare httputil.ReverseProxy (FlushInterval -1: a flush after
//     every write), the floor of any Go proxy; the request body is read first, as
//     the proxy reads it;
//   - no-ledger: the proxy with the ledger taken out (no usage read, no entry);
//   - ledger: the proxy as it ships: the stream read for its usage as it passes,
//     the entry priced, counted and committed to SQLite after the response.
//
// The request is a one-message Messages body, advised on every iteration (the
// same, cheap, in both proxy variants). Sub-benchmarks:
//
//   - reverseproxy, no-ledger, ledger: each front end alone, b.N requests one after
//     another. ns/op is one whole request, from sending to the stream's last byte
//     read by the client; first-event-us is the mean time to the first event;
//     cpu-us/op is the process's CPU time (user + system, getrusage) per request,
//     everything in the process counted (client, front end, upstream) and, for
//     ledger, the entries' SQLite commits (the run ends with Server.Flush).
//   - interleaved: each iteration sends one request through each front end in turn,
//     so that the machine's load falls on all three alike; the medians of each
//     front end's request time (rp-, noledger-, ledger-p50-us) and time to the
//     first event (...-first-p50-us).
func BenchmarkStreamLedger(b *testing.B) {
	events := benchStream()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			_, _ = w.Write(e)
			w.(http.Flusher).Flush()
		}
	}))
	defer upstream.Close()
	fronts := map[string]*benchFront{}
	for _, name := range []string{"reverseproxy", "no-ledger", "ledger"} {
		f := newBenchFront(b, name, upstream.URL)
		defer f.close()
		fronts[name] = f
	}
	for _, name := range []string{"reverseproxy", "no-ledger", "ledger"} {
		b.Run(name, func(b *testing.B) {
			f := fronts[name]
			var first time.Duration
			cpu0 := cpuTime()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				d, _ := f.stream(b)
				first += d
			}
			f.flush(b)
			b.StopTimer()
			b.ReportMetric(float64(first.Microseconds())/float64(b.N), "first-event-us")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		names := []string{"reverseproxy", "no-ledger", "ledger"}
		short := map[string]string{"reverseproxy": "rp", "no-ledger": "noledger", "ledger": "ledger"}
		whole, first := map[string][]time.Duration{}, map[string][]time.Duration{}
		for i := range b.N {
			for j := range names {
				name := names[(i+j)%len(names)] // rotate who goes first
				f, t := fronts[name].stream(b)
				first[name], whole[name] = append(first[name], f), append(whole[name], t)
			}
		}
		b.StopTimer()
		for _, name := range names {
			fronts[name].flush(b)
			b.ReportMetric(float64(percentile(whole[name], 0.5).Microseconds()), short[name]+"-p50-us")
			b.ReportMetric(float64(percentile(first[name], 0.5).Microseconds()), short[name]+"-first-p50-us")
		}
	})
	entries, err := fronts["ledger"].db.LedgerEntries(context.Background(), "")
	if err != nil || len(entries) == 0 || entries[0].Usage.Output != 500 || entries[len(entries)-1].Usage.CacheRead != 14058 {
		b.Fatalf("ledger after the run: %d entries, %v", len(entries), err)
	}
	if n, _ := fronts["no-ledger"].db.LedgerEntries(context.Background(), ""); len(n) != 0 {
		b.Fatalf("no-ledger wrote %d entries", len(n))
	}
}

// benchFront is one front end of BenchmarkStreamLedger on loopback, with its
// client.
type benchFront struct {
	http   *httptest.Server
	client *http.Client
	srv    *Server     // nil for the reverse proxy
	db     *storage.DB // nil for the reverse proxy
	buf    []byte
	body   []byte
}

func newBenchFront(b *testing.B, name, upstream string) *benchFront {
	f := &benchFront{
		client: &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}},
		buf:    make([]byte, 32<<10),
		body:   []byte(`{"model":"claude-test","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Fix the failing parser test."}]}`),
	}
	if name == "reverseproxy" {
		target, _ := url.Parse(upstream)
		rp := &httputil.ReverseProxy{
			Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
			FlushInterval: -1,
			Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}, // not DefaultTransport: httptest closes its connections
			ErrorLog:      log.New(os.Stderr, "reverseproxy: ", 0),
		}
		f.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(in))
			rp.ServeHTTP(w, r)
		}))
		return f
	}
	db, err := storage.Open(context.Background(), filepath.Join(b.TempDir(), name+".db"))
	if err != nil {
		b.Fatal(err)
	}
	f.db = db
	f.srv, err = New(Options{Store: db, Ledger: db, AnthropicUpstream: upstream,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if name == "no-ledger" {
		f.srv.ledger = nil // every ledger call is a no-op on nil
	}
	f.http = httptest.NewServer(f.srv.Handler())
	return f
}

// stream sends the request and reads the whole answer; it returns the time to the
// first bytes and to the last.
func (f *benchFront) stream(b *testing.B) (first, whole time.Duration) {
	req, _ := http.NewRequest(http.MethodPost, f.http.URL+"/v1/messages", bytes.NewReader(f.body))
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderSession, "bench-stream")
	start := time.Now()
	resp, err := f.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := resp.Body.Read(f.buf)
	first = time.Since(start)
	total := n
	for err == nil {
		n, err = resp.Body.Read(f.buf)
		total += n
	}
	resp.Body.Close()
	if err != io.EOF || resp.StatusCode != 200 || total < 60000 {
		b.Fatalf("status %d, %d bytes, %v", resp.StatusCode, total, err)
	}
	return first, time.Since(start)
}

// flush waits for the proxy's background writes (ledger entries, records).
func (f *benchFront) flush(b *testing.B) {
	if f.srv != nil {
		if err := f.srv.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func (f *benchFront) close() {
	f.http.Close()
	f.client.CloseIdleConnections()
	if f.srv != nil {
		_ = f.srv.Flush(context.Background())
		_ = f.db.Close()
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile returns the p-quantile of ds (nearest rank; ds is sorted in place).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(p*float64(len(ds))), len(ds)-1)]
}

// BenchmarkUsageTee is the ledger's own work on a stream, without any network: a
// 1 MB event stream fed to the tee in the proxy's 32 KB reads (b.SetBytes: MB/s of
// stream read): anthropic is benchStream's events repeated, chat Chat Completions
// chunks with include_usage (every chunk says "usage": null, the last one has it).
func BenchmarkUsageTee(b *testing.B) {
	var anth, chat []byte
	for _, e := range benchStream() {
		anth = append(anth, e...)
	}
	anth = bytes.Repeat(anth, (1<<20)/len(anth)+1)
	for i := 0; len(chat) < 1<<20; i++ {
		chat = fmt.Appendf(chat, "data: {\"id\":\"chatcmpl-B\",\"object\":\"chat.completion.chunk\",\"created\":1744113677,\"model\":\"gpt-4o\","+
			"\"choices\":[{\"index\":0,\"delta\":{\"content\":\" word%03d\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n", i%1000)
	}
	chat = append(chat, "data: {\"id\":\"chatcmpl-B\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":2006,\"completion_tokens\":500,\"prompt_tokens_details\":{\"cached_tokens\":1920}}}\n\ndata: [DONE]\n\n"...)
	l := newLedgerWriter(nil, nil, time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}}
	for _, tc := range []struct {
		name   string
		route  apiKind
		stream []byte
	}{{"anthropic", kindAnthropic, anth}, {"chat", kindOpenAI, chat}} {
		b.Run(tc.name, func(b *testing.B) {
			note := &ledgerNote{route: tc.route}
			b.SetBytes(int64(len(tc.stream)))
			b.ReportAllocs()
			for b.Loop() {
				t := l.tee(note, resp)
				for p := tc.stream; len(p) > 0; {
					n := min(32<<10, len(p))
					t.write(p[:n])
					p = p[n:]
				}
				t.end(io.EOF)
				t.sse.end()
				if !t.job.acc.found || t.job.acc.usage.Output != 500 {
					b.Fatalf("usage not read: %+v", t.job.acc)
				}
			}
		})
	}
}
