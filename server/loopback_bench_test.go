package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/server"
)

// loopRouteHeader names the route a request of the loopback benchmark took
// (direct, bare or serve), so the fake upstream counts each route's requests apart.
// Both proxies forward it as any other header.
const loopRouteHeader = "X-Loopback-Route"

// The routes of the loopback benchmark.
const (
	routeDirect = "direct"
	routeBare   = "bare"
	routeServe  = "serve"
)

// loopReply is the fake upstream's answer: a small Anthropic Messages response
// with a usage block (which serve's ledger reads).
const loopReply = `{"id":"msg_loop","type":"message","role":"assistant","model":"claude-test",` +
	`"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,` +
	`"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":219000,"output_tokens":2}}`

// loopUpstream is the fake Anthropic of the loopback benchmark, on 127.0.0.1 in the
// benchmark's process: it reads each request's body into one reused buffer, counts
// the stubs in it ("[pruned: "), and answers loopReply at once. Per route
// (loopRouteHeader) it keeps the number of requests and the stubs in the last body.
type loopUpstream struct {
	*httptest.Server
	mu    sync.Mutex
	buf   bytes.Buffer
	seen  map[string]int
	stubs map[string]int
	last  map[string][]byte // with keep: each route's last body
	keep  bool
	// rate, when not 0, is the bytes per second the upstream reads a body at (a
	// link of that speed between the proxy and the upstream: loopUplink).
	rate float64
	// h2 makes the upstream refuse (505) a request that is not HTTP/2: the TLS
	// upstream's check that every route speaks it.
	h2 bool
}

// loopUplink is the rate of steady-100mbit's upstream link in bytes per second:
// 100 Mbit/s, an office's or a home's uplink (an 844 KB body takes 68 ms).
const loopUplink = 100e6 / 8

func newLoopUpstream(tb testing.TB) *loopUpstream {
	u := unstartedLoopUpstream()
	u.Start()
	tb.Cleanup(u.Close)
	return u
}

// unstartedLoopUpstream is a loopUpstream whose server is not started yet.
func unstartedLoopUpstream() *loopUpstream {
	u := &loopUpstream{seen: map[string]int{}, stubs: map[string]int{}, last: map[string][]byte{}}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	return u
}

// newLoopUpstreamTLS is newLoopUpstream over TLS with HTTP/2, as a provider's API
// is reached: httptest's certificate for 127.0.0.1, written to a PEM file whose
// path it returns, for the proxies' SSL_CERT_FILE (crypto/x509 reads it for the
// system roots on Linux).
func newLoopUpstreamTLS(tb testing.TB) (*loopUpstream, string) {
	u := unstartedLoopUpstream()
	u.EnableHTTP2, u.h2 = true, true
	u.StartTLS()
	tb.Cleanup(u.Close)
	certFile := filepath.Join(tb.TempDir(), "upstream.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: u.Certificate().Raw})
	if err := os.WriteFile(certFile, pemBytes, 0o600); err != nil {
		tb.Fatal(err)
	}
	return u, certFile
}

func (u *loopUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if u.h2 && r.ProtoMajor != 2 {
		http.Error(w, "HTTP/2 only, got "+r.Proto, http.StatusHTTPVersionNotSupported)
		return
	}
	u.mu.Lock()
	u.buf.Reset()
	err := u.read(r.Body)
	route := r.Header.Get(loopRouteHeader)
	u.seen[route]++
	u.stubs[route] = bytes.Count(u.buf.Bytes(), []byte("[pruned: "))
	if u.keep {
		u.last[route] = bytes.Clone(u.buf.Bytes())
	}
	u.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(loopReply)))
	_, _ = io.WriteString(w, loopReply)
}

// read reads body into u.buf (u.mu held), at u.rate when it is set: 16 KiB at a
// time, each read once the rate allows the bytes before it.
func (u *loopUpstream) read(body io.Reader) error {
	if u.rate == 0 {
		_, err := u.buf.ReadFrom(body)
		return err
	}
	start := time.Now()
	var chunk [16 << 10]byte
	for {
		time.Sleep(time.Until(start.Add(time.Duration(float64(u.buf.Len()) / u.rate * float64(time.Second)))))
		n, err := body.Read(chunk[:])
		u.buf.Write(chunk[:n])
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// counts returns the requests route sent so far and the stubs in its last body.
func (u *loopUpstream) counts(route string) (requests, stubs int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[route], u.stubs[route]
}

// loopChild is a process of the loopback benchmark (serve or the bare proxy),
// listening on 127.0.0.1.
type loopChild struct {
	url string // base URL
	pid int
}

// servingOn is the line serve prints to stderr once it listens (and the bare
// child prints the same).
var servingOn = regexp.MustCompile(`serving on (http://[0-9.:]+)`)

// startLoopChild starts cmd, waits up to a minute for its "serving on URL" line,
// and stops it with SIGTERM when tb ends (SIGKILL after 15 s). When cmd cannot be
// started or never listens, it skips tb with the reason when skip is set (the
// benchmark), else fails it.
func startLoopChild(tb testing.TB, name string, cmd *exec.Cmd, skip bool) loopChild {
	tb.Helper()
	fail := tb.Fatalf
	if skip {
		fail = tb.Skipf
	}
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		fail("start %s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	listening := false
	tb.Cleanup(func() { stopLoopChild(tb, name, cmd, done, out, listening) })
	deadline := time.After(time.Minute)
	for {
		if m := servingOn.FindStringSubmatch(out.String()); m != nil {
			listening = true
			return loopChild{url: m[1], pid: cmd.Process.Pid}
		}
		select {
		case err := <-done:
			done <- err
			fail("%s exited before listening: %v\n%s", name, err, tail(out.String(), 4000))
		case <-deadline:
			fail("%s did not listen within a minute\n%s", name, tail(out.String(), 4000))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stopLoopChild sends SIGTERM to cmd (serve shuts down gracefully, writing its
// record queue) and waits up to 15 s, then kills it. A child that never listened
// (startLoopChild failed or skipped) is killed without a word.
func stopLoopChild(tb testing.TB, name string, cmd *exec.Cmd, done chan error, out *testkit.SyncBuffer, listening bool) {
	if !listening {
		_ = cmd.Process.Kill()
		<-done
		return
	}
	select {
	case err := <-done:
		tb.Errorf("%s exited during the run: %v\n%s", name, err, tail(out.String(), 4000))
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("%s: %v\n%s", name, err, tail(out.String(), 4000))
		}
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		tb.Errorf("%s did not stop within 15 s of SIGTERM\n%s", name, tail(out.String(), 4000))
	}
}

// TestLoopbackBareChild is the bare proxy process of the loopback benchmark: run by
// it (re-executing the test binary with PRUNEADVISOR_LOOPBACK_BARE set to the
// upstream's URL), it serves a bare httputil.ReverseProxy to that URL on
// 127.0.0.1 (the in-process benchmark's bareProxy, with the default transport),
// prints "serving on http://ADDR" to stderr, and serves until SIGTERM.
func TestLoopbackBareChild(t *testing.T) {
	upstream := os.Getenv("PRUNEADVISOR_LOOPBACK_BARE")
	if upstream == "" {
		t.Skip("run by BenchmarkLoopback200k and TestLoopbackRoutes")
	}
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, FlushInterval: -1,
	}}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	fmt.Fprintf(os.Stderr, "bare proxy: serving on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		t.Fatal(err)
	}
}

// startBareChild starts TestLoopbackBareChild in a process of its own, forwarding
// to upstream.
func startBareChild(tb testing.TB, upstream string, skip bool, env ...string) loopChild {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoopbackBareChild$", "-test.timeout=0")
	cmd.Env = append(append(os.Environ(), "PRUNEADVISOR_LOOPBACK_BARE="+upstream), env...)
	return startLoopChild(tb, "bare proxy", cmd, skip)
}

// pruneadvisorBin returns the pruneadvisor binary the loopback benchmark runs:
// $PRUNEADVISOR_BIN, else a file named pruneadvisor beside the test binary, else
// one built with `go build` from the module the working directory is in (into a
// folder removed when b ends). It skips b when none works. The build is of the
// working directory's tree, which need not be the commit the test binary was built
// from: to compare commits, put each one's pruneadvisor beside its server.test.
func pruneadvisorBin(b *testing.B) string {
	if p := os.Getenv("PRUNEADVISOR_BIN"); p != "" {
		b.Logf("serve: %s ($PRUNEADVISOR_BIN)", p)
		return p
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "pruneadvisor")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			b.Logf("serve: %s (beside the test binary)", p)
			return p
		}
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(gomod))
	if err != nil || mod == "" || mod == os.DevNull {
		b.Skipf("no PRUNEADVISOR_BIN and no Go module to build pruneadvisor from (go env GOMOD: %q, %v)", mod, err)
	}
	root := filepath.Dir(mod)
	bin := filepath.Join(b.TempDir(), "pruneadvisor")
	build := exec.Command("go", "build", "-o", bin, "./cmd/pruneadvisor")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Skipf("go build ./cmd/pruneadvisor in %s: %v\n%s", root, err, out)
	}
	rev, _ := exec.Command("git", "-C", root, "log", "-1", "--format=%h %s").Output()
	b.Logf("serve: pruneadvisor built from %s (%s)", root, strings.TrimSpace(string(rev)))
	return bin
}

// loopCutoff is serve's --cutoff in the loopback benchmark. On a bigSession's first
// request the lexical scorer gave the NOISE results 0.0335-0.0346 and the others
// 0.0353-0.0357 (measured on one session's 77 cards), so this cutoff prunes the same
// half of the results as BenchmarkProxy200k's noise-test scorer does: about 40 stubs
// in a steady body, whose context stays over the budget, as in that benchmark. The
// margin is thin: benchLoopSteady fails when a first body does not carry 30 to 50
// stubs. At the lexical scorer's default cutoff (0.25) every old result goes on a
// session's first request (76 stubs), and serve forwards about 72 KB instead of
// 450 KB.
const loopCutoff = "0.035"

// startServeChild starts `pruneadvisor serve --scorer lexical` on a new SQLite store in a temporary folder, forwarding Anthropic requests to
// upstream, with serve's defaults otherwise (its --max-memory, record queue and
// configuration) and the extra flags given.
func startServeChild(b *testing.B, bin, upstream string, env []string, extra ...string) loopChild {
	dir := b.TempDir()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "pa.db"),
		"--scorer", "lexical", "--anthropic-upstream", upstream}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CACHE_HOME="+dir), env...)
	return startLoopChild(b, "serve", cmd, true)
}

// userHZ is the unit of /proc/PID/stat's utime and stime: Linux reports them in
// USER_HZ ticks, 100 a second on every architecture Go runs on (proc(5)).
const userHZ = 100

// procCPU returns the CPU time (user + system) process pid used so far, from
// /proc/PID/stat (fields 14 and 15, in USER_HZ ticks: 10 ms steps).
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: the fields
	// after it start at field 3.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, raw)
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// cpuMeter sums a process's CPU time over the windows of the timed requests: a
// window opens just before a timed request and closes just before the next request
// of any kind to the process, so it takes in the work the process did after
// answering (the ledger entry) but not an untimed request's. The ticks quantize each
// reading to 10 ms; the sum over many windows is unbiased.
type cpuMeter struct {
	pid   int
	start time.Duration
	open  bool
	total time.Duration
	n     int
}

// timed opens a window for a timed request.
func (m *cpuMeter) timed(tb testing.TB) {
	m.close(tb)
	m.start = m.read(tb)
	m.open = true
	m.n++
}

// close ends the open window, if any.
func (m *cpuMeter) close(tb testing.TB) {
	if m.open {
		m.total += m.read(tb) - m.start
		m.open = false
	}
}

func (m *cpuMeter) read(tb testing.TB) time.Duration {
	d, err := procCPU(m.pid)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// perRequest is the CPU time per timed request in milliseconds.
func (m *cpuMeter) perRequest() float64 {
	if m.n == 0 {
		return 0
	}
	return float64(m.total) / float64(time.Millisecond) / float64(m.n)
}

// loopHarness sends requests over loopback, one at a time on keep-alive
// connections, straight to the upstream, through the bare proxy process and through
// the serve process, and keeps each route's latencies and the two processes' CPU.
type loopHarness struct {
	client        *http.Client
	up            *loopUpstream
	bare, serve   loopChild
	bareCPU       cpuMeter
	serveCPU      cpuMeter
	direct, viaBr []time.Duration // per timed step, in step order
	viaServe      []time.Duration
	sent          int        // requests sent to serve, timed or not
	seen0         int        // the upstream's count of serve's requests before the harness
	b             *testing.B // nil in TestLoopbackRoutes: no timer to stop and start
}

func newLoopHarness(tb testing.TB, up *loopUpstream, bare, serve loopChild) *loopHarness {
	tr := &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true, IdleConnTimeout: 5 * time.Minute}
	if up.TLS != nil { // the direct route: the upstream's certificate, HTTP/2 as the proxies use
		tr.TLSClientConfig = up.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
		tr.ForceAttemptHTTP2 = true
	}
	tb.Cleanup(tr.CloseIdleConnections)
	h := &loopHarness{client: &http.Client{Transport: tr, Timeout: 2 * time.Minute}, up: up, bare: bare, serve: serve}
	h.bareCPU.pid, h.serveCPU.pid = bare.pid, serve.pid
	h.seen0, _ = up.counts(routeServe)
	if b, ok := tb.(*testing.B); ok {
		h.b = b
	}
	return h
}

// post sends body as session's request to base over route and returns the time
// from sending it to having read the whole response.
func (h *loopHarness) post(tb testing.TB, base, route, session string, body []byte) time.Duration {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set(server.HeaderSession, session)
	req.Header.Set(loopRouteHeader, route)
	t0 := time.Now()
	resp, err := h.client.Do(req)
	if err != nil {
		tb.Fatalf("%s: %v", route, err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s: status %d, %v", route, resp.StatusCode, err)
	}
	return d
}

// untimed sends body to serve alone, outside the timed windows (a session's
// first request before its steady ones, a step before its resend).
func (h *loopHarness) untimed(tb testing.TB, session string, body []byte) {
	h.serveCPU.close(tb)
	h.post(tb, h.serve.url, routeServe, session, body)
	h.sent++
}

// step times body on the three routes back to back: straight to the upstream,
// through the bare proxy, through serve (with the benchmark's timer running for
// serve's request alone, so ns/op is serve's mean, as in BenchmarkProxy200k).
func (h *loopHarness) step(tb testing.TB, session string, body []byte) {
	h.direct = append(h.direct, h.post(tb, h.up.URL, routeDirect, session, body))
	h.bareCPU.timed(tb)
	h.viaBr = append(h.viaBr, h.post(tb, h.bare.url, routeBare, session, body))
	h.bareCPU.close(tb)
	h.serveCPU.timed(tb)
	if h.b != nil {
		h.b.StartTimer()
	}
	d := h.post(tb, h.serve.url, routeServe, session, body)
	if h.b != nil {
		h.b.StopTimer()
	}
	h.viaServe = append(h.viaServe, d)
	h.sent++
}

// warm sends one 20-turn request of its own session through each route, untimed:
// the keep-alive connections open, the processes' tables (the tokenizer's) load.
func (h *loopHarness) warm(tb testing.TB, s int) {
	body := (&bigSession{s: s}).body(20)
	id := fmt.Sprintf("warm-%d", s)
	h.post(tb, h.up.URL, routeDirect, id, body)
	h.post(tb, h.bare.url, routeBare, id, body)
	h.post(tb, h.serve.url, routeServe, id, body)
	h.sent++
}

// finish checks that serve forwarded every request it was sent, and that its
// /metrics count no advise failure or storage error.
func (h *loopHarness) finish(tb testing.TB) {
	h.serveCPU.close(tb)
	if n, _ := h.up.counts(routeServe); n-h.seen0 != h.sent {
		tb.Errorf("the upstream saw %d requests from serve; %d were sent", n-h.seen0, h.sent)
	}
	resp, err := h.client.Get(h.serve.url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		tb.Fatal(err)
	}
	for _, m := range proxyErrors.FindAllStringSubmatch(string(metrics), -1) {
		if m[1] != "0" {
			tb.Errorf("serve's metrics: %s", m[0])
		}
	}
}

// report reports serve's latencies (p50-ms, p99-ms, max-ms), the direct route's
// (direct-p50-ms, direct-p99-ms), the bare proxy's and what serve adds over it
// (bare-p50-ms, added-p50-ms, ...), serve's CPU per timed request (cpu-ms/op), the
// bare proxy's (bare-cpu-ms/op), and serve's peak RSS (peak-rss-MiB, VmHWM).
func (h *loopHarness) report(b *testing.B) {
	h.finish(b)
	reportLatency(b, "", h.viaServe)
	reportLatency(b, "direct-", h.direct)
	reportAdded(b, h.viaServe, h.viaBr)
	b.ReportMetric(h.serveCPU.perRequest(), "cpu-ms/op")
	b.ReportMetric(h.bareCPU.perRequest(), "bare-cpu-ms/op")
	hwm, err := procStatus(h.serve.pid, "VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MiB")
}

// reportAddedAs reports prefix+"added-p50-ms" and prefix+"added-p99-ms": the
// percentiles of lat less those of bare (the same steps' bare-proxy latencies).
func reportAddedAs(b *testing.B, prefix string, lat, bare []time.Duration) {
	if len(lat) == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(lat, 0.5)-percentile(bare, 0.5)), prefix+"added-p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)-percentile(bare, 0.99)), prefix+"added-p99-ms")
}

// loopEnv is what BenchmarkLoopback200k's sub-benchmarks share: the pruneadvisor
// binary and the upstream.
type loopEnv struct {
	bin string
	up  *loopUpstream
	env []string // the proxies' extra environment (SSL_CERT_FILE for a TLS upstream)
}

// harness starts a bare proxy process and a serve process (with the extra serve
// flags) for one run of a sub-benchmark, and warms them up.
func (e *loopEnv) harness(b *testing.B, extra ...string) *loopHarness {
	b.StopTimer()
	bare := startBareChild(b, e.up.URL, true, e.env...)
	serve := startServeChild(b, e.bin, e.up.URL, e.env, extra...)
	h := newLoopHarness(b, e.up, bare, serve)
	h.warm(b, int(coldSessions.Add(1)))
	return h
}

// loopPerSession is the number of timed requests of one session in the steady and
// resent cases, as in BenchmarkProxy200k/steady (81 to 100 turns).
const loopPerSession = 20

// BenchmarkLoopback200k measures the latency the proxy adds to an Anthropic
// Messages request of about 200,000 tokens (bigSession, 80 turns and more, 844 KB)
// as issue 13 measured it: over loopback, with separate processes. The real
// `pruneadvisor serve --scorer lexical` ($PRUNEADVISOR_BIN, else a pruneadvisor
// beside the test binary, else built with go build from the working directory's
// module: pruneadvisorBin) runs in a process of its
// own on a new SQLite store, with serve's defaults (200,000-token window, budget
// 100,000, --max-memory 384MiB, its record queue and ledger), with --cutoff
// loopCutoff in the bigSession cases (about 40 stubs in a steady body, as in
// BenchmarkProxy200k); a bare
// httputil.ReverseProxy runs in another (TestLoopbackBareChild); the fake upstream
// (loopUpstream) and the one client run in the benchmark's process. Requests go
// one at a time on keep-alive connections to 127.0.0.1, and each body is timed, back
// to back, straight to the upstream, through the bare proxy and through serve, so
// the machine's noise falls on all three alike. A request's time runs from sending
// it to having read the whole response. Each sub-benchmark's run starts both
// processes anew.
//
//   - cold: the first request of a session (a new session and id each time, 80
//     turns).
//   - steady: the second and later requests of a session, each one turn (two
//     messages) more than the one before, the cache_control marker moved to it; a
//     session runs 20 timed requests (81 to 100 turns) after an untimed first one.
//   - steady-rewrites: steady with serve --price-forced=false, so that a rewrite
//     forced by the budget goes without waiting until it pays (as
//     BenchmarkProxy200k/steady-rewrites sets Config.PriceForced), on sessions whose
//     new turns read again a file an earlier turn read (rereadSession), so that
//     every other request applies a rewrite of two outputs: rw-p50-ms and
//     rw-p99-ms are over the requests that applied a rewrite (serve forwarded more
//     stubs than in its previous request), rw-added-p50-ms and rw-added-p99-ms
//     those less the bare proxy's percentiles over the same steps, plain-p50-ms,
//     plain-p99-ms, plain-added-p50-ms and plain-added-p99-ms over the others (the
//     steady cases all report these: rewriteSplit).
//   - steady-100mbit: steady with the upstream reading each body at 100 Mbit/s
//     (loopUplink), as over a real link to the provider: the bare proxy and the
//     direct route send the whole body at that rate, serve its advised body, with
//     its stubs in (about 60% of the bytes).
//   - resent: a steady step sent to serve untimed, then the identical body again,
//     timed on all three routes (a client retrying a request).
//   - steady-tls: steady with the upstream over TLS and HTTP/2 (newLoopUpstreamTLS),
//     as a provider's API is reached; both proxies and the direct route speak h2 to
//     it, and the proxies trust its certificate through SSL_CERT_FILE. serve's
//     body then goes through TLS records and HTTP/2 frames, not bodyConn's writev.
//   - pi-cold and pi-steady: cold and steady on bodies built from a real pi session
//     (piSession: the messages of piSessionFile as an Anthropic history, each
//     session's tool results marked with its number; the first body is its first
//     messages up to 830 KB, each steady one two messages more), with serve's
//     default cutoff. They are skipped when ../shared/sessions is not beside the
//     repository.
//
// ns/op is serve's mean; p50-ms, p99-ms and max-ms are serve's percentiles,
// direct-p50-ms and direct-p99-ms the upstream's straight, bare-p50-ms and
// bare-p99-ms the bare proxy's, added-p50-ms and added-p99-ms serve's percentiles
// less the bare proxy's. cpu-ms/op is the serve process's CPU time per timed
// request (/proc/PID/stat, cpuMeter), bare-cpu-ms/op the bare proxy's, and
// peak-rss-MiB serve's peak resident memory (VmHWM) at the end of the run.
func BenchmarkLoopback200k(b *testing.B) {
	env := &loopEnv{bin: pruneadvisorBin(b), up: newLoopUpstream(b)}
	cut := []string{"--cutoff", loopCutoff}
	b.Run("cold", func(b *testing.B) { benchLoopCold(b, env.harness(b, cut...)) })
	b.Run("steady", func(b *testing.B) { benchLoopSteady(b, env.harness(b, cut...), newBigSession) })
	b.Run("steady-rewrites", func(b *testing.B) {
		benchLoopSteady(b, env.harness(b, append(cut, "--price-forced=false")...), rereadSession)
	})
	b.Run("steady-100mbit", func(b *testing.B) {
		env.up.rate = loopUplink
		defer func() { env.up.rate = 0 }()
		benchLoopSteady(b, env.harness(b, cut...), newBigSession)
	})
	b.Run("resent", func(b *testing.B) { benchLoopResent(b, env.harness(b, cut...)) })
	b.Run("pi-cold", func(b *testing.B) { benchLoopPiCold(b, env) })
	b.Run("pi-steady", func(b *testing.B) { benchLoopPiSteady(b, env) })
	b.Run("steady-tls", func(b *testing.B) {
		up, certFile := newLoopUpstreamTLS(b)
		tenv := &loopEnv{bin: env.bin, up: up, env: []string{"SSL_CERT_FILE=" + certFile}}
		benchLoopSteady(b, tenv.harness(b, cut...), newBigSession)
	})
}

// benchLoopCold is BenchmarkLoopback200k/cold on h.
func benchLoopCold(b *testing.B, h *loopHarness) {
	sess := &bigSession{} // one buffer for every session's body (bigSession.fresh)
	for i := 0; i < b.N; i++ {
		sess.s = int(coldSessions.Add(1))
		h.step(b, fmt.Sprintf("loop-cold-%d", sess.s), sess.fresh(bigTurns))
	}
	h.report(b)
}

// newBigSession is the bigSession s.
func newBigSession(s int) *bigSession { return &bigSession{s: s} }

// rereadSession is the bigSession s whose turns after the 80th each read again the
// file of an earlier even turn, whose result the lexical scorer at loopCutoff keeps
// (turn 80+i reads /src/f{2i}.go, as turn 2i did, and gets the same result): the
// duplicate rule makes the earlier read dead, 2,728 tokens a step, so over the
// budget a rewrite applies two such outputs every other step
// (BenchmarkProxy200k/steady-rewrites' noise-test scorer sends new results under the
// cutoff; on these bodies the lexical scorer keeps every new result: scored in a
// batch of one or two cards, the terms of their reactions are rare).
func rereadSession(s int) *bigSession {
	b := &bigSession{s: s}
	for k := 1; k <= bigTurns+loopPerSession; k++ {
		if k <= bigTurns {
			b.turns = append(b.turns, b.turn(k))
		} else {
			b.turns = append(b.turns, b.reading(k, 2*(k-bigTurns)))
		}
	}
	return b
}

// benchLoopSteady is BenchmarkLoopback200k/steady and steady-rewrites on h, with
// sessions made by session.
func benchLoopSteady(b *testing.B, h *loopHarness, session func(s int) *bigSession) {
	var split rewriteSplit
	var sess *bigSession
	var id string
	for i := 0; i < b.N; i++ {
		if i%loopPerSession == 0 {
			sess = session(int(coldSessions.Add(1)))
			id = fmt.Sprintf("loop-steady-%d", sess.s)
			h.untimed(b, id, sess.reuse(bigTurns))
			if _, n := h.up.counts(routeServe); n < 30 || n > 50 {
				b.Fatalf("%d stubs in serve's first body of a session; want about 40 (loopCutoff)", n)
			}
		}
		split.step(b, h, id, sess.reuse(bigTurns+1+i%loopPerSession))
	}
	h.report(b)
	split.report(b)
	_, stubs := h.up.counts(routeServe)
	b.ReportMetric(float64(stubs), "stubs")
}

// rewriteSplit sorts a steady benchmark's timed requests by whether serve applied
// a rewrite in them (forwarded more stubs than in its previous request), with the
// bare proxy's time of the same step beside each.
type rewriteSplit struct {
	plain, rw, plainBare, rwBare []time.Duration
}

// step times one steady request on h (loopHarness.step) and files it.
func (s *rewriteSplit) step(b *testing.B, h *loopHarness, id string, body []byte) {
	_, before := h.up.counts(routeServe)
	h.step(b, id, body)
	d, bare := h.viaServe[len(h.viaServe)-1], h.viaBr[len(h.viaBr)-1]
	if _, after := h.up.counts(routeServe); after > before {
		s.rw, s.rwBare = append(s.rw, d), append(s.rwBare, bare)
	} else {
		s.plain, s.plainBare = append(s.plain, d), append(s.plainBare, bare)
	}
}

// report reports plain- and rw- latencies (reportLatency) and what serve added
// over the bare proxy in each (reportAddedAs), and rewrites/op.
func (s *rewriteSplit) report(b *testing.B) {
	reportLatency(b, "plain-", s.plain)
	reportLatency(b, "rw-", s.rw)
	reportAddedAs(b, "plain-", s.plain, s.plainBare)
	reportAddedAs(b, "rw-", s.rw, s.rwBare)
	b.ReportMetric(float64(len(s.rw))/float64(len(s.rw)+len(s.plain)), "rewrites/op")
}

// benchLoopResent is BenchmarkLoopback200k/resent on h.
func benchLoopResent(b *testing.B, h *loopHarness) {
	var sess *bigSession
	var id string
	for i := 0; i < b.N; i++ {
		if i%loopPerSession == 0 {
			sess = &bigSession{s: int(coldSessions.Add(1))}
			id = fmt.Sprintf("loop-resent-%d", sess.s)
			h.untimed(b, id, sess.reuse(bigTurns))
		}
		body := sess.reuse(bigTurns + 1 + i%loopPerSession)
		h.untimed(b, id, body)
		h.step(b, id, body)
	}
	h.report(b)
}

// The loopback benchmark's machinery works: a request timed on its three routes
// reaches the upstream once by each, the bare proxy's and serve's byte for byte as
// sent (nothing to prune in a 24-turn session under the default budget), serve's
// /metrics count the requests, and both processes' CPU time and peak RSS read
// from /proc. The proxy process here is TestLoadChild (server.New with the lexical
// scorer, in a child process) rather than the built pruneadvisor binary, so that
// the test needs no go build and stays within a few seconds.
func TestLoopbackRoutes(t *testing.T) {
	if os.Getenv("PRUNEADVISOR_LOAD_CHILD") != "" || os.Getenv("PRUNEADVISOR_LOOPBACK_BARE") != "" {
		t.Skip("in a child process")
	}
	up := newLoopUpstream(t)
	up.keep = true
	bare := startBareChild(t, up.URL, false)
	base, pid, stop := startLoadChild(t, up.URL, server.DefaultMaxMemory)
	defer stop()
	h := newLoopHarness(t, up, bare, loopChild{url: base, pid: pid})
	sess := &bigSession{s: 90001}
	h.untimed(t, "routes", sess.body(24))
	body := sess.body(25)
	h.step(t, "routes", body)
	h.step(t, "routes", body)
	h.finish(t)
	for _, route := range []string{routeDirect, routeBare, routeServe} {
		want := 2
		if route == routeServe {
			want = 3
		}
		if n, _ := up.counts(route); n != want {
			t.Errorf("the upstream saw %d requests by %s; want %d", n, route, want)
		}
		if !bytes.Equal(up.last[route], body) {
			t.Errorf("the upstream's last body by %s is not the body sent (%d bytes, sent %d)", route, len(up.last[route]), len(body))
		}
	}
	if got := anthropicRequests(t, base); got != 3 {
		t.Errorf("serve's pruneadvisor_requests_total{route=\"anthropic\"} = %v; want 3", got)
	}
	checkProcFigures(t, pid, bare.pid)
	if len(h.direct) != 2 || len(h.viaBr) != 2 || len(h.viaServe) != 2 {
		t.Errorf("%d, %d, %d timed requests; want 2 by each route", len(h.direct), len(h.viaBr), len(h.viaServe))
	}
}

// anthropicRequests is the sum of base's pruneadvisor_requests_total counters of
// the Anthropic Messages route (every status code).
func anthropicRequests(t *testing.T, base string) float64 {
	total := 0.0
	sc := bufio.NewScanner(strings.NewReader(scrape(t, base)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "pruneadvisor_requests_total{") || !strings.Contains(line, `route="anthropic"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		total += v
	}
	return total
}

// checkProcFigures checks that the processes' CPU time and peak RSS read, with
// values a Go process that served requests has: CPU time not above twice the
// process's whole life (plus a second), and a peak RSS between 5 MiB and the load
// test's bound.
func checkProcFigures(t *testing.T, pids ...int) {
	for _, pid := range pids {
		cpu, err := procCPU(pid)
		if err != nil {
			t.Fatal(err)
		}
		var start time.Time
		if fi, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			start = fi.ModTime()
		}
		// 0 is possible: the kernel counts CPU time in ticks (10 ms) by sampling, and a
		// process that served three requests may not have been running at any tick.
		if cpu < 0 || (!start.IsZero() && cpu > 2*time.Since(start)+time.Second) {
			t.Errorf("process %d: CPU time %v (started %v ago)", pid, cpu, time.Since(start))
		}
		hwm, err := procStatus(pid, "VmHWM")
		if err != nil {
			t.Fatal(err)
		}
		if hwm < 5<<20 || hwm > loadMemoryBound {
			t.Errorf("process %d: peak RSS %d MiB; want 5 to %d MiB", pid, hwm>>20, loadMemoryBound>>20)
		}
	}
}
