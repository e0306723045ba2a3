package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/server"
)

// slowCardKeys finds the card ids ("c1", "c2", ...) in an Ollama prompt.
var slowCardKeys = regexp.MustCompile(`(?m)^\[(c\d+)\] `)

// slowOllama is a stand-in Ollama server (OLLAMA-WIRE.md: non-streaming POST
// /api/chat, an answer padded with whitespace, done true, durations in
// nanoseconds) whose every /api/chat takes delay, unless the client gives up
// first (the real server then drops the request), and scores every card 10.
func slowOllama(tb testing.TB, delay time.Duration) *ollama.Scorer {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if r.URL.Path == "/api/version" {
			fmt.Fprint(w, `{"version":"0.17.4"}`)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/api/chat" || json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"bad request"}`)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(delay):
		}
		var parts []string
		for _, m := range req.Messages {
			for _, k := range slowCardKeys.FindAllStringSubmatch(m.Content, -1) {
				parts = append(parts, fmt.Sprintf("%q :\t10", k[1]))
			}
		}
		b, _ := json.Marshal(map[string]any{
			"model": req.Model, "created_at": "2026-11-30T10:54:58.076234093Z",
			"message": map[string]any{"role": "assistant", "content": "{\n\t" + strings.Join(parts, " ,\n\t") + "}\n\t "},
			"done":    true, "done_reason": "stop", "total_duration": delay.Nanoseconds(), "load_duration": 120000000,
			"prompt_eval_count": 900, "prompt_eval_duration": 5584903, "eval_count": 40, "eval_duration": 893190778,
		})
		w.Write(b)
	}))
	tb.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return ollama.New(api.NewClient(u, srv.Client()), "tiny")
}

// slowConfig is the default configuration with a 20,000-token budget and the
// rewrite forced by the budget unpriced, so the sessions here prune.
func slowConfig() advisor.Config {
	cfg := advisor.DefaultConfig()
	cfg.Budget = 20_000
	cfg.PriceForced = false
	return cfg
}

// TestBackgroundAsksProxy: with Options.BackgroundAsks no proxied request waits
// for a scorer that takes 2 s per ask (each request within 1 s, the median within
// 200 ms, under -race too), the scores stub outputs a few requests later, and
// Close leaves no ask running.
func TestBackgroundAsksProxy(t *testing.T) {
	up := &discardTransport{keep: true}
	env := newProxy(t, server.Options{Config: slowConfig(), Scorer: slowOllama(t, 2*time.Second),
		BackgroundAsks: true, AnthropicUpstream: "http://upstream.invalid", Transport: up})
	t.Cleanup(env.srv.Close)
	h := env.srv.Handler()
	sess := &bigSession{s: 7}
	var took []time.Duration
	stubbed := 0
	for n := 1; n <= 16; n++ {
		took = append(took, send(t, h, "slow-bg", sess.body(n)))
		stubbed = strings.Count(string(up.last), "[pruned:")
		time.Sleep(300 * time.Millisecond)
	}
	sorted := slices.Sorted(slices.Values(took))
	if worst, median := sorted[len(sorted)-1], sorted[len(sorted)/2]; worst > time.Second || median > 200*time.Millisecond {
		t.Errorf("request times %v: slowest %v (want <= 1s), median %v (want <= 200ms)", took, worst, median)
	}
	if stubbed == 0 {
		t.Errorf("no stub in the 16th request's body")
	}
	env.srv.Close()
	if n := env.srv.AsksRunning(); n != 0 {
		t.Errorf("%d asks running after Close", n)
	}
}

// BenchmarkSlowScorer measures what the proxy adds to an Anthropic Messages
// request when its scorer is a stand-in Ollama taking PA_SLOW_DELAY (default 3 s,
// issue 32's figure) per /api/chat: sessions of 20 requests (1 to 20 turns of
// about 2,700 tokens, bigSession), a 20,000-token budget, with the asks in the
// background and on the request path. ns/op is the mean request; p50-ms, p99-ms
// and max-ms are over the requests; each body also goes through a bare
// httputil.ReverseProxy into the same upstream transport (bare-p50-ms,
// bare-p99-ms), and added-p50-ms, added-p99-ms are the proxy's percentiles minus
// the bare proxy's. Run with -benchtime=40x (two sessions): on the request path
// each request with a due card waits the whole delay.
func BenchmarkSlowScorer(b *testing.B) {
	delay := 3 * time.Second
	if v := os.Getenv("PA_SLOW_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		delay = d
	}
	benchScorer(b, func(b *testing.B) *ollama.Scorer { return slowOllama(b, delay) })
}

// BenchmarkRealScorer is BenchmarkSlowScorer with the scorer asking a real Ollama
// server: the loopback host PRUNEADVISOR_TEST_OLLAMA_HOST names (as OLLAMA_HOST)
// and the model PRUNEADVISOR_TEST_OLLAMA_MODEL names (docs/SCORERS.md "Tests
// against a real Ollama server"; docs/PERFORMANCE.md records a run with the tiny
// model of internal/tinymodel). The model is loaded (one ask) before the timed
// requests. Skipped, saying so, without the variables.
func BenchmarkRealScorer(b *testing.B) {
	host, model := os.Getenv("PRUNEADVISOR_TEST_OLLAMA_HOST"), os.Getenv("PRUNEADVISOR_TEST_OLLAMA_MODEL")
	if host == "" || model == "" {
		b.Skip("no real Ollama server: set PRUNEADVISOR_TEST_OLLAMA_HOST (e.g. 127.0.0.1:11434) and PRUNEADVISOR_TEST_OLLAMA_MODEL (e.g. qwen2.5:0.5b) to run this against one")
	}
	b.Setenv("OLLAMA_HOST", host)
	client, err := api.ClientFromEnvironment()
	if err != nil {
		b.Fatal(err)
	}
	raw := host
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	if u, err := url.Parse(raw); err != nil || !isLoopback(u.Hostname()) {
		b.Fatalf("PRUNEADVISOR_TEST_OLLAMA_HOST=%q: not a loopback address (benchmarks send traffic to loopback only)", host)
	}
	benchScorer(b, func(b *testing.B) *ollama.Scorer {
		s := ollama.New(client, model)
		s.Timeout = 120 * time.Second // a cold load on a busy CPU
		if _, err := s.Version(context.Background()); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Score(context.Background(), cards.Batch{Task: "load the model",
			Cards: []cards.Card{{ID: "warm", Tool: "Read", Args: "README.md", Head: "hello", Chars: 5, Age: 1}}}); err != nil {
			b.Logf("loading the model: %v (the benchmark goes on: a scorer that fails leaves cards unscored)", err)
		}
		return s
	})
}

// isLoopback reports whether host is a loopback IP or resolves only to loopback
// addresses.
func isLoopback(host string) bool {
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// benchScorer runs BenchmarkSlowScorer's sessions with the scorer newScorer
// returns, asks in the background and on the request path.
func benchScorer(b *testing.B, newScorer func(*testing.B) *ollama.Scorer) {
	for _, bg := range []bool{true, false} {
		name := "background"
		if !bg {
			name = "on-path"
		}
		b.Run(name, func(b *testing.B) {
			up := &discardTransport{}
			env := newProxy(b, server.Options{Config: slowConfig(), Scorer: newScorer(b),
				BackgroundAsks: bg, AnthropicUpstream: "http://upstream.invalid", Transport: up})
			b.Cleanup(env.srv.Close)
			h, bare := env.srv.Handler(), bareProxy(up)
			var lat, bareLat []time.Duration
			var sess *bigSession
			b.ResetTimer() // ns/op without the set-up (the real scorer's model load)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if i%20 == 0 {
					sess = &bigSession{s: 3000 + i/20}
				}
				body := sess.body(1 + i%20)
				bareLat = append(bareLat, send(b, bare, "bare", body))
				b.StartTimer()
				lat = append(lat, send(b, h, fmt.Sprintf("slow-%s-%d", name, i/20), body))
			}
			b.StopTimer()
			reportLatency(b, "", lat)
			reportAdded(b, lat, bareLat)
			_ = env.srv.Flush(context.Background())
		})
	}
}
