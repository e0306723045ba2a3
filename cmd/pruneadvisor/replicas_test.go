package main

// A team's proxy: several serve replicas on one PostgreSQL store (docs/DESIGN.md
// "Storage beyond one machine"). These tests need the PostgreSQL fixture
// (storage/pgtest): skipped locally when no server answers, required in CI.

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/storage/pgtest"
)

// echoUpstream is a fake model API answering every request with the very body it
// received, so that the client sees what the proxy forwarded.
func echoUpstream(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// replicaOutput is tool output k of session s: unique to both, about 450 tokens.
func replicaOutput(s, k int) string {
	var b strings.Builder
	for j := range 24 {
		fmt.Fprintf(&b, "session%d/pkg%d/file%d.go:%d: func handler%dx%d(w http.ResponseWriter) { render(w, %d) }\n", s, k, j, 10*j+k, k, j, s*j)
	}
	return b.String()
}

// replicaBody is the Chat Completions request of session s at request r: its task,
// then r-1 tool calls with their outputs.
func replicaBody(s, r int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"model":"gpt-test","messages":[{"role":"system","content":"You are coding agent %d."},{"role":"user","content":"Fix the handler bug %d."}`, s, s)
	for k := 1; k < r; k++ {
		out, _ := json.Marshal(replicaOutput(s, k))
		fmt.Fprintf(&b, `,{"role":"assistant","content":"Looking at part %d.","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"grep -rn handler pkg%d\"}"}}]}`, k, k, k)
		fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":%s}`, k, out)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// toolContents reads the tool results of a forwarded Chat Completions body by call
// id.
func toolContents(body []byte) (map[string]string, error) {
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			Content    string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Content
		}
	}
	return out, nil
}

var stubRecallID = regexp.MustCompile(`recall\("(o_[0-9]{12})"\)`) // either replica's tool: recall, pruneadvisor_recall

// replicaSet is the test's load balancer over the serve replicas: request r of a
// session goes to replica r mod n; a request whose connection fails (the replica is
// gone) is sent to the next replica, as a balancer that retries on a broken
// connection (nginx's proxy_next_upstream error) does.
type replicaSet struct {
	mu      sync.Mutex
	urls    []string // "" while the replica is down
	retried atomic.Int64
}

func (rs *replicaSet) url(i int) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.urls[i]
}

func (rs *replicaSet) set(i int, u string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.urls[i] = u
}

// post sends body to path on replica first, or on the next live one when that
// fails before a response; it returns the replica that answered, the status and
// the body.
func (rs *replicaSet) post(path string, first int, body []byte) (int, int, []byte, error) {
	var lastErr error
	for try := range len(rs.urls) {
		i := (first + try) % len(rs.urls)
		u := rs.url(i)
		if u == "" {
			continue
		}
		resp, err := httpClient.Post(u+path, "application/json", bytes.NewReader(body))
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil {
				return i, resp.StatusCode, b, nil
			}
			err = rerr
		}
		lastErr = err
		rs.retried.Add(1)
	}
	return -1, 0, nil, fmt.Errorf("no replica answered: %w", lastErr)
}

// servedRequest is what one request got back: the replica that answered and the
// tool results it forwarded.
type servedRequest struct {
	replica int
	tools   map[string]string
}

// stubReason finds a stub's reason: its score, after the forced rewrite that
// made it if any ("over budget, score 0.41").
var stubReason = regexp.MustCompile(`(over budget, |hard limit, )?score [0-9.]+`)

// TestTwoReplicas runs two serve processes (with different cutoffs and recall
// tools, so that their stubs differ) on one PostgreSQL database and sends 12 agent sessions through them, the requests of each session alternating between
// the replicas, every fifth request sent to both at once (a client retrying on the
// other replica). A third of the way in, one replica is killed with SIGKILL while
// requests are in flight; the balancer sends them to the other; two thirds in, it
// is started again. Then: no request failed, every output that was pruned was sent
// with one stub only, by both replicas alike, never reverting to its original, and
// every stub recalls the original byte for byte from either replica.
func TestTwoReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgtest.URL(t)
	up := echoUpstream(t)
	env := testEnv(t)
	// The replicas' cutoffs and recall tools differ, so that their stubs for one
	// output differ (each stub names its recall tool), as when one replica's
	// scorer answers and the other's does not: only first-writer-wins keeps them
	// from sending two stubs.
	start := func(i int) *served {
		return startServe(t, env, "--db", dsn, "--scorer", "lexical", "--cutoff", []string{"0.9", "0.8"}[i], "--recall-tool", []string{"recall", "pruneadvisor_recall"}[i], "--budget", "3000", "--price-forced=false", "--openai-upstream", up.URL)
	}
	procs := []*served{start(0), start(1)}
	rs := &replicaSet{urls: []string{procs[0].url, procs[1].url}}

	const sessions, requests = 12, 18
	got := make([][]servedRequest, sessions) // by session, by request (index r-1); twice for the doubled ones
	var done atomic.Int64
	// The last third of each session waits until replica 1 is up again, so that it
	// runs on both replicas: a replica starts in about a second, by when the other
	// would otherwise have served every request left.
	restarted := make(chan struct{})
	var restartOnce sync.Once
	letGo := func() { restartOnce.Do(func() { close(restarted) }) }
	defer letGo()
	var wg sync.WaitGroup
	errs := make(chan error, sessions*requests)
	for s := range sessions {
		wg.Go(func() {
			for r := 1; r <= requests; r++ {
				if r == 2*requests/3+1 {
					<-restarted
				}
				body := replicaBody(s, r)
				firsts := []int{(s + r) % 2}
				if r%5 == 0 {
					firsts = append(firsts, (s+r+1)%2)
				}
				answers := make([]servedRequest, len(firsts))
				var both sync.WaitGroup
				for n, first := range firsts {
					both.Go(func() {
						replica, code, resp, err := rs.post("/v1/chat/completions", first, body)
						if err == nil && code != http.StatusOK {
							err = fmt.Errorf("status %d: %s", code, cutOut(string(resp), 300))
						}
						var tools map[string]string
						if err == nil {
							tools, err = toolContents(resp)
						}
						if err != nil {
							errs <- fmt.Errorf("session %d request %d: %w", s, r, err)
						}
						answers[n] = servedRequest{replica, tools}
					})
				}
				both.Wait()
				got[s] = append(got[s], answers...)
				done.Add(1)
			}
		})
	}
	// Kill replica 1 a third of the way in, mid-traffic; start it again at two thirds
	// (where every session waits for it).
	total := int64(sessions * requests)
	for done.Load() < total/3 {
		time.Sleep(2 * time.Millisecond)
	}
	rs.set(1, "")
	_ = procs[1].cmd.Process.Signal(syscall.SIGKILL)
	if code := procs[1].wait(10 * time.Second); code != 128+int(syscall.SIGKILL) {
		t.Errorf("replica 1 ended with %d, not by SIGKILL", code)
	}
	killedAt := done.Load()
	for done.Load() < 2*total/3 {
		time.Sleep(2 * time.Millisecond)
	}
	procs[1] = start(1)
	rs.set(1, procs[1].url)
	restartedAt := done.Load()
	letGo()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("killed replica 1 after %d requests, restarted it after %d; %d requests retried on the other replica", killedAt, restartedAt, rs.retried.Load())

	// One stub per output, whoever sent it, never the original again after it.
	stubs := map[string]string{}    // "s/call" -> stub
	senders := map[string][2]bool{} // "s/call" -> replicas that sent its stub
	for s, reqs := range got {
		for _, req := range reqs {
			for call, content := range req.tools {
				key := fmt.Sprintf("%d/%s", s, call)
				var k int
				fmt.Sscanf(call, "call_%d", &k)
				if content == replicaOutput(s, k) {
					if stub, ok := stubs[key]; ok {
						t.Errorf("%s: sent whole again after its stub %q", key, stub)
					}
					continue
				}
				if !strings.HasPrefix(content, "[pruned: ") {
					t.Errorf("%s: neither the original nor a stub: %q", key, cutOut(content, 200))
					continue
				}
				if old, ok := stubs[key]; ok && old != content {
					t.Errorf("%s: two stubs: %q and %q", key, old, content)
				}
				stubs[key] = content
				by := senders[key]
				by[req.replica] = true
				senders[key] = by
			}
		}
	}
	bothSent := 0
	for _, by := range senders {
		if by[0] && by[1] {
			bothSent++
		}
	}
	// The stub's reason gives the score under the cutoff its replica applied (0.9
	// or 0.8 scaled by the output's size, planner.CutoffAt), or the budget's rule.
	reasons := map[string]int{}
	for _, stub := range stubs {
		reasons[stubReason.FindString(stub)]++
	}
	t.Logf("stubs by reason: %v", reasons)
	if len(stubs) < 3*sessions || bothSent < sessions {
		t.Fatalf("%d outputs stubbed, %d of them sent by both replicas; want at least %d and %d", len(stubs), bothSent, 3*sessions, sessions)
	}
	t.Logf("%d outputs stubbed, %d of them sent by both replicas", len(stubs), bothSent)

	// Every stub recalls its original byte for byte from either replica.
	for key, stub := range stubs {
		m := stubRecallID.FindStringSubmatch(stub)
		if m == nil {
			t.Errorf("%s: no recall id in %q", key, stub)
			continue
		}
		var s, k int
		fmt.Sscanf(key, "%d/call_%d", &s, &k)
		for i, p := range procs {
			if code, text := p.get(t, "/v1/recall/"+m[1]); code != http.StatusOK || text != replicaOutput(s, k) {
				t.Errorf("%s: recall %s from replica %d: %d, %d bytes; want 200 and the original's %d", key, m[1], i, code, len(text), len(replicaOutput(s, k)))
			}
		}
	}
	for i, p := range procs {
		if _, m := p.get(t, "/metrics"); !strings.Contains(m, "\npruneadvisor_storage_errors_total 0\n") {
			t.Errorf("replica %d counted storage errors:\n%s", i, grepLines(m, "pruneadvisor_storage_errors_total"))
		}
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// pgRelay is a TCP relay from a loopback port to the PostgreSQL test server, which
// a test can cut (every connection dropped, new ones refused) and mend, to lose the
// database under a running process.
type pgRelay struct {
	target func() (net.Conn, error)
	mu     sync.Mutex
	ln     net.Listener
	addr   string
	conns  map[net.Conn]bool
}

// newPGRelay starts a relay to the server of dsn (a socket folder in its host
// parameter, or host:port) and returns it with dsn rewritten to go through it.
func newPGRelay(t *testing.T, dsn string) (*pgRelay, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	network, address := "tcp", u.Host
	if h := q.Get("host"); strings.HasPrefix(h, "/") {
		network, address = "unix", h+"/.s.PGSQL."+port
	} else if u.Port() == "" {
		address = net.JoinHostPort(u.Hostname(), port)
	}
	r := &pgRelay{target: func() (net.Conn, error) { return net.Dial(network, address) }, conns: map[net.Conn]bool{}}
	r.listen(t, "127.0.0.1:0")
	t.Cleanup(r.cut)
	q.Del("host")
	q.Del("port")
	u.Host = r.addr
	if u.User == nil {
		u.User = url.User("postgres")
	}
	u.RawQuery = q.Encode()
	return r, u.String()
}

// listen accepts on addr and relays each connection until cut.
func (r *pgRelay) listen(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.ln, r.addr = ln, ln.Addr().String()
	r.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.relay(c)
		}
	}()
}

func (r *pgRelay) relay(c net.Conn) {
	s, err := r.target()
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	r.conns[c], r.conns[s] = true, true
	r.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	_, _ = io.Copy(c, s)
	c.Close()
}

// cut closes the listener and every relayed connection: the database is gone for
// the process behind the relay.
func (r *pgRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for c := range r.conns {
		c.Close()
	}
	clear(r.conns)
}

// mend listens again on the same address.
func (r *pgRelay) mend(t *testing.T) { r.listen(t, r.addr) }

// TestReplicaLosesPostgres cuts a running serve's connections to PostgreSQL (and
// refuses new ones) while it serves, then mends them. Meanwhile requests are
// forwarded unchanged, counted in pruneadvisor_storage_errors_total, and a session
// advised before keeps its stubs; afterwards pruning resumes on the same process.
func TestReplicaLosesPostgres(t *testing.T) {
	t.Parallel()
	relay, dsn := newPGRelay(t, pgtest.URL(t))
	up := upstream(t)
	srv := startServe(t, testEnv(t), "--db", dsn, "--scorer", "lexical", "--budget", "1000", "--price-forced=false", "--openai-upstream", up.URL)
	msgs := faultMessages()
	proxied := func(task string) (int, string, []byte) {
		t.Helper()
		body := fmt.Appendf(nil, `{"model":"m","messages":%s}`, strings.Replace(msgs, "Review the modules", task, 1))
		code, resp := srv.post(t, "/v1/chat/completions", body)
		return code, resp, body
	}
	advise := func(session string) advisedPlan { return adviseOpenAI(t, srv, session, msgs) }
	before := advise("s1")
	applied := before.stubs()
	if before.Plan.Pruned != 5 || before.Plan.StorageError != "" {
		t.Fatalf("before the cut: pruned %d, storage error %q; want 5 and none", before.Plan.Pruned, before.Plan.StorageError)
	}
	if code, resp, body := proxied("Review the first proxied modules"); code != http.StatusOK || strings.Contains(resp, sha(body)) {
		t.Fatalf("proxied request before the cut: %d %s; want it pruned (not sha %s)", code, resp, sha(body))
	}

	relay.cut()
	start := time.Now()
	during := advise("s2")
	t.Logf("new session with the database cut, %.1fs: pruned %d, storage_error %q", time.Since(start).Seconds(), during.Plan.Pruned, during.Plan.StorageError)
	if during.Plan.Pruned != 0 || strings.Contains(string(during.Messages), "[pruned:") || !strings.Contains(during.Plan.StorageError, "nothing new pruned") {
		t.Errorf("with the database cut: pruned %d, storage error %q; want nothing pruned and the reason", during.Plan.Pruned, during.Plan.StorageError)
	}
	again := advise("s1")
	for id, stub := range applied {
		if again.stubs()[id] != stub {
			t.Errorf("s1 with the database cut: stub %s changed or went", id)
		}
	}
	for id := range applied {
		if code, body := srv.get(t, "/v1/recall/"+id); code != http.StatusInternalServerError {
			t.Errorf("recall %s with the database cut: %d %s; want 500 with the cause", id, code, cutOut(body, 300))
		}
		break
	}
	// A proxied request goes on unchanged, byte for byte.
	if code, resp, body := proxied("Review the second proxied modules"); code != http.StatusOK || !strings.Contains(resp, sha(body)) {
		t.Errorf("proxied request with the database cut: %d %s; want it forwarded unchanged (sha %s)", code, resp, sha(body))
	}
	_, metrics := srv.get(t, "/metrics")
	if m := storageErrorsMetric.FindStringSubmatch(metrics); m == nil || m[1] == "0" {
		t.Errorf("pruneadvisor_storage_errors_total did not count the lost database:\n%s", grepLines(metrics, "storage_errors"))
	}

	relay.mend(t)
	after := advise("s2")
	if after.Plan.Pruned != 5 || after.Plan.StorageError != "" {
		t.Errorf("after mending: pruned %d, storage error %q; want the 5 pending prunes applied", after.Plan.Pruned, after.Plan.StorageError)
	}
	for id := range after.stubs() {
		if code, _ := srv.get(t, "/v1/recall/"+id); code != http.StatusOK {
			t.Errorf("recall %s after mending: %d", id, code)
		}
	}
}

// An unreachable PostgreSQL at start: every command that opens the store fails at
// once (exit 1) naming the host and port, and never prints the password.
func TestPostgresUnreachableAtStart(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const secret = "hunter2-Secret"
	dsn := "postgres://team:" + secret + "@" + addr + "/pruneadvisor?sslmode=disable"
	session := "../../testdata/sessions/fix-port.jsonl"
	want := "storage: open postgres://team@" + addr + "/pruneadvisor?sslmode=disable: cannot reach the PostgreSQL server at " + addr + ": "
	env := testEnv(t)
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--db", dsn, "--scorer", "lexical"},
		{"advise", session, "--db", dsn, "--scorer", "lexical"},
		{"replay", session, "--db", dsn, "--scorer", "lexical"},
		{"recall", "o_0000000000", "--db", dsn},
		{"calibrate", "--db", dsn},
	} {
		code, out := runPA(t, lightBound, env, args...)
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d:\n%s\nwant 1 with %q", args[0], code, out, want)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%s printed the password:\n%s", args[0], out)
		}
	}
}

// Two machines replay one corpus into one PostgreSQL store at once, each its shard
// (--shard 1/2 and 2/2); together they replay every session once, calibrate and
// backoff read them all, and a later replay of the whole corpus finds every session
// stored.
func TestReplayShardsIntoPostgres(t *testing.T) {
	t.Parallel()
	shared := filepath.Join("..", "..", "..", "shared", "sessions")
	dirs := []string{filepath.Join(shared, "mini-swe-agent"), filepath.Join(shared, "gemini-cli")}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			sessionfiles.Missing(t, "real sessions not available: %v", err)
		}
	}
	dsn := pgtest.URL(t)
	env := testEnv(t)
	var sums [2]replaySummary
	var procs [2]*proc
	for i := range procs {
		args := append([]string{"replay", "--scorer", "lexical", "--db", dsn, "--progress", "none", "--json", "--shard", fmt.Sprintf("%d/2", i+1)}, dirs...)
		procs[i] = startPA(t, "", env, args...)
	}
	for i, p := range procs {
		if code := p.wait(5 * time.Minute); code != 0 {
			t.Fatalf("replay --shard %d/2: exit %d\n%s", i+1, code, p.output())
		}
		if err := json.Unmarshal([]byte(p.stdout.String()), &sums[i]); err != nil {
			t.Fatalf("replay --shard %d/2: %v\n%s", i+1, err, p.output())
		}
	}
	const sessions = 8 // 5 mini-swe-agent and 3 Gemini CLI sessions
	if got := sums[0].Replayed + sums[1].Replayed; got != sessions || sums[0].Replayed == 0 || sums[1].Replayed == 0 ||
		sums[0].OtherShards != sums[1].Replayed || sums[1].OtherShards != sums[0].Replayed {
		t.Fatalf("shards replayed %d and %d sessions (left %d and %d to the other); want %d in all, split", sums[0].Replayed, sums[1].Replayed, sums[0].OtherShards, sums[1].OtherShards, sessions)
	}
	if strings.Contains(sums[0].DB, "password") || sums[0].Shard != "1/2" {
		t.Errorf("summary db %q, shard %q", sums[0].DB, sums[0].Shard)
	}
	var cal calibrateJSON
	runJSON(t, env, &cal, "calibrate", "--db", dsn, "--json")
	if cal.Report.Sessions != sessions || len(cal.Sessions) != sessions {
		t.Errorf("calibrate read %d sessions (%d named); want all %d", cal.Report.Sessions, len(cal.Sessions), sessions)
	}
	var bo backoffJSON
	runJSON(t, env, &bo, "backoff", "--db", dsn, "--json", "--schedules", "1;3,6,12,24")
	if bo.Report.Sessions != sessions || len(bo.Dropped) != 0 {
		t.Errorf("backoff read %d sessions (dropped %v); want all %d", bo.Report.Sessions, bo.Dropped, sessions)
	}
	var again replaySummary
	runJSON(t, env, &again, append([]string{"replay", "--scorer", "lexical", "--db", dsn, "--progress", "none", "--json"}, dirs...)...)
	if again.AlreadyDone != sessions || again.Replayed != 0 {
		t.Errorf("replay of the whole corpus again: %d already stored, %d replayed; want %d and 0", again.AlreadyDone, again.Replayed, sessions)
	}
}

// runJSON runs pruneadvisor with args, which must exit 0, and decodes its stdout
// into out.
func runJSON(t *testing.T, env []string, out any, args ...string) {
	t.Helper()
	p := startPA(t, "", env, args...)
	if code := p.wait(lightBound); code != 0 {
		t.Fatalf("%s: exit %d\n%s", args[0], code, cutOut(p.output(), 4000))
	}
	if err := json.Unmarshal([]byte(p.stdout.String()), out); err != nil {
		t.Fatalf("%s --json: %v\n%s", args[0], err, cutOut(p.stdout.String(), 2000))
	}
}
