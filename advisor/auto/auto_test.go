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

func server(t *testing.T, delay time.Duration) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/version" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprint(w, `{"version":"0.17.4"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

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
		{"ollama answers", context.Background(), server(t, 0), "", "ollama:qwen2.5:0.5b:p1", "INFO",
			[]string{"scorer ollama:qwen2.5:0.5b:p1 (Ollama 0.17.4)"},
			map[string]string{"scorer": "ollama:qwen2.5:0.5b:p1", "ollama_version": "0.17.4"}},
		{"other model", context.Background(), server(t, 0), "llama3.2:1b", "ollama:llama3.2:1b:p1", "INFO",
			[]string{"scorer ollama:llama3.2:1b:p1 (Ollama 0.17.4)"},
			map[string]string{"scorer": "ollama:llama3.2:1b:p1", "ollama_version": "0.17.4"}},
		{"closed port", context.Background(), closedPort(t), "", "lexical", "WARN",
			[]string{"Ollama not reachable (", "connection refused", "); using the lexical scorer"},
			map[string]string{"scorer": "lexical", "kind": "unreachable"}},
		{"slower than the caller's deadline", short, server(t, 5*time.Second), "", "lexical", "WARN",
			[]string{"Ollama not reachable (", "context deadline exceeded"},
			map[string]string{"scorer": "lexical", "kind": "timeout"}},
	}
	for _, tt := range tests {
		var log bytes.Buffer
		s := auto.New(tt.ctx, client(t, tt.url), tt.model, slog.New(slog.NewJSONHandler(&log, nil)))
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
		if (s.Ollama != nil) == (s.Lexical != nil) {
			t.Errorf("%s: want exactly one of Ollama and Lexical", tt.name)
		}
	}
}

// TestPingTimeout: a server that does not answer within PingTimeout (2 s) is
// given up on after about that long.
func TestPingTimeout(t *testing.T) {
	start := time.Now()
	s := auto.New(context.Background(), client(t, server(t, 10*time.Second)), "", nil)
	elapsed := time.Since(start)
	if s.Name() != "lexical" {
		t.Errorf("Name() = %q, want lexical", s.Name())
	}
	if elapsed < auto.PingTimeout || elapsed > auto.PingTimeout+time.Second {
		t.Errorf("gave up after %v, want about %v", elapsed, auto.PingTimeout)
	}
}

func TestFallbackScores(t *testing.T) {
	s := auto.New(context.Background(), client(t, closedPort(t)), "", nil)
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
