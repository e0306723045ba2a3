package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	httppprof "net/http/pprof"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/internal/memtest"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// memLoad is the shape of TestLoadMemory's load: sessions of requests each, sent
// by concurrency workers. Each request of a session carries one turn of bigSession
// more than the one before, and the last carries turns turns (80: about 219,000
// o200k tokens, 844 KB), so every request of the session fits a 200,000-token
// window as an agent's would: with 50 requests the first carries 31 turns (about
// 85,000 tokens).
type memLoad struct {
	sessions, requests, concurrency, turns int
	maxMemory                              int64 // server.Options.MaxMemory (serve's default: server.DefaultMaxMemory)
}

// loadFromEnv is the default run's shape, or PRUNEADVISOR_LOAD_SIZE
// ("SESSIONSxREQUESTS"), PRUNEADVISOR_LOAD_CONCURRENCY, PRUNEADVISOR_LOAD_TURNS and
// PRUNEADVISOR_LOAD_MAX_MEMORY (bytes) when set; PRUNEADVISOR_LOAD=1 alone is the
// size docs/PERFORMANCE.md reports (200 x 50 at concurrency 24, 80 turns).
func loadFromEnv() memLoad {
	l := memLoad{sessions: 12, requests: 4, concurrency: 6, turns: bigTurns, maxMemory: server.DefaultMaxMemory}
	if fullLoad {
		l = memLoad{sessions: 200, requests: 50, concurrency: 24, turns: bigTurns, maxMemory: server.DefaultMaxMemory}
	}
	if v := os.Getenv("PRUNEADVISOR_LOAD_SIZE"); v != "" {
		fmt.Sscanf(v, "%dx%d", &l.sessions, &l.requests)
	}
	for env, p := range map[string]*int{"PRUNEADVISOR_LOAD_CONCURRENCY": &l.concurrency, "PRUNEADVISOR_LOAD_TURNS": &l.turns} {
		if v := os.Getenv(env); v != "" {
			fmt.Sscan(v, p)
		}
	}
	if v := os.Getenv("PRUNEADVISOR_LOAD_MAX_MEMORY"); v != "" {
		fmt.Sscan(v, &l.maxMemory)
	}
	return l
}

// loadMemoryBound is the peak RSS the proxy process may reach under the load
// (issue 13: 200 sessions x 50 requests of 200k tokens in <= 400 MB).
const loadMemoryBound = 400 << 20

// TestLoadChild is the proxy process of TestLoadMemory: run by it (re-executing
// the test binary with PRUNEADVISOR_LOAD_CHILD set to a directory), it serves
// server.New on a SQLite store in that directory with the lexical scorer and the
// default configuration (and the memory limit serve --max-memory sets), forwarding Anthropic requests to
// PRUNEADVISOR_LOAD_UPSTREAM, writes its address to DIR/addr and serves until its
// stdin closes.
func TestLoadChild(t *testing.T) {
	dir := os.Getenv("PRUNEADVISOR_LOAD_CHILD")
	if dir == "" {
		t.Skip("run by TestLoadMemory")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := storage.Open(ctx, filepath.Join(dir, "pa.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var maxMem int64
	fmt.Sscan(os.Getenv("PRUNEADVISOR_LOAD_MAX_MEMORY"), &maxMem)
	if maxMem > 0 {
		debug.SetMemoryLimit(server.GoMemoryLimit(maxMem)) // as serve --max-memory does
	}
	srv, err := server.New(server.Options{
		Config: advisor.DefaultConfig(), Scorer: lexical.New(), Store: db, Ledger: db,
		AnthropicUpstream: os.Getenv("PRUNEADVISOR_LOAD_UPSTREAM"), MaxMemory: maxMem,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "addr.tmp"), []byte(ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "addr.tmp"), filepath.Join(dir, "addr")); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if addr := os.Getenv("PRUNEADVISOR_LOAD_PPROF"); addr != "" {
		// For looking into a run: net/http/pprof's handlers (go tool pprof http://ADDR/debug/pprof/heap).
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		go func() { _ = http.ListenAndServe(addr, mux) }()
	}
	if err := srv.Serve(ctx, ln); err != nil {
		t.Error(err)
	}
	if path := os.Getenv("PRUNEADVISOR_LOAD_HEAP"); path != "" {
		// For looking into a run: the live heap at the end, and the runtime's figures.
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		runtime.GC()
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("heap in use %d MiB, heap sys %d MiB, released %d MiB, stacks %d MiB, other sys %d MiB, total sys %d MiB, GCs %d, cache %+v\n",
			ms.HeapInuse>>20, ms.HeapSys>>20, ms.HeapReleased>>20, ms.StackSys>>20, ms.OtherSys>>20, ms.Sys>>20, ms.NumGC, srv.MessageCacheStats())
	}
}

// startLoadChild starts TestLoadChild in a process of its own and returns its base
// URL, its pid and a function that stops it.
func startLoadChild(t *testing.T, upstream string, maxMemory int64) (string, int, func()) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadChild$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), "PRUNEADVISOR_LOAD_CHILD="+dir, "PRUNEADVISOR_LOAD_UPSTREAM="+upstream,
		"PRUNEADVISOR_LOAD_MAX_MEMORY="+strconv.FormatInt(maxMemory, 10))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil || t.Failed() || os.Getenv("PRUNEADVISOR_LOAD_HEAP") != "" {
				t.Logf("proxy process: %v\n%s", err, tail(out.String(), 4000))
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("proxy process did not stop\n%s", out.String())
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		addr, err := os.ReadFile(filepath.Join(dir, "addr"))
		if err == nil {
			return "http://" + string(addr), cmd.Process.Pid, stop
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("proxy process did not start\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procStatus returns the kB value of field (VmHWM, VmRSS) in /proc/PID/status.
func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			var kb int64
			_, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// loadResult is one pass of the load through one base URL.
type loadResult struct {
	first, steady []time.Duration // first requests of sessions, and the others
	errs          int
	wall          time.Duration
}

// sendLoad sends l through base: workers take the session at the head of a queue,
// send its next request and put it back at the tail, so every session stays live
// through the run (the proxy holds all of them at once), at most l.concurrency
// requests in flight.
func sendLoad(t *testing.T, client *http.Client, base string, l memLoad) loadResult {
	t.Helper()
	type sess struct {
		s, r int
		b    *bigSession // its turns, built once (the load generator's memory is not the proxy's)
	}
	queue := make(chan sess, l.sessions)
	for s := range l.sessions {
		queue <- sess{s, 0, &bigSession{s: 20000 + s}}
	}
	var mu sync.Mutex
	var res loadResult
	var wg sync.WaitGroup
	remaining := l.sessions * l.requests
	start := time.Now()
	for range l.concurrency {
		wg.Go(func() {
			for {
				mu.Lock()
				if remaining == 0 {
					mu.Unlock()
					return
				}
				remaining--
				mu.Unlock()
				x := <-queue
				body := x.b.body(max(1, l.turns-l.requests+1+x.r))
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set(server.HeaderSession, fmt.Sprintf("load-%d", x.s))
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					res.errs++
					if res.errs <= 3 {
						t.Errorf("session %d request %d: %v", x.s, x.r+1, err)
					}
				}
				if x.r == 0 {
					res.first = append(res.first, d)
				} else {
					res.steady = append(res.steady, d)
				}
				mu.Unlock()
				if x.r+1 < l.requests {
					queue <- sess{x.s, x.r + 1, x.b}
				}
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

var proxyErrors = regexp.MustCompile(`(?m)^pruneadvisor_(?:advise_failures|storage_errors)_total(?:\{[^}]*\})? (\d+)$`)

// The proxy under load keeps its memory bounded: sessions x requests of
// 200k-token Anthropic bodies (bigSession, every session unique and live through
// the run), sent at a fixed concurrency through the proxy running in a process of
// its own, then through a bare httputil.ReverseProxy to the same upstream. No
// request fails, the proxy counts no advise failure or storage error, and its peak
// RSS (VmHWM) stays under loadMemoryBound. The default run is a small slice;
// PRUNEADVISOR_LOAD=1 runs 200 sessions x 50 requests at concurrency 24 and logs
// what docs/PERFORMANCE.md reports ("The proxy under load").
func TestLoadMemory(t *testing.T) {
	if os.Getenv("PRUNEADVISOR_LOAD_CHILD") != "" {
		t.Skip("in the proxy process")
	}
	l := loadFromEnv()
	up := newRecorder(t, okJSON)
	up.discard.Store(true)
	base, pid, stop := startLoadChild(t, up.URL, l.maxMemory)
	defer stop()
	transport := &http.Transport{MaxIdleConnsPerHost: l.concurrency}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 120 * time.Second}

	proxied := sendLoad(t, client, base, l)
	hwm, err := procStatus(pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	rss, _ := procStatus(pid, "VmRSS")
	rssFile, _ := procStatus(pid, "RssFile") // file-backed pages (the binary, shared libraries)
	metrics := scrape(t, base)

	target, _ := url.Parse(up.URL)
	bare := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }})
	defer bare.Close()
	direct := sendLoad(t, client, bare.URL, l)

	n := l.sessions * l.requests
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	t.Logf("%d sessions x %d requests (the last of %d turns), concurrency %d: proxy %.1f req/s, bare %.1f req/s; errors %d; peak RSS %d MiB, RSS at the end %d MiB (%d MiB of it file-backed)",
		l.sessions, l.requests, l.turns, l.concurrency, float64(n)/proxied.wall.Seconds(), float64(n)/direct.wall.Seconds(),
		proxied.errs, hwm>>20, rss>>20, rssFile>>20)
	t.Logf("ms          p50 proxy  p50 bare  p99 proxy  p99 bare")
	for _, row := range []struct {
		name string
		p, b []time.Duration
	}{{"first", proxied.first, direct.first}, {"steady", proxied.steady, direct.steady}} {
		if len(row.p) == 0 {
			continue
		}
		t.Logf("%-10s %10s %9s %10s %9s", row.name, ms(percentile(row.p, 0.5)), ms(percentile(row.b, 0.5)), ms(percentile(row.p, 0.99)), ms(percentile(row.b, 0.99)))
	}
	if proxied.errs != 0 || direct.errs != 0 {
		t.Errorf("%d requests failed through the proxy, %d through the bare proxy", proxied.errs, direct.errs)
	}
	for _, m := range proxyErrors.FindAllStringSubmatch(metrics, -1) {
		if m[1] != "0" {
			t.Errorf("proxy metrics: %s", m[0])
		}
	}
	if hwm > loadMemoryBound {
		t.Errorf("peak RSS %d MiB; want at most %d MiB", hwm>>20, loadMemoryBound>>20)
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// What the proxy keeps of a session between requests, the message cache off, is
// the advisors' bookkeeping, not the outputs' texts: eight 200k-token sessions
// (bigSession, 80 turns, 844 KB each) leave under 0.5 of their bodies' size on the
// heap. A term kept as a piece of an output's text keeps the whole text alive: with
// the corpus storing new terms so, it was 1.14; with it counting a known term by a
// map assignment (which stores the key it is given: the new piece), 0.76.
func TestProxyKeepsNoTexts(t *testing.T) {
	env := newProxy(t, server.Options{Config: advisor.DefaultConfig(), Scorer: lexical.New(),
		AnthropicUpstream: "http://upstream.invalid", Transport: &discardTransport{}, MessageCacheBytes: -1})
	h := env.srv.Handler()
	send(t, h, "warm", (&bigSession{s: 40000}).body(20)) // the tokenizer's tables
	base := memtest.LiveHeap()
	total := 0
	for s := range 8 {
		body := (&bigSession{s: 40001 + s}).body(bigTurns)
		total += len(body)
		send(t, h, fmt.Sprint("keep-", s), body)
	}
	held := memtest.LiveHeap() - base
	runtime.KeepAlive(env)
	t.Logf("%d sessions of %d bytes: %d bytes held (%.2f of the bodies)", 8, total/8, held, float64(held)/float64(total))
	// 0.40 measured (the sessions' indexes: card terms, names, rules).
	if float64(held) > 0.5*float64(total) {
		t.Errorf("the proxy holds %d bytes after %d bytes of bodies; want under 0.5 of them", held, total)
	}
}

// GoMemoryLimit leaves NonGoReserve to what the Go limit does not count, and never
// less than half of the bound to the Go heap.
func TestGoMemoryLimit(t *testing.T) {
	for _, tc := range []struct{ max, want int64 }{
		{384 << 20, 320 << 20},
		{100 << 20, 50 << 20},
		{128 << 20, 64 << 20},
		{2 << 30, 2<<30 - 64<<20},
	} {
		if got := server.GoMemoryLimit(tc.max); got != tc.want {
			t.Errorf("GoMemoryLimit(%d MiB) = %d MiB; want %d MiB", tc.max>>20, got>>20, tc.want>>20)
		}
	}
}
