// Package e2e runs the real agent CLIs (e2e/agents.txt, installed by .ci/e2e-install)
// through `pruneadvisor wrap` against a scripted fake model, inside a loopback-only
// network namespace, with a recording hop between the agent and the proxy; the
// compaction tests also run each agent straight at the fake (runOpts.direct). Run it
// with .ci/run, or by hand:
//
//	.ci/e2e-install
//	unshare -n sh -c 'ip link set lo up && PRUNEADVISOR_E2E=1 go test -count=1 -v ./e2e'
//
// Without PRUNEADVISOR_E2E=1 every test is skipped (go test ./... runs them so).
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// agentPin is one line of agents.txt.
type agentPin struct{ name, bin, pkg, version string }

func pins(t *testing.T) map[string]agentPin {
	t.Helper()
	data, err := os.ReadFile("agents.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]agentPin{}
	for _, ln := range strings.Split(string(data), "\n") {
		f := strings.Fields(ln)
		if len(f) == 4 && !strings.HasPrefix(f[0], "#") {
			out[f[0]] = agentPin{f[0], f[1], f[2], f[3]}
		}
	}
	return out
}

func cacheDir() string {
	if d := os.Getenv("PRUNEADVISOR_E2E_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "pruneadvisor-e2e")
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// pruneadvisorBin builds the binary once per test run.
func pruneadvisorBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pa-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "pruneadvisor")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/pruneadvisor").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// requireIsolated skips without PRUNEADVISOR_E2E=1 and fails unless the test runs
// in a network namespace whose only interface is the loopback one.
func requireIsolated(t *testing.T) {
	t.Helper()
	if os.Getenv("PRUNEADVISOR_E2E") != "1" {
		t.Skip("end-to-end tests with the real agent CLIs run with PRUNEADVISOR_E2E=1 inside unshare -n (see .ci/run)")
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			t.Fatalf("interface %s is not loopback: run inside `unshare -n sh -c 'ip link set lo up && ...'` so no traffic can leave", i.Name)
		}
	}
}

// agentBin returns the installed agent's bin folder, or skips with the install's
// reason.
func agentBin(t *testing.T, p agentPin) string {
	t.Helper()
	dir := filepath.Join(cacheDir(), p.name+"-"+p.version)
	bin := filepath.Join(dir, "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(bin, p.bin)); err == nil {
		return bin
	}
	reason := "not installed (run .ci/e2e-install)"
	if b, err := os.ReadFile(dir + ".failed"); err == nil {
		reason = strings.TrimSpace(string(b))
	}
	fmt.Printf("SKIP e2e %s: %s@%s: %s\n", p.name, p.pkg, p.version, reason)
	t.Skipf("%s@%s: %s", p.pkg, p.version, reason)
	return ""
}

// hop is the recording hop between the agent and the proxy: what the agent sent.
type hop struct {
	mu   sync.Mutex
	reqs []recorded
}

func newHop(t *testing.T, proxy string) *httptest.Server {
	t.Helper()
	h := &hop{}
	u, _ := url.Parse(proxy)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.reqs = append(h.reqs, recorded{path: r.URL.Path, body: body})
		h.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	hops[srv.URL] = h
	return srv
}

var hops = map[string]*hop{}

// freeAddr returns a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// e2eConfig makes the proxy prune as soon as it can: a small budget (every
// request is over it), no least-rewrite threshold, rewrites forced by the budget
// made whether or not they pay (price_forced off: a six-step script's rewrites never
// pay for themselves), one protected step, candidates from 100 tokens. Rules only (--scorer none): what is pruned is what the rules
// say, the same on every run.
const e2eConfig = `{"context_window": 200000, "budget": 2000, "price_forced": false, "protected_steps": 1, "min_candidate_tokens": 100, "rewrite_fraction": 0}`

// run is one agent's run and everything recorded of it.
type run struct {
	model  *model
	hop    *hop
	stdout string
	stderr string
	exit   int
	dir    string
	took   time.Duration
}

// runAgent starts the fake model, the proxy and the hop, and runs the agent
// through wrap with args; env adds to the agent's environment.
func runAgent(t *testing.T, p agentPin, m *model, args []string, env []string, prepare func(home, work string)) *run {
	t.Helper()
	return runAgentWith(t, p, m, runOpts{
		args: func(string) []string { return args }, env: func(string) []string { return env },
		prepare: func(home, work, _ string) {
			if prepare != nil {
				prepare(home, work)
			}
		},
	})
}

// runOpts says how runAgentWith runs an agent.
type runOpts struct {
	// args are the agent's arguments and env adds to its environment; upstream
	// is the fake model's URL in direct mode, "" through wrap.
	args func(upstream string) []string
	env  func(upstream string) []string
	// prepare writes the agent's settings into its HOME and files into its work
	// folder before it starts; upstream as for args.
	prepare func(home, work, upstream string)
	// direct runs the agent itself, pointed at the fake model by its own
	// settings (args, env, prepare), with no proxy: the hop records what it
	// sent in front of the fake. Else it runs through wrap and the proxy.
	direct bool
	// config is the proxy's config file; "" is e2eConfig.
	config string
}

// runAgentWith starts the fake model and, unless o.direct, the proxy; puts the
// recording hop in front of whichever the agent talks to; and runs the agent
// (through wrap unless o.direct).
func runAgentWith(t *testing.T, p agentPin, m *model, o runOpts) *run {
	t.Helper()
	bin := agentBin(t, p)
	pa := pruneadvisorBin(t)
	m.t = t
	fake := httptest.NewServer(m)
	t.Cleanup(fake.Close)

	// Not under /tmp: Gemini CLI skips settings files below a folder others can write.
	runs := filepath.Join(cacheDir(), "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(runs, p.name+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	home := filepath.Join(tmp, "home")
	work := filepath.Join(tmp, "work")
	for _, d := range []string{home, work, filepath.Join(home, ".codex")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeWorkdir(t, work)

	var hs *httptest.Server
	var cmdArgs []string
	upstream := ""
	if o.direct {
		hs = newHop(t, fake.URL)
		upstream = hs.URL
	} else {
		db := filepath.Join(tmp, "pa.db")
		cfg := filepath.Join(tmp, "config.json")
		config := o.config
		if config == "" {
			config = e2eConfig
		}
		if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		serve := exec.CommandContext(ctx, pa, "serve", "--addr", addr, "--db", db, "--scorer", "none", "--config", cfg,
			"--anthropic-upstream", fake.URL, "--openai-upstream", fake.URL, "--gemini-upstream", fake.URL)
		var serveLog bytes.Buffer
		serve.Stdout, serve.Stderr = &serveLog, &serveLog
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cancel()
			_ = serve.Wait()
			if t.Failed() {
				t.Logf("proxy log:\n%s", serveLog.String())
			}
		})
		waitHealthy(t, "http://"+addr)
		hs = newHop(t, "http://"+addr)
		cmdArgs = []string{"wrap", p.name, "--proxy", hs.URL, "--db", db, "--"}
	}
	if o.prepare != nil {
		o.prepare(home, work, upstream)
	}
	cmdArgs = append(cmdArgs, o.args(upstream)...)
	name := pa
	if o.direct {
		name = filepath.Join(bin, p.bin)
	}
	c := exec.Command(name, cmdArgs...)
	c.Dir = work
	c.Env = baseEnv(home, bin)
	if o.env != nil {
		c.Env = append(c.Env, o.env(upstream)...)
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	c.Stdin = nil
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err = <-done:
	case <-time.After(4 * time.Minute):
		_ = c.Process.Kill()
		err = <-done
		t.Errorf("%s did not finish in 4 minutes", p.name)
	}
	r := &run{model: m, hop: hops[hs.URL], stdout: stdout.String(), stderr: stderr.String(), dir: work, took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var gaps []string
	last := start
	for _, q := range m.requests {
		gaps = append(gaps, fmt.Sprintf("%.1f", q.at.Sub(last).Seconds()))
		last = q.at
	}
	t.Logf("%s %s: exit %d in %.1f s; model steps %v; %d requests at the model, seconds before each: %s; %.1f s after the last",
		p.pkg, p.version, r.exit, r.took.Seconds(), m.steps, len(m.requests), strings.Join(gaps, " "), time.Since(last).Seconds()-0)
	if dump := os.Getenv("PRUNEADVISOR_E2E_DUMP"); dump != "" {
		// Keep what reached the model and what the agent sent, for reading by hand.
		_ = os.MkdirAll(dump, 0o755)
		for i, q := range m.requests {
			_ = os.WriteFile(filepath.Join(dump, fmt.Sprintf("%s-model-%02d.json", p.name, i)), q.body, 0o644)
		}
		for i, q := range r.hop.reqs {
			_ = os.WriteFile(filepath.Join(dump, fmt.Sprintf("%s-sent-%02d-%s.json", p.name, i, strings.ReplaceAll(strings.Trim(q.path, "/"), "/", "_"))), q.body, 0o644)
		}
		_ = os.WriteFile(filepath.Join(dump, p.name+"-stdout.txt"), []byte(r.stdout+"\n--- stderr\n"+r.stderr), 0o644)
	}
	return r
}

func waitHealthy(t *testing.T, base string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("proxy at %s never became healthy", base)
}

// baseEnv is the agents' environment: a fresh HOME, PATH with the agent first,
// fake API keys, and every telemetry, update check and error report off.
func baseEnv(home, bin string) []string {
	return []string{
		"HOME=" + home,
		"PATH=" + bin + ":" + os.Getenv("PATH"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"TERM=dumb", "NO_COLOR=1", "CI=true",
		"ANTHROPIC_API_KEY=sk-ant-e2e-not-real", "OPENAI_API_KEY=sk-e2e-not-real", "GEMINI_API_KEY=AIza-e2e-not-real",
		// Claude Code
		"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_BUG_COMMAND=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "IS_SANDBOX=1",
		// Gemini CLI
		"GEMINI_TELEMETRY_ENABLED=false", "GEMINI_CLI_NO_RELAUNCH=true",
		// opencode
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1", // its default plugins are npm packages it would fetch at start
		// pi
		"PI_SKIP_VERSION_CHECK=1", "PI_OFFLINE=1",
		// Codex
		"CODEX_HOME=" + filepath.Join(home, ".codex"),
	}
}

// The files the script reads and edits. mainGo's first line is what the edit
// changes; largeTxt is about 6,000 tokens.
const origMarker = "PORT_FROM_FLAG_ONLY"

func mainGo() string {
	var b strings.Builder
	b.WriteString("package main // " + origMarker + "\n\nimport \"fmt\"\n\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "func handler%02d(port int) string { return fmt.Sprintf(\"listening on %%d (route %02d)\", port) }\n", i, i)
	}
	return b.String()
}

func writeWorkdir(t *testing.T, work string) {
	t.Helper()
	var large strings.Builder
	for i := 1; i <= 600; i++ {
		fmt.Fprintf(&large, "line %04d: the quick brown fox jumps over the lazy dog %d times\n", i, i*3)
	}
	for name, data := range map[string]string{"main.go": mainGo(), "large.txt": large.String()} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// stubRe finds a stub as the JSON string value it is written in.
var stubRe = regexp.MustCompile(`\[pruned: [^\]]*? restores it\]`)

// jsonStringRe matches one JSON string token.
var jsonStringRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// checkRun asserts what every agent's run must show (issue 11).
func checkRun(t *testing.T, r *run, recallTool string) {
	t.Helper()
	if r.exit != 0 {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.exit, tail(r.stdout), tail(r.stderr))
	}
	m := r.model
	if len(m.steps) == 0 || m.steps[len(m.steps)-1] != "final" {
		t.Errorf("the script did not reach its end: %v (tools %v)", m.steps, m.toolList)
	}
	if m.recallBy != recallTool {
		t.Errorf("the stub names the recall tool %q; want %q as the agent sees it", m.recallBy, recallTool)
	}
	hopReqs := r.hop.reqs
	var sent []recorded
	for _, h := range hopReqs {
		if strings.Contains(h.path, "/recall/") || strings.HasSuffix(h.path, "/healthz") {
			continue
		}
		sent = append(sent, h)
	}
	// Pair each request the model got with the one the agent sent: same order.
	byPath := map[string][]recorded{}
	for _, s := range sent {
		byPath[s.path] = append(byPath[s.path], s)
	}
	seen := map[string]int{}
	firstStub := map[string]int{} // stub text -> request index where it appeared
	var superseded, duplicate, afterRecall bool
	for i, got := range m.requests {
		k := seen[got.path]
		seen[got.path]++
		if k >= len(byPath[got.path]) {
			t.Errorf("request %d (%s) at the model has no counterpart the agent sent", i, got.path)
			continue
		}
		orig := byPath[got.path][k].body
		stubs := checkOnlyStubs(t, i, orig, got.body)
		if !got.main {
			continue
		}
		for st := range firstStub {
			if !bytes.Contains(got.body, []byte(st)) {
				t.Errorf("request %d: stub %s, present since request %d, is gone or changed", i, st, firstStub[st])
			}
		}
		for _, st := range stubs {
			if _, ok := firstStub[st]; !ok {
				firstStub[st] = i
			}
			superseded = superseded || strings.Contains(st, "superseded by call")
			duplicate = duplicate || strings.Contains(st, "duplicate by call")
		}
		if m.recallID != "" && i > m.recallAt && bytes.Contains(got.body, []byte(origMarker)) {
			afterRecall = true
		}
	}
	if !superseded {
		t.Errorf("no stub for the superseded read reached the model")
	}
	if !duplicate {
		t.Errorf("no stub for the duplicate command reached the model")
	}
	if !afterRecall {
		t.Errorf("the recall's result (the original read, holding %q) never reached the model", origMarker)
	}
	for st, i := range firstStub {
		if strings.Contains(st, " by call ") {
			t.Logf("stub from request %d on: %s", i, st)
		}
	}
	t.Logf("%d distinct stubs; recall %s via %s; the agent printed %q", len(firstStub), m.recallID, m.recallBy, strings.TrimSpace(r.stdout))
}

// checkOnlyStubs checks that got is orig with some JSON string values replaced by
// strings holding stubs (and nothing else changed), and returns the stubs in got.
func checkOnlyStubs(t *testing.T, i int, orig, got []byte) []string {
	t.Helper()
	if bytes.Equal(orig, got) {
		return stubsIn(got)
	}
	var pat strings.Builder
	pat.WriteString(`\A`)
	pos := 0
	n := 0
	for _, loc := range jsonStringRe.FindAllIndex(got, -1) {
		if !stubRe.Match(got[loc[0]:loc[1]]) {
			continue
		}
		pat.WriteString(regexp.QuoteMeta(string(got[pos:loc[0]])))
		pat.WriteString(`"(?:[^"\\]|\\.)*"`)
		pos = loc[1]
		n++
	}
	pat.WriteString(regexp.QuoteMeta(string(got[pos:])))
	pat.WriteString(`\z`)
	re, err := regexp.Compile(pat.String())
	if err != nil {
		t.Fatalf("request %d: %v", i, err)
	}
	if n == 0 || !re.Match(orig) {
		t.Errorf("request %d: the body at the model differs from what the agent sent beyond %d stubbed values\nsent: %s\ngot:  %s", i, n, clip(orig), clip(got))
	}
	return stubsIn(got)
}

func stubsIn(b []byte) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range stubRe.FindAll(b, -1) {
		if !seen[string(s)] {
			seen[string(s)] = true
			out = append(out, string(s))
		}
	}
	return out
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:300]) + " … " + string(b[len(b)-300:])
	}
	return string(b)
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}
