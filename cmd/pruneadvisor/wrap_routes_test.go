package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/wire"
)

// Every model call of every agent wrap starts, at the base URL wrap gives the agent's
// client and with the credential the agent sends, reaches the upstream of the
// call's own provider through a real proxy, not refused and not another's; and the
// base URLs are the ones each agent's launch sets (pi's in its extension).
func TestWrapCallsRouted(t *testing.T) {
	var mu sync.Mutex
	reached := map[string][]string{"anthropic": nil, "openai": nil, "gemini": nil} // provider -> paths
	ups := map[string]string{}
	for _, p := range []string{"anthropic", "openai", "gemini"} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			mu.Lock()
			reached[p] = append(reached[p], r.URL.Path)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{}`)
		}))
		t.Cleanup(up.Close)
		ups[p] = up.URL
	}
	db, err := storage.Open(context.Background(), filepath.Join(t.TempDir(), "pa.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	srv, err := server.New(server.Options{Store: db, Logger: slog.New(slog.DiscardHandler),
		AnthropicUpstream: ups["anthropic"], OpenAIUpstream: ups["openai"], GeminiUpstream: ups["gemini"]})
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(srv.Handler())
	t.Cleanup(proxy.Close)
	t.Cleanup(func() { _ = srv.Flush(context.Background()) })
	// The provider each API's calls belong to, written out.
	owner := map[wire.API]string{wire.Messages: "anthropic", wire.Chat: "openai", wire.Responses: "openai", wire.Gemini: "gemini"}
	for _, a := range agents {
		if len(a.calls) == 0 {
			t.Errorf("%s: no model calls listed", a.name)
		}
		l := &launch{proxy: "http://127.0.0.1:9", mcpCmd: []string{"pruneadvisor", "mcp"}, cache: t.TempDir(),
			env: map[string]string{}, files: map[string][]byte{}, hdrs: recallHeaders(a, ""), calls: a.calls,
			getenv: func(string) string { return "" }}
		if err := a.launch(l); err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		launched := strings.Join(l.args, " ") + " " + string(piExtension)
		for _, v := range l.env {
			launched += " " + v
		}
		for _, c := range a.calls {
			base := l.proxy + c.base
			if a.name == "pi" {
				base = map[string]string{"": "baseUrl: BASE,", "/v1": "baseUrl: `${BASE}/v1`", "/v1beta": "baseUrl: `${BASE}/v1beta`"}[c.base]
			}
			if !strings.Contains(launched, base) {
				t.Errorf("%s: %s's base URL %s is not in its launch", a.name, c.api, base)
			}
			req, _ := http.NewRequest(http.MethodPost, proxy.URL+c.base+c.path, strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			switch c.cred {
			case wire.Authorization:
				req.Header.Set(c.cred.Name, "Bearer not-a-real-token")
			default:
				req.Header.Set(c.cred.Name, "not-a-real-key")
			}
			if c.api == wire.Messages {
				req.Header.Set("anthropic-version", "2023-06-01")
			}
			before := map[string]int{}
			mu.Lock()
			for p, paths := range reached {
				before[p] = len(paths)
			}
			mu.Unlock()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			for p, paths := range reached {
				n := len(paths) - before[p]
				if want := owner[c.api]; (p == want) != (n == 1) || n > 1 {
					t.Errorf("%s: %s with %s: %d requests reached %s (want them at %s; status %d %s)", a.name, c.path, c.cred, n, p, want, resp.StatusCode, b)
				}
			}
			mu.Unlock()
		}
	}
}
