package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// upstreamHosts are the fuzzed proxy's upstreams, one host per provider, answered
// in the process by hostTransport.
var upstreamHosts = map[string]string{"anthropic.test": "anthropic", "openai.test": "openai", "gemini.test": "gemini"}

// hostTransport records the provider of every request that reaches an upstream,
// with the request's headers and raw query as the upstream gets them.
type hostTransport struct {
	mu   sync.Mutex
	hits []hit
}

type hit struct {
	provider string
	header   http.Header
	rawQuery string
}

func (h *hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	h.mu.Lock()
	h.hits = append(h.hits, hit{upstreamHosts[r.URL.Host], r.Header.Clone(), r.URL.RawQuery})
	h.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"ok":true}`)), Request: r}, nil
}

func (h *hostTransport) take() []hit {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.hits
	h.hits = nil
	return out
}

// laxQueryHas reports whether a raw query carries a value for name as a lenient
// upstream might read it: pairs split at & and ;, the name compared without case
// after unescaping.
func laxQueryHas(raw, name string) bool {
	for _, pair := range strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(pair, "=")
		if u, err := url.QueryUnescape(k); err == nil {
			k = u
		}
		if v != "" && strings.EqualFold(strings.TrimSpace(k), name) {
			return true
		}
	}
	return false
}

// FuzzRoute sends requests of random method, path, query and credential and version
// headers through the proxy's handler: no request carrying one provider's
// credential ever reaches another provider's upstream. An Anthropic key
// (X-Api-Key) reaches only Anthropic's, a Google key (X-Goog-Api-Key, key=) only
// Gemini's, and a bearer token OpenAI's, or Anthropic's on /v1/messages or beside
// anthropic-version, or Gemini's on /v1beta; a request reaches one upstream at most.
func FuzzRoute(f *testing.F) {
	seeds := []struct {
		method                               byte
		path, query, antKey, googKey, bearer string
		version                              bool
	}{
		{0, "/v1/messages", "", "sk-ant-1", "", "", true},
		{0, "/v1/messages", "", "", "", "Bearer oauth", true},
		{1, "/v1/models", "", "sk-ant-1", "", "", false},
		{1, "/v1/models", "", "", "AIza-1", "", false},
		{1, "/v1/files", "key=AIza-2", "", "", "Bearer sk-1", false},
		{0, "/v1/chat/completions", "", "sk-ant-1", "", "Bearer sk-1", false},
		{0, "/v1beta/models/g:generateContent", "alt=sse&key=AIza-3", "", "", "", false},
		{0, "/v1beta/models/g:streamGenerateContent", "alt=sse", "", "", "Bearer ya29", false},
		{1, "/v1/files", "KEY=AIza;x=1", "", "", "Bearer sk-1", false},
		{0, "/v1/responses", "", "", "AIza-1", "Bearer sk-1", false},
		{1, "/v1/models", "", "", "", "", true},
		{1, "/v1/models", "", "", "+AIza-1", "Bearer sk-1", false},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, s.antKey, s.googKey, s.bearer, s.version)
	}
	dir := f.TempDir()
	db, err := storage.Open(context.Background(), filepath.Join(dir, "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	up := &hostTransport{}
	srv, err := server.New(server.Options{
		Config: testConfig(), Scorer: noiseScorer, Store: db, Logger: slog.New(slog.DiscardHandler),
		AnthropicUpstream: "http://anthropic.test", OpenAIUpstream: "http://openai.test", GeminiUpstream: "http://gemini.test",
		Transport: up,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = srv.Flush(context.Background()) })
	h := srv.Handler()
	methods := []string{http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodPut}
	f.Fuzz(func(t *testing.T, method byte, path, query, antKey, googKey, bearer string, version bool) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#") {
			return
		}
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
		req.Method = methods[int(method)%len(methods)]
		req.URL.Path, req.URL.RawPath, req.URL.RawQuery = path, "", query
		req.RequestURI = req.URL.RequestURI()
		if req.Method == http.MethodPost {
			req.Body, req.ContentLength = io.NopCloser(strings.NewReader(`{}`)), 2
		}
		for name, v := range map[string]string{"X-Api-Key": antKey, "X-Goog-Api-Key": googKey, "Authorization": bearer} {
			if v != "" {
				if v[0] == '+' { // an empty value before it, as a client may send
					req.Header.Add(name, "")
				}
				req.Header.Add(name, v)
			}
		}
		if version {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		hits := up.take()
		if len(hits) > 1 {
			t.Fatalf("%s %s reached %d upstreams", req.Method, path, len(hits))
		}
		if len(hits) == 0 {
			return
		}
		got := hits[0]
		sent := func(name string) bool { return strings.Join(got.header.Values(name), "") != "" }
		fam := func(prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }
		switch {
		case sent("X-Api-Key") && got.provider != "anthropic":
			t.Fatalf("%s %s: an Anthropic key reached %s", req.Method, path, got.provider)
		case (sent("X-Goog-Api-Key") || laxQueryHas(got.rawQuery, "key")) && got.provider != "gemini":
			t.Fatalf("%s %s?%s: a Google key reached %s", req.Method, path, got.rawQuery, got.provider)
		case sent("Authorization") && got.provider == "anthropic" && !fam("/v1/messages") && !sent("Anthropic-Version"):
			t.Fatalf("%s %s: a bearer token reached anthropic without its route or version header", req.Method, path)
		case sent("Authorization") && got.provider == "gemini" && !fam("/v1beta"):
			t.Fatalf("%s %s: a bearer token reached gemini off its routes", req.Method, path)
		}
	})
}
