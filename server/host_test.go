package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/server"
)

// Without a token only loopback hosts and --allowed-hosts are answered, on every
// route (DNS rebinding: a page on evil.example pointed at 127.0.0.1 sends
// Host: evil.example); with a token every host is.
func TestHostCheck(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { _, _ = w.Write([]byte(`{}`)) })
	plain := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL})
	allowed := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL, AllowedHosts: []string{"pa.internal", "*.dev.example", "10.0.0.7"}})
	token := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL, Token: "s3cret"})
	routes := []struct{ method, path, body string }{
		{"GET", "/healthz", ""},
		{"GET", "/metrics", ""},
		{"GET", "/v1/recall/o_0123456789", ""},
		{"POST", "/v1/advise", `{"session_id":"h","format":"openai","messages":[]}`},
		{"POST", "/v1/chat/completions", `{"messages":[]}`},
		{"POST", "/v1/messages", `{"messages":[]}`},
		{"GET", "/v1/models", ""},
	}
	tests := []struct {
		env    *proxyEnv
		host   string
		header map[string]string
		ok     bool
	}{
		{plain, "127.0.0.1:8377", nil, true},
		{plain, "localhost:8377", nil, true},
		{plain, "LOCALHOST", nil, true},
		{plain, "app.localhost:8377", nil, true},
		{plain, "127.8.9.10", nil, true},
		{plain, "[::1]:8377", nil, true},
		{plain, "evil.example", nil, false},
		{plain, "evil.example:8377", nil, false},
		{plain, "localhost.evil.example", nil, false},
		{plain, "127.0.0.1.nip.io", nil, false},
		{plain, "192.168.1.5:8377", nil, false},
		{plain, "", nil, false},
		{allowed, "pa.internal:8377", nil, true},
		{allowed, "a.dev.example", nil, true},
		{allowed, "dev.example", nil, false},
		{allowed, "10.0.0.7:80", nil, true},
		{allowed, "evil.example", nil, false},
		{allowed, "localhost", nil, true},
		{token, "evil.example", map[string]string{server.HeaderToken: "s3cret"}, true},
	}
	forwarded := 0 // requests that must reach the upstream
	for _, tt := range tests {
		if tt.ok {
			forwarded += 3 // chat completions, messages, models
		}
		for _, rt := range routes {
			name := fmt.Sprintf("%s %s Host %q", rt.method, rt.path, tt.host)
			req := httptest.NewRequest(rt.method, "http://x"+rt.path, strings.NewReader(rt.body))
			req.Host = tt.host
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if rt.path == "/healthz" && tt.env == token {
				continue
			}
			w := httptest.NewRecorder()
			tt.env.srv.Handler().ServeHTTP(w, req)
			refused := w.Code == http.StatusForbidden && strings.Contains(w.Body.String(), "is not a loopback name or address")
			if refused == tt.ok {
				t.Errorf("%s: %d %s; want refused=%v", name, w.Code, w.Body.String(), !tt.ok)
			}
		}
	}
	// The refusal is in the shape the client's SDK parses, and counted.
	req := httptest.NewRequest("POST", "http://evil.example/v1/messages", strings.NewReader(`{}`))
	w := httptest.NewRecorder()
	plain.srv.Handler().ServeHTTP(w, req)
	var body struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Type != "error" || body.Error.Type != "permission_error" ||
		!strings.HasPrefix(body.Error.Message, `pruneadvisor: Host "evil.example" is not a loopback name or address`) {
		t.Errorf("anthropic-shaped refusal: %v %s", err, w.Body.String())
	}
	_, metrics := get(t, plain.http.URL+"/metrics")
	if !strings.Contains(string(metrics), `pruneadvisor_requests_total{code="403",route="refused-host"}`) {
		t.Errorf("refusals not counted:\n%s", metrics)
	}
	if up.count() != forwarded {
		t.Errorf("the upstream got %d requests, want %d: only answered hosts are forwarded", up.count(), forwarded)
	}
}

// Stubs made by a server with a RecallSecret name keyed ids (advisor.KeyedRecallID),
// which recall over HTTP.
func TestRecallSecretKeysStubs(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	env := newProxy(t, server.Options{RecallSecret: secret})
	req := fmt.Sprintf(`{"session_id":"keyed","format":"openai","messages":%s}`, openAIMessages(5))
	resp, body := post(t, env.http.URL+"/v1/advise", []byte(req), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var ans adviseAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, it := range ans.Plan.Items {
		if it.Decision != advisor.DecisionPruned {
			continue
		}
		n++
		want := advisor.KeyedRecallID(secret, "keyed", it.Key)
		if it.RecallID != want || want == advisor.RecallID("keyed", it.Key) || !strings.Contains(it.Stub, want) {
			t.Errorf("output %s: recall id %s, stub %q; want keyed id %s", it.Key, it.RecallID, it.Stub, want)
		}
		if code, text := get(t, env.http.URL+"/v1/recall/"+want); code != 200 || !strings.Contains(string(text), "NOISE") {
			t.Errorf("recall %s: %d %.80s", want, code, text)
		}
	}
	if n != 2 {
		t.Errorf("%d outputs pruned, want 2", n)
	}
}

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}
