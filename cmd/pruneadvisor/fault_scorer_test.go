package main

// Scorer faults: a fake Ollama server (OLLAMA-WIRE.md: GET /api/version, POST
// /api/chat, non-streaming) fails in every way the real one can; the advisor must
// prune nothing on its account, count the failure by kind (advise --json and serve's
// /metrics), and ask again only when the back-off says so.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/backoff"
)

// fakeOllama answers /api/version and /api/chat; mode picks the /api/chat fault.
type fakeOllama struct {
	mu    sync.Mutex
	mode  string
	chats int // /api/chat requests received
	t     testing.TB
	// delay is how long each /api/chat takes before it answers (the model
	// generating), unless the client gives up first; 0 answers at once.
	delay time.Duration
}

// scorerTimeout is the --scorer-timeout of every run here; the "slow" fault answers
// after ten times it.
const scorerTimeout = 300 * time.Millisecond

// cardKeys finds the card ids ("c1", "c2", ...) in the prompt, in order.
var cardKeys = regexp.MustCompile(`(?m)^\[(c\d+)\] `)

func (f *fakeOllama) setMode(m string) {
	f.mu.Lock()
	f.mode = m
	f.mu.Unlock()
}

func (f *fakeOllama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if r.Method == http.MethodGet && r.URL.Path == "/api/version" {
		fmt.Fprint(w, `{"version":"0.17.4"}`)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/api/chat" {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `404 page not found`)
		return
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":%q}`, err.Error())
		return
	}
	var keys []string
	for _, m := range req.Messages {
		for _, k := range cardKeys.FindAllStringSubmatch(m.Content, -1) {
			keys = append(keys, k[1])
		}
	}
	f.mu.Lock()
	f.chats++
	mode, delay := f.mode, f.delay
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-r.Context().Done():
			return // the client gave up: the real server drops the request (OLLAMA-WIRE.md)
		case <-time.After(delay):
		}
	}
	// answer gives every card in ks keep 10 (a value of vals where set), then extra.
	answer := func(ks []string, vals map[string]string, extra string) string {
		var b strings.Builder
		b.WriteString("{\n\t")
		for i, k := range ks {
			if i > 0 {
				b.WriteString(",\n\t")
			}
			v, ok := vals[k]
			if !ok {
				v = "10"
			}
			fmt.Fprintf(&b, "%q: %s", k, v)
		}
		b.WriteString(extra + "\n}")
		return b.String()
	}
	content := ""
	switch mode {
	case "ok":
		content = answer(keys, nil, "")
	case "reset":
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			f.t.Errorf("hijack: %v", err)
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 400\r\n\r\n")
		buf.WriteString(`{"model":"` + req.Model + `","created_at":"2026-11-30T10:54:58.076234093Z","message":{"role":"assistant","content":"{\n\t\"c1\": 4`)
		buf.Flush()
		time.Sleep(20 * time.Millisecond)
		conn.(*net.TCPConn).SetLinger(0) // close with RST
		conn.Close()
		return
	case "slow":
		select {
		case <-r.Context().Done():
		case <-time.After(10 * scorerTimeout):
		}
		return
	case "http500":
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":"llama runner process has terminated: signal: killed"}`)
		return
	case "http503":
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"server busy, please try again. maximum pending requests exceeded"}`)
		return
	case "not-done":
		b, _ := json.Marshal(map[string]any{"model": req.Model, "created_at": "2026-11-30T10:54:58.076234093Z",
			"message": map[string]any{"role": "assistant", "content": `{"c1": 1111111111111111111111111111111`}, "done": false})
		w.Write(b)
		return
	case "body-not-json":
		fmt.Fprint(w, `{"model":"`+req.Model+`","message":{"role":"assist`)
		return
	case "content-not-json":
		content = `{"c1": 40, "c2"`
	case "ids-missing":
		content = answer(keys[:len(keys)-1], nil, "")
	case "ids-extra":
		content = answer(keys, nil, ",\n\t\"c999\": 10")
	case "ids-repeated":
		content = answer(keys, nil, ",\n\t\"c1\": 10")
	case "value-101":
		content = answer(keys, map[string]string{"c1": "101"}, "")
	case "value-minus-1":
		content = answer(keys, map[string]string{"c1": "-1"}, "")
	case "value-1e308":
		content = answer(keys, map[string]string{"c1": "1e308"}, "")
	case "prose":
		content = "I would keep the README because it explains the setup, and drop the rest."
	default:
		f.t.Errorf("fake ollama: unknown mode %q", mode)
	}
	b, _ := json.Marshal(map[string]any{
		"model": req.Model, "created_at": "2026-11-30T10:54:58.076234093Z",
		"message": map[string]any{"role": "assistant", "content": content},
		"done":    true, "done_reason": "stop", "total_duration": 6983019806, "load_duration": 2293117679,
		"prompt_eval_count": 900, "prompt_eval_duration": 5584903, "eval_count": 40, "eval_duration": 893190778,
	})
	w.Write(b)
}

// requests returns how many /api/chat requests the fake got.
func (f *fakeOllama) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.chats
}

func newFakeOllama(t *testing.T, mode string) (*fakeOllama, string) {
	f := &fakeOllama{mode: mode, t: t}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// closedPort returns an address on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// scorerFaults are the /api/chat faults with the failure kind each must be counted
// under ("refused" is a server that is not there at all).
var scorerFaults = []struct{ mode, kind string }{
	{"refused", "unreachable"},
	{"reset", "unreachable"},
	{"slow", "timeout"},
	{"http500", "http"},
	{"http503", "http"},
	{"not-done", "truncated"},
	{"body-not-json", "unreachable"},
	{"content-not-json", "invalid"},
	{"ids-missing", "invalid"},
	{"ids-extra", "invalid"},
	{"ids-repeated", "invalid"},
	{"value-101", "invalid"},
	{"value-minus-1", "invalid"},
	{"value-1e308", "invalid"},
	{"prose", "invalid"},
}

// adviseJSON is the part of `advise --json` these tests read.
type adviseJSON struct {
	Summary adviseSummary `json:"summary"`
	Plan    struct {
		Items []struct {
			Key      string  `json:"key"`
			Decision string  `json:"decision"`
			Reason   string  `json:"reason"`
			Score    float64 `json:"score"`
		} `json:"items"`
	} `json:"plan"`
}

// TestScorerFaultsAdvise runs `advise --scorer ollama` on fix-port.jsonl against each
// fault. With a 4,000-token budget the session is over budget from its fourth step,
// so every kept candidate is re-asked on the back-off schedule.
func TestScorerFaultsAdvise(t *testing.T) {
	t.Parallel() // mostly waiting (timeouts, busy locks, processes): overlap with the rest
	session, err := filepath.Abs(filepath.Join("..", "..", "testdata", "sessions", "fix-port.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sched := backoff.Default()
	advise := func(t *testing.T, host string) (adviseJSON, string, string) {
		t.Helper()
		db := filepath.Join(t.TempDir(), "a.db")
		p := startPA(t, "", testEnv(t, "OLLAMA_HOST="+host), "advise", session, "--scorer", "ollama",
			"--scorer-timeout", scorerTimeout.String(), "--budget", "4000", "--json", "--db", db)
		if code := p.wait(lightBound); code != 0 || panicked.MatchString(p.output()) {
			t.Fatalf("advise: exit %d:\n%s", code, cutOut(p.output(), 3000))
		}
		var got adviseJSON
		if err := json.Unmarshal([]byte(p.stdout.String()), &got); err != nil {
			t.Fatalf("advise --json: %v\n%s", err, cutOut(p.stdout.String(), 2000))
		}
		return got, db, p.stderr.String()
	}

	// The healthy server answers keep 0.10 for every card: pruned on score.
	t.Run("healthy", func(t *testing.T) {
		f, host := newFakeOllama(t, "ok")
		got, _, _ := advise(t, host)
		if len(got.Summary.ScorerFailures) != 0 || got.Summary.PrunedByReason["score"] == 0 || f.requests() == 0 {
			t.Errorf("healthy scorer: failures %v, pruned %v after %d requests; want none, some on score",
				got.Summary.ScorerFailures, got.Summary.PrunedByReason, f.requests())
		}
	})
	for _, fc := range scorerFaults {
		t.Run(fc.mode, func(t *testing.T) {
			host := closedPort(t)
			var f *fakeOllama
			if fc.mode != "refused" {
				f, host = newFakeOllama(t, fc.mode)
			}
			start := time.Now()
			got, db, stderr := advise(t, host)
			s := got.Summary
			// The failure is said once, on stderr, with its cause.
			if n := strings.Count(stderr, "scorer failed; nothing pruned on its account"); n != 1 {
				t.Errorf("the failure is logged %d times; want once:\n%s", n, stderr)
			}
			if s.Asks == 0 {
				t.Fatalf("no asks: %+v", s)
			}
			if d := len(s.ScorerFailures); d != 1 || s.ScorerFailures[fc.kind] != s.Asks {
				t.Errorf("scorer_failures %v; want {%q: %d} (every ask)", s.ScorerFailures, fc.kind, s.Asks)
			}
			if n := s.PrunedByReason["score"]; n != 0 {
				t.Errorf("%d outputs pruned on a score the scorer never gave", n)
			}
			for _, it := range got.Plan.Items {
				if strings.HasPrefix(it.Reason, "score") || it.Score >= 0 {
					t.Errorf("plan item %s: %s %q score %v; want no score", it.Key, it.Decision, it.Reason, it.Score)
				}
			}
			// The store holds every ask as failed, by kind, and the re-asks follow the
			// schedule: the k-th re-ask of an output exactly Gap(k) steps after the
			// previous ask.
			rows := querySQL(t, db, `SELECT output_key, step, ok, fail_kind FROM asks ORDER BY output_key, step`)
			if len(rows) != s.Asks {
				t.Errorf("%d asks stored; the summary says %d", len(rows), s.Asks)
			}
			steps := map[string][]int{}
			for _, r := range rows {
				if r[2] != "0" || r[3] != fc.kind {
					t.Errorf("ask %v stored as ok=%s kind %q; want failed, %q", r[:2], r[2], r[3], fc.kind)
				}
				n, _ := strconv.Atoi(r[1])
				steps[r[0]] = append(steps[r[0]], n)
			}
			reasks := 0
			for key, st := range steps {
				for i := 1; i < len(st); i++ {
					reasks++
					if gap := st[i] - st[i-1]; gap != sched.Gap(i) {
						t.Errorf("output %s asked at steps %v: re-ask %d came %d steps after the previous; the schedule says %d",
							key, st, i, gap, sched.Gap(i))
					}
				}
			}
			if reasks == 0 {
				t.Errorf("no output was asked twice (steps %v): the back-off is not exercised", steps)
			}
			if f != nil && f.requests() == 0 {
				t.Errorf("the fake server got no /api/chat request")
			}
			t.Logf("%s: %d asks (%d re-asks) failed as %q in %.1fs", fc.mode, s.Asks, reasks, fc.kind, time.Since(start).Seconds())
		})
	}
}

// faultMessages is an OpenAI message list of seven steps, each reading a file of
// about 480 tokens, then says it is done: at step 9 the outputs of steps 1-5 are candidates.
func faultMessages() string {
	var b strings.Builder
	b.WriteString(`[{"role":"user","content":"Review the modules and fix the failing test."}`)
	for i := 1; i <= 7; i++ {
		var text strings.Builder
		for j := range 30 {
			fmt.Fprintf(&text, "func module%dFunction%d(x int) int { return x * %d }\n", i, j, j)
		}
		body, _ := json.Marshal(text.String())
		fmt.Fprintf(&b, `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"mod%d.go\"}"}}]}`, i, i)
		fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":%s}`, i, body)
	}
	b.WriteString(`,{"role":"assistant","content":"Reading done."}]`)
	return b.String()
}

// failuresMetric matches one series of pruneadvisor_scorer_failures_total.
var failuresMetric = regexp.MustCompile(`(?m)^pruneadvisor_scorer_failures_total\{kind="([a-z_]+)"\} (\d+)$`)

// TestScorerFaultsServe sends one POST /v1/advise per fault to a running serve whose
// Ollama is the fake: the plan counts every card as a failure of its kind, nothing
// is pruned on a score, and /metrics adds the cards to
// pruneadvisor_scorer_failures_total{kind}.
func TestScorerFaultsServe(t *testing.T) {
	t.Parallel() // mostly waiting (timeouts, busy locks, processes): overlap with the rest
	f, host := newFakeOllama(t, "ok")
	up := upstream(t)
	serveArgs := func(t *testing.T) []string {
		// Asks on the request path, so that each fault shows in the plan of the
		// request that asked (background asks: TestServeNeverWaitsForScorer, and
		// advisor TestBackgroundNeverAnswers).
		return []string{"--db", filepath.Join(t.TempDir(), "s.db"), "--scorer", "ollama", "--background-asks", "off",
			"--scorer-timeout", scorerTimeout.String(), "--openai-upstream", up.URL, "--anthropic-upstream", up.URL}
	}
	srv := startServe(t, testEnv(t, "OLLAMA_HOST="+host), serveArgs(t)...)
	// A serve whose Ollama is not there at all.
	refused := startServe(t, testEnv(t, "OLLAMA_HOST="+closedPort(t)), serveArgs(t)...)
	msgs := faultMessages()
	type plan struct {
		Plan struct {
			Asked          int            `json:"asked"`
			ScorerFailures map[string]int `json:"scorer_failures"`
			Items          []struct {
				Key      string  `json:"key"`
				Decision string  `json:"decision"`
				Reason   string  `json:"reason"`
				Score    float64 `json:"score"`
			} `json:"items"`
		} `json:"plan"`
	}
	metrics := func(t *testing.T, s *served) map[string]int {
		code, body := s.get(t, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, cutOut(body, 500))
		}
		m := map[string]int{}
		for _, sm := range failuresMetric.FindAllStringSubmatch(body, -1) {
			m[sm[1]], _ = strconv.Atoi(sm[2])
		}
		return m
	}
	for _, fc := range append([]struct{ mode, kind string }{{"ok", ""}}, scorerFaults...) {
		t.Run(fc.mode, func(t *testing.T) {
			s := srv
			if fc.mode == "refused" {
				s = refused
			} else {
				f.setMode(fc.mode)
			}
			before := metrics(t, s)
			body := fmt.Sprintf(`{"session_id":"fault-%s","format":"openai","budget":2000,"messages":%s}`, fc.mode, msgs)
			code, resp := s.post(t, "/v1/advise", []byte(body))
			if code != http.StatusOK {
				t.Fatalf("/v1/advise: %d %s", code, cutOut(resp, 1000))
			}
			var p plan
			if err := json.Unmarshal([]byte(resp), &p); err != nil {
				t.Fatalf("%v: %s", err, cutOut(resp, 1000))
			}
			if p.Plan.Asked != 5 {
				t.Errorf("asked %d cards; want the 5 outputs of steps 1-5", p.Plan.Asked)
			}
			after := metrics(t, s)
			if fc.mode == "ok" {
				if len(p.Plan.ScorerFailures) != 0 {
					t.Errorf("healthy scorer: failures %v", p.Plan.ScorerFailures)
				}
				scored := 0
				for _, it := range p.Plan.Items {
					if strings.HasPrefix(it.Reason, "score 0.10 < cutoff") {
						scored++
					}
				}
				if scored != 5 {
					t.Errorf("healthy scorer: %d items below the cutoff on score 0.10; want 5:\n%s", scored, cutOut(resp, 3000))
				}
				return
			}
			if d := len(p.Plan.ScorerFailures); d != 1 || p.Plan.ScorerFailures[fc.kind] != p.Plan.Asked {
				t.Errorf("plan scorer_failures %v; want {%q: %d}", p.Plan.ScorerFailures, fc.kind, p.Plan.Asked)
			}
			for _, it := range p.Plan.Items {
				if strings.HasPrefix(it.Reason, "score") || it.Score >= 0 || it.Decision == "pending" || it.Decision == "pruned" {
					t.Errorf("item %s: %s %q score %v; want kept without a score", it.Key, it.Decision, it.Reason, it.Score)
				}
			}
			if got := after[fc.kind] - before[fc.kind]; got != p.Plan.Asked {
				t.Errorf("pruneadvisor_scorer_failures_total{kind=%q} grew by %d (%d -> %d); want %d",
					fc.kind, got, before[fc.kind], after[fc.kind], p.Plan.Asked)
			}
		})
	}
}
