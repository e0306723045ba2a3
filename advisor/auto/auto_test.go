package auto_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ollama/ollama/api"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/auto"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/cards"
)

var (
	_ advisor.Scorer = (*auto.Scorer)(nil)
	_ advisor.Scorer = (*ollama.Scorer)(nil)
	_ advisor.Scorer = (*lexical.Scorer)(nil)
)

func client(t *testing.T, raw string) *api.Client {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

// server is an Ollama that answers /api/version after delay and /api/show for
// the models it has: 200 with details, 404 `model 'x' not found` (the real
// server's text, OLLAMA-WIRE.md) for any other; showStatus, when set, is the
// status /api/show answers instead, with {"error":"boom"}.
func server(t *testing.T, delay time.Duration, showStatus int, models ...string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		switch r.URL.Path {
		case "/api/version":
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, `{"version":"0.17.4"}`)
		case "/api/show":
			var req struct {
				Model string `json:"model"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			switch {
			case showStatus != 0:
				w.WriteHeader(showStatus)
				fmt.Fprint(w, `{"error":"boom"}`)
			case slices.Contains(models, req.Model):
				fmt.Fprint(w, `{"details":{"family":"qwen2"},"capabilities":["completion"]}`)
			default:
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprintf(w, `{"error":"model '%s' not found"}`, req.Model)
			}
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// lexicalFallback is what the CLI passes today.
var lexicalFallback = auto.Fallback{Scorer: lexical.New(), Label: "the lexical scorer"}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestChoice(t *testing.T) {
	short, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	both := server(t, 0, 0, "qwen2.5:0.5b", "llama3.2:1b")
	tests := []struct {
		name      string
		ctx       context.Context
		url       string
		model     string
		wantName  string
		wantLevel string
		wantMsg   []string          // substrings of the message
		wantAttrs map[string]string // attributes of the line besides time, level, msg
	}{
		{"ollama answers", context.Background(), both, "", "ollama:qwen2.5:0.5b:p2", "INFO",
			[]string{"scorer ollama:qwen2.5:0.5b:p2 (Ollama 0.17.4)"},
			map[string]string{"scorer": "ollama:qwen2.5:0.5b:p2", "ollama_version": "0.17.4"}},
		{"other model", context.Background(), both, "llama3.2:1b", "ollama:llama3.2:1b:p2", "INFO",
			[]string{"scorer ollama:llama3.2:1b:p2 (Ollama 0.17.4)"},
			map[string]string{"scorer": "ollama:llama3.2:1b:p2", "ollama_version": "0.17.4"}},
		{"model not pulled", context.Background(), server(t, 0, 0, "llama3.2:1b"), "", "lexical", "WARN",
			[]string{"model qwen2.5:0.5b is not pulled: ollama pull qwen2.5:0.5b; using the lexical scorer"},
			map[string]string{"scorer": "lexical", "kind": "not_pulled"}},
		{"/api/show fails", context.Background(), server(t, 0, 500, "qwen2.5:0.5b"), "", "lexical", "WARN",
			[]string{"Ollama 0.17.4 cannot say whether model qwen2.5:0.5b is there (", "HTTP 500: boom", "); using the lexical scorer"},
			map[string]string{"scorer": "lexical", "kind": "http"}},
		{"closed port", context.Background(), closedPort(t), "", "lexical", "WARN",
			[]string{"Ollama not reachable (", "connection refused", "); using the lexical scorer"},
			map[string]string{"scorer": "lexical", "kind": "unreachable"}},
		{"slower than the caller's deadline", short, server(t, 5*time.Second, 0, "qwen2.5:0.5b"), "", "lexical", "WARN",
			[]string{"Ollama not reachable (", "context deadline exceeded"},
			map[string]string{"scorer": "lexical", "kind": "timeout"}},
	}
	for _, tt := range tests {
		var log bytes.Buffer
		s := auto.New(tt.ctx, ollama.New(client(t, tt.url), tt.model), lexicalFallback, slog.New(slog.NewJSONHandler(&log, nil)))
		if got := s.Name(); got != tt.wantName {
			t.Errorf("%s: Name() = %q, want %q", tt.name, got, tt.wantName)
		}
		if n := strings.Count(log.String(), "\n"); n != 1 {
			t.Errorf("%s: %d log lines, want 1:\n%s", tt.name, n, log.String())
		}
		var line map[string]string
		if err := json.Unmarshal(log.Bytes(), &line); err != nil {
			t.Fatalf("%s: log %q: %v", tt.name, log.String(), err)
		}
		if line["level"] != tt.wantLevel || line["msg"] != s.Why {
			t.Errorf("%s: log level %q msg %q, want %q and Why %q", tt.name, line["level"], line["msg"], tt.wantLevel, s.Why)
		}
		for _, w := range tt.wantMsg {
			if !strings.Contains(s.Why, w) {
				t.Errorf("%s: Why %q lacks %q", tt.name, s.Why, w)
			}
		}
		delete(line, "time")
		delete(line, "level")
		delete(line, "msg")
		if diff := cmp.Diff(tt.wantAttrs, line); diff != "" {
			t.Errorf("%s: log attributes (-want +got):\n%s", tt.name, diff)
		}
		if (s.Ollama != nil) == (s.Fallback != nil) {
			t.Errorf("%s: want exactly one of Ollama and Fallback", tt.name)
		}
	}
}

// TestPromptVersion: auto keeps the Ollama scorer as configured (prompt v1 here),
// so its name and Why say p1.
func TestPromptVersion(t *testing.T) {
	o := ollama.New(client(t, server(t, 0, 0, "qwen2.5:0.5b")), "")
	o.Prompt = ollama.PromptV1
	s := auto.New(context.Background(), o, lexicalFallback, nil)
	if s.Ollama != o || s.Name() != "ollama:qwen2.5:0.5b:p1" || !strings.Contains(s.Why, ":p1 ") {
		t.Errorf("chose %q (%s), want the p1 scorer as given", s.Name(), s.Why)
	}
}

// constScorer is a fallback that is not lexical: every card keep 0.3.
type constScorer struct{ calls int }

func (c *constScorer) Name() string { return "fitted:test" }
func (c *constScorer) Score(_ context.Context, b cards.Batch) ([]cards.Score, error) {
	c.calls++
	out := make([]cards.Score, len(b.Cards))
	for i := range out {
		out[i] = cards.Score{Keep: 0.3, OK: true}
	}
	return out, nil
}

// TestInjectedFallback: the fallback is whatever the caller passes (the fitted
// scorer, soon), named in the message by its Label or, without one, its Name.
func TestInjectedFallback(t *testing.T) {
	fb := &constScorer{}
	host := server(t, 0, 0, "llama3.2:1b")
	s := auto.New(context.Background(), ollama.New(client(t, host), ""), auto.Fallback{Scorer: fb, Label: "the fitted scorer (embedded weights)"}, nil)
	if s.Fallback != fb || s.Name() != "fitted:test" ||
		s.Why != "model qwen2.5:0.5b is not pulled: ollama pull qwen2.5:0.5b; using the fitted scorer (embedded weights)" {
		t.Errorf("chose %q: %q", s.Name(), s.Why)
	}
	got, err := s.Score(context.Background(), cards.Batch{Cards: make([]cards.Card, 2)})
	if err != nil || fb.calls != 1 || len(got) != 2 || got[0].Keep != 0.3 {
		t.Errorf("Score = %v, %v after %d calls; want the fallback's", got, err, fb.calls)
	}
	if n := s.RequestTokens(cards.Batch{Cards: make([]cards.Card, 2)}); n != 0 {
		t.Errorf("RequestTokens of the fallback = %d, want 0", n)
	}
	s = auto.New(context.Background(), ollama.New(client(t, closedPort(t)), ""), auto.Fallback{Scorer: fb}, nil)
	if !strings.HasSuffix(s.Why, "); using scorer fitted:test") {
		t.Errorf("Why without a label = %q, want it to name the scorer", s.Why)
	}
}

// TestRequestTokens: with Ollama chosen, auto reports the Ollama scorer's own
// request-size estimate.
func TestRequestTokens(t *testing.T) {
	o := ollama.New(client(t, server(t, 0, 0, "qwen2.5:0.5b")), "")
	s := auto.New(context.Background(), o, lexicalFallback, nil)
	b := cards.Batch{Task: "fix the port", Cards: []cards.Card{{ID: "o1", Tool: "Read", Args: "a.go", Head: "package a"}}}
	if got, want := s.RequestTokens(b), o.RequestTokens(b); got != want || got == 0 {
		t.Errorf("RequestTokens = %d, want the Ollama scorer's %d", got, want)
	}
}

// TestPingTimeout: a server that does not answer within PingTimeout (2 s) is
// given up on after about that long.
func TestPingTimeout(t *testing.T) {
	start := time.Now()
	s := auto.New(context.Background(), ollama.New(client(t, server(t, 10*time.Second, 0, "qwen2.5:0.5b")), ""), lexicalFallback, nil)
	elapsed := time.Since(start)
	if s.Name() != "lexical" {
		t.Errorf("Name() = %q, want lexical", s.Name())
	}
	if elapsed < auto.PingTimeout || elapsed > auto.PingTimeout+time.Second {
		t.Errorf("gave up after %v, want about %v", elapsed, auto.PingTimeout)
	}
}

func TestFallbackScores(t *testing.T) {
	s := auto.New(context.Background(), ollama.New(client(t, closedPort(t)), ""), lexicalFallback, nil)
	got, err := s.Score(context.Background(), cards.Batch{
		Now:   "update config.yaml",
		Cards: []cards.Card{{Tool: "Read", Args: "config.yaml", Head: "port: 8080"}, {Tool: "Bash", Args: "ls", Head: "a b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !got[0].OK || !got[1].OK || got[0].Keep <= got[1].Keep || got[1].Keep != 0 {
		t.Errorf("lexical fallback scores = %+v, want config.yaml above ls (0)", got)
	}
}

func TestFailKind(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, canceled := lexical.New().Score(ctx, cards.Batch{Now: "x y"})
	_, empty := lexical.New().Score(context.Background(), cards.Batch{})
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{empty, "empty_query"},
		{canceled, "canceled"},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("x: %w", ollama.ErrInvalidAnswer), "invalid"},
		{fmt.Errorf("x: %w", ollama.ErrHTTP), "http"},
		{fmt.Errorf("x: %w", ollama.ErrNotPulled), "not_pulled"},
		{errors.New("x"), "other"},
	}
	for _, tt := range tests {
		if got := auto.FailKind(tt.err); got != tt.want {
			t.Errorf("FailKind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	// The advisor counts failures by a Kind() string method along the error chain;
	// the sentinels of both scorers carry it.
	for _, err := range []error{empty, fmt.Errorf("x: %w", ollama.ErrInvalidAnswer), fmt.Errorf("x: %w", ollama.ErrUnreachable)} {
		var k interface{ Kind() string }
		if !errors.As(err, &k) || k.Kind() != auto.FailKind(err) {
			t.Errorf("%v: no Kind() %q along the chain", err, auto.FailKind(err))
		}
	}
}

// TestRealAuto runs against a real Ollama server when PRUNEADVISOR_TEST_OLLAMA_HOST
// (a loopback host, as OLLAMA_HOST) and PRUNEADVISOR_TEST_OLLAMA_MODEL (a pulled
// model) are set: the model is chosen, and a model that is not pulled falls back
// saying how to pull it. Skipped otherwise, saying so.
func TestRealAuto(t *testing.T) {
	host, model := os.Getenv("PRUNEADVISOR_TEST_OLLAMA_HOST"), os.Getenv("PRUNEADVISOR_TEST_OLLAMA_MODEL")
	if host == "" || model == "" {
		t.Skip("no real Ollama server: set PRUNEADVISOR_TEST_OLLAMA_HOST (e.g. 127.0.0.1:11434) and PRUNEADVISOR_TEST_OLLAMA_MODEL (e.g. qwen2.5:0.5b) to run this against one")
	}
	t.Setenv("OLLAMA_HOST", host)
	c, err := api.ClientFromEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	if s := auto.New(context.Background(), ollama.New(c, model), lexicalFallback, nil); s.Ollama == nil {
		t.Errorf("model %s at %s: chose %s: %s", model, host, s.Name(), s.Why)
	} else {
		t.Log(s.Why)
	}
	s := auto.New(context.Background(), ollama.New(c, "pruneadvisor-no-such-model"), lexicalFallback, nil)
	want := "model pruneadvisor-no-such-model is not pulled: ollama pull pruneadvisor-no-such-model; using the lexical scorer"
	if s.Fallback == nil || s.Why != want {
		t.Errorf("a model that is not pulled: chose %s: %q, want %q", s.Name(), s.Why, want)
	}
	t.Log(s.Why)
}
