package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// fullLoad runs the load test at the size docs/PERFORMANCE.md reports (200 sessions x
// 50 requests, and 200k-token requests); the default run is a bounded slice of it.
var fullLoad = os.Getenv("PRUNEADVISOR_LOAD") == "1"

// sessionOutput is tool output k of session s: unique per session, about 630
// tokens, NOISE on odd k.
func sessionOutput(s, k int) string {
	return fmt.Sprintf("session %d output %d\n", s, k) + toolOutput(k)
}

// chatBody is the Chat Completions request of session s at request r (r-1 tool
// outputs so far).
func chatBody(s, r int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"model":"gpt-test","messages":[{"role":"system","content":"You are agent %d."},{"role":"user","content":"Fix bug %d in the parser."}`, s, s)
	for k := 1; k < r; k++ {
		out, _ := json.Marshal(sessionOutput(s, k))
		fmt.Fprintf(&b, `,{"role":"assistant","content":"Step %d.","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"make s%d\"}"}}]}`, k, k, k)
		fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":%s}`, k, out)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}

// runLoad sends sessions x requests through base concurrently (one goroutine per
// session, its requests in order) and returns each request's latency.
func runLoad(t *testing.T, client *http.Client, base string, sessions, requests int) ([]time.Duration, int) {
	t.Helper()
	return runLoadOn(t, client, []string{base}, sessions, requests)
}

// runLoadOn is runLoad over several replicas: request r of session s goes to
// bases[(s+r) mod len(bases)], so each session's requests alternate between them.
func runLoadOn(t *testing.T, client *http.Client, bases []string, sessions, requests int) ([]time.Duration, int) {
	t.Helper()
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			for r := 1; r <= requests; r++ {
				body := chatBody(s, r)
				start := time.Now()
				resp, err := client.Post(bases[(s+r)%len(bases)]+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				d := time.Since(start)
				mu.Lock()
				if err != nil {
					errs++
					if errs <= 3 {
						t.Errorf("session %d request %d: %v", s, r, err)
					}
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, errs
}

// Concurrent sessions through the proxy to a local fake upstream: no errors, pruning
// happens, a stream in flight at shutdown completes, the server shuts down
// gracefully and leaves no goroutine behind. PRUNEADVISOR_LOAD=1 runs the full 200 x
// 50 and logs the figures docs/PERFORMANCE.md reports.
func TestLoadAndShutdown(t *testing.T) {
	sessions, requests := 20, 8
	if fullLoad {
		sessions, requests = 200, 50
		if v := os.Getenv("PRUNEADVISOR_LOAD_SIZE"); v != "" {
			fmt.Sscanf(v, "%dx%d", &sessions, &requests)
		}
	}
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	slow := make(chan struct{})
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Header.Get("X-Slow-Stream") != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 5 {
				writeSSE(w, "", fmt.Sprintf(`{"i":%d}`, i))
				if i == 0 {
					close(slow)
				}
				time.Sleep(50 * time.Millisecond)
			}
			writeSSE(w, "", "[DONE]")
			return
		}
		okJSON(w, r, body)
	})
	up.discard.Store(true)
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, ShutdownTimeout: 5 * time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- env.srv.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	transport := &http.Transport{MaxIdleConnsPerHost: sessions, MaxConnsPerHost: 0}
	client := &http.Client{Transport: transport, Timeout: 60 * time.Second}

	// Direct to the upstream first, for the baseline.
	direct, errs := runLoad(t, client, up.URL, sessions, requests)
	if errs != 0 {
		t.Fatalf("%d errors talking to the upstream directly", errs)
	}
	cpu0 := cpuTime()
	start := time.Now()
	lat, errs := runLoad(t, client, base, sessions, requests)
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	if errs != 0 {
		t.Fatalf("%d of %d requests failed", errs, len(lat))
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	metrics := scrape(t, base)
	t.Logf("%d sessions x %d requests in %v (%.0f req/s, %v CPU per request, load generator and upstream included); latency through the proxy p50 %v p99 %v max %v; direct p50 %v p99 %v; heap after GC %.1f MiB; sessions in memory %d",
		sessions, requests, wall.Round(time.Millisecond), float64(len(lat))/wall.Seconds(), (cpu / time.Duration(len(lat))).Round(10*time.Microsecond),
		percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1), percentile(direct, 0.5), percentile(direct, 0.99),
		float64(ms.HeapAlloc)/(1<<20), env.srv.Sessions())
	if !strings.Contains(metrics, `pruneadvisor_outputs_pruned_total{reason="score"}`) {
		t.Error("nothing was pruned under load")
	}
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "pruneadvisor_advise_seconds") && (strings.Contains(line, "_sum") || strings.Contains(line, "_count")) ||
			strings.HasPrefix(line, "pruneadvisor_advise_failures_total") {
			t.Log(line)
		}
	}

	// A stream in flight when the shutdown starts still completes.
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(chatBody(9999, 1)))
	req.Header.Set("X-Slow-Stream", "1")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-slow
	cancel()
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.HasSuffix(string(got), "data: [DONE]\n\n") {
		t.Errorf("stream cut by the shutdown: %q, %v", got, err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := client.Get(base + "/healthz"); err == nil {
		t.Error("still serving after shutdown")
	}
	transport.CloseIdleConnections()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	up.Close()
	env.http.Close()
	_ = env.db.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after shutdown, %d before:\n%s", n, goroutines, buf[:runtime.Stack(buf, true)])
	}
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// An idle session past MaxSessions is forgotten; when it comes back its stubs come
// back from the store byte for byte.
func TestSessionBound(t *testing.T) {
	up := newRecorder(t, okJSON)
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, MaxSessions: 2})
	send := func(s, r int) []byte {
		n := up.count()
		resp, _ := post(t, env.http.URL+"/v1/chat/completions", chatBody(s, r), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("session %d request %d: %d", s, r, resp.StatusCode)
		}
		return up.body(n)
	}
	// Session 0 reaches request 4: output 1 (NOISE) is pruned.
	var before []byte
	for r := 1; r <= 4; r++ {
		before = send(0, r)
	}
	if !bytes.Contains(before, []byte("[pruned: run_command make s1")) {
		t.Fatalf("output 1 not pruned: %s", clip(before))
	}
	// Three other sessions push session 0 out.
	for s := 1; s <= 3; s++ {
		send(s, 1)
	}
	if n := env.srv.Sessions(); n != 2 {
		t.Errorf("%d sessions in memory; want 2", n)
	}
	after := send(0, 4)
	if !bytes.Equal(before, after) {
		t.Errorf("after eviction the same request went out differently:\n%s\nwas\n%s", clip(after), clip(before))
	}
}

// Added latency on a 200k-token Anthropic request (PRUNEADVISOR_LOAD=1 only): the same
// request sent 40 times through the proxy and 40 times directly, sequentially.
func TestLatency200kTokens(t *testing.T) {
	if !fullLoad {
		t.Skip("set PRUNEADVISOR_LOAD=1")
	}
	up := newRecorder(t, okJSON)
	up.discard.Store(true)
	env := newProxy(t, server.Options{AnthropicUpstream: up.URL})
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-test","max_tokens":1024,"system":"You are a coding agent.","messages":[{"role":"user","content":"Fix the parser."}`)
	for k := 1; k <= 80; k++ {
		var out strings.Builder
		for i := 0; i < 4; i++ {
			out.WriteString(sessionOutput(k, 2*k+i%2))
		}
		q, _ := json.Marshal(out.String())
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"Step %d."},{"type":"tool_use","id":"toolu_%d","name":"Read","input":{"file_path":"/src/f%d.go"}}]}`, k, k, k)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":%s}]}`, k, q)
	}
	b.WriteString(`]}`)
	body := b.Bytes()
	sess, err := transcript.Read("big", body, transcript.Options{Format: transcript.FormatAnthropic})
	if err != nil {
		t.Fatal(err)
	}
	tokens := 0
	for _, m := range sess.Messages {
		tokens += m.Tokens
	}
	send := func(url string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", bytes.NewReader(body))
		req.Header.Set(server.HeaderSession, "big-1")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	first := send(env.http.URL) // indexes and tokenizes every message once
	var proxied, direct []time.Duration
	for range 40 {
		proxied = append(proxied, send(env.http.URL))
		direct = append(direct, send(up.URL))
	}
	t.Logf("200k-token request: %d bytes, %d tokens; first request through the proxy %v; then p50 %v p99 %v through the proxy, p50 %v p99 %v direct",
		len(body), tokens, first.Round(time.Millisecond), percentile(proxied, 0.5), percentile(proxied, 0.99), percentile(direct, 0.5), percentile(direct, 0.99))
}

// Concurrent requests of one session (a client retrying, parallel sub-calls) are
// advised one at a time and all go out with the same bytes.
func TestSameSessionConcurrent(t *testing.T) {
	up := newRecorder(t, okJSON)
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL})
	body := chatBody(7, 6)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := http.Post(env.http.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	if up.count() != 8 {
		t.Fatalf("%d requests reached the upstream", up.count())
	}
	first := up.body(0)
	if !bytes.Contains(first, []byte("[pruned: run_command make s1")) {
		t.Fatalf("output 1 not pruned: %s", clip(first))
	}
	for i := 1; i < 8; i++ {
		if !bytes.Equal(up.body(i), first) {
			t.Errorf("request %d went out differently", i)
		}
	}
}
