package server_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/pruneadvisor/pruneadvisor/server"
)

func okJSON(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

func post(t *testing.T, url string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	return doRequest(t, http.MethodPost, url, bytes.NewReader(body), "application/json", hdr)
}

// doRequest makes one request with method to url, its body (nil for none), its
// Content-Type when contentType is set and the headers hdr, and returns the
// response and its whole body (closed); any transport error fails the test.
func doRequest(t *testing.T, method, url string, body io.Reader, contentType string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// A request with nothing to prune reaches the upstream byte for byte, whatever its key
// order, escapes and spacing; the response comes back byte for byte with its status
// and headers.
func TestByteFaithfulForwarding(t *testing.T) {
	const upstreamBody = "{\"id\" : \"x\",\n \"content\":[] }\n"
	up := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_42")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(upstreamBody))
	})
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL})
	tests := []struct {
		name, path, body string
	}{
		{"openai", "/v1/chat/completions", "{\n  \"stream\" : false ,\"messages\":[\n\t{\"content\":\"You are \\u0061 bot \\ud83d\\ude00 \\/ <&>\",\"role\":\"system\"},\n" +
			"{\"role\":\"user\",   \"content\":\"run \\\"ls\\\"\"},{\"tool_calls\":[{\"type\":\"function\",\"function\":{\"arguments\":\"{\\\"cmd\\\":\\\"ls\\\"}\",\"name\":\"sh\"},\"id\":\"c1\"}],\"content\":null,\"role\":\"assistant\"},\n" +
			"{\"tool_call_id\":\"c1\",\"role\":\"tool\",\"content\":\"a.go\\nb.go\"}  ],\"model\":\"gpt\" , \"temperature\":0.10}\r\n"},
		{"anthropic", "/v1/messages", "{\"system\":[{\"text\":\"S\\u00e9\",\"type\":\"text\",\"cache_control\":{\"ttl\":\"1h\",\"type\":\"ephemeral\"}}],  \"max_tokens\":10,\n" +
			"\"messages\":[{\"content\":\"hi \\u2028 there\",\"role\":\"user\"},{\"role\":\"assistant\",\"content\":[{\"signature\":\"s==\",\"thinking\":\"hm\",\"type\":\"thinking\"},{\"input\":{\"b\":1,\"a\":2},\"name\":\"Read\",\"id\":\"t1\",\"type\":\"tool_use\"}]},\n" +
			"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":\"small\"}]}],\"model\":\"c\"}"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, got := post(t, env.http.URL+tt.path, []byte(tt.body), map[string]string{"X-Custom": "v1"})
			if resp.StatusCode != http.StatusCreated || string(got) != upstreamBody || resp.Header.Get("X-Request-Id") != "req_42" {
				t.Errorf("response %d %q %v", resp.StatusCode, got, resp.Header)
			}
			if b := up.body(i); string(b) != tt.body {
				t.Errorf("upstream got\n%q\nwant\n%q", b, tt.body)
			}
			if up.headers[i].Get("X-Custom") != "v1" || up.paths[i] != tt.path {
				t.Errorf("upstream request %s %v", up.paths[i], up.headers[i])
			}
		})
	}
}

// Hop-by-hop headers (and those the Connection header names) stop at the proxy, as do
// the proxy's own; the rest pass both ways. Query strings pass; other /v1/ paths pass
// through untouched to the upstream the headers point at.
func TestHeadersAndPassThrough(t *testing.T) {
	openaiUp := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "1")
		w.Header().Set("Openai-Processing-Ms", "12")
		_, _ = w.Write([]byte(`{"object":"list"}`))
	})
	anthropicUp := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		_, _ = w.Write([]byte(`{"input_tokens":7}`))
	})
	env := newProxy(t, server.Options{OpenAIUpstream: openaiUp.URL + "/base/", AnthropicUpstream: anthropicUp.URL, Token: "tok"})

	req, _ := http.NewRequest(http.MethodPost, env.http.URL+"/v1/chat/completions?api-version=2024", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "drop me")
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("X-Keep", "keep me")
	req.Header.Set(server.HeaderToken, "tok")
	req.Header.Set(server.HeaderSession, "sess-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := openaiUp.headers[0]
	if h.Get("X-Keep") != "keep me" || h.Get("X-Hop") != "" || h.Get("Proxy-Authorization") != "" ||
		h.Get(server.HeaderToken) != "" || h.Get(server.HeaderSession) != "" {
		t.Errorf("upstream request headers: %v", h)
	}
	if openaiUp.paths[0] != "/base/v1/chat/completions?api-version=2024" {
		t.Errorf("upstream path %q", openaiUp.paths[0])
	}
	if resp.Header.Get("X-Up-Hop") != "" || resp.Header.Get("Openai-Processing-Ms") != "12" {
		t.Errorf("response headers: %v", resp.Header)
	}

	// Pass-through: count_tokens to Anthropic's upstream, models to OpenAI's.
	body := []byte(`{"model":"c","messages":[{"role":"user","content":"hi"}]}`)
	resp, got := post(t, env.http.URL+"/v1/messages/count_tokens", body, map[string]string{server.HeaderToken: "tok", "anthropic-version": "2023-06-01"})
	if resp.StatusCode != 200 || string(got) != `{"input_tokens":7}` || string(anthropicUp.body(0)) != string(body) || anthropicUp.paths[0] != "/v1/messages/count_tokens" {
		t.Errorf("count_tokens: %d %q -> %q %q", resp.StatusCode, got, anthropicUp.body(0), anthropicUp.paths[0])
	}
	greq, _ := http.NewRequest(http.MethodGet, env.http.URL+"/v1/models", nil)
	greq.Header.Set(server.HeaderToken, "tok")
	gresp, err := http.DefaultClient.Do(greq)
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := io.ReadAll(gresp.Body)
	gresp.Body.Close()
	if gresp.StatusCode != 200 || string(gb) != `{"object":"list"}` || openaiUp.paths[1] != "/base/v1/models" {
		t.Errorf("models: %d %q %v", gresp.StatusCode, gb, openaiUp.paths)
	}
}

// Upstream errors come back as they came: status, headers and body.
func TestUpstreamErrorsPassBack(t *testing.T) {
	const errBody = `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	up := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(errBody))
	})
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL})
	client := openai.NewClient(option.WithBaseURL(env.http.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v", err)
	}
	if apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" || apiErr.Response.Header.Get("Retry-After") != "7" {
		t.Errorf("error %d %q %v", apiErr.StatusCode, apiErr.Code, apiErr.Response.Header)
	}
	resp, b := post(t, env.http.URL+"/v1/chat/completions", []byte(`{"messages":[{"role":"user","content":"hi"}]}`), nil)
	if resp.StatusCode != 429 || string(b) != errBody || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("raw: %d %q %v", resp.StatusCode, b, resp.Header)
	}
}

// Bad input: invalid JSON gives 400 naming the position, an oversized body 413, an
// unreachable upstream 502, a missing or wrong token 401; none of it reaches the
// upstream.
func TestBadInput(t *testing.T) {
	up := newRecorder(t, okJSON)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String()
	closed.Close()
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: deadURL, MaxBody: 1000})
	tokenEnv := newProxy(t, server.Options{OpenAIUpstream: up.URL, Token: "s3cret-token"})

	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 1200) + `"}]}`
	tests := []struct {
		name     string
		url      string
		body     string
		hdr      map[string]string
		chunked  bool
		wantCode int
		wantMsg  string
	}{
		// line 3 is ` "model": gpt}`: the g is byte 11 of the line.
		{"invalid JSON", env.http.URL + "/v1/chat/completions", "{\n \"messages\": [],\n \"model\": gpt}", nil, false, 400,
			"invalid JSON at line 3, column 11 (byte offset 29)"},
		{"truncated JSON", env.http.URL + "/v1/messages", `{"messages": [`, nil, false, 400, "invalid JSON at line 1, column 14"},
		{"sidecar invalid JSON", env.http.URL + "/v1/advise", "{\"session_id\":\"s\",\n,}", nil, false, 400, "invalid JSON at line 2, column 1 (byte offset 19)"},
		{"over the limit", env.http.URL + "/v1/chat/completions", big, nil, false, 413, "over the limit of 1000 bytes"},
		{"over the limit, chunked", env.http.URL + "/v1/chat/completions", big, nil, true, 413, "over the limit of 1000 bytes"},
		{"unreachable upstream", env.http.URL + "/v1/messages", `{"messages":[{"role":"user","content":"hi"}]}`, nil, false, 502, "connection refused"},
		{"missing token", tokenEnv.http.URL + "/v1/chat/completions", `{"messages":[]}`, nil, false, 401, "missing or wrong pruneadvisor token"},
		{"wrong token", tokenEnv.http.URL + "/v1/chat/completions", `{"messages":[]}`, map[string]string{server.HeaderToken: "nope"}, false, 401, "missing or wrong"},
		{"bearer is the upstream's on proxy routes", tokenEnv.http.URL + "/v1/chat/completions", `{"messages":[]}`, map[string]string{"Authorization": "Bearer s3cret-token"}, false, 401, "missing or wrong"},
		{"sidecar without token", tokenEnv.http.URL + "/v1/advise", `{}`, nil, false, 401, "missing or wrong"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.count()
			var rd io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				rd = io.MultiReader(rd) // unknown length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, tt.url, rd)
			for k, v := range tt.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode || !strings.Contains(string(b), tt.wantMsg) {
				t.Errorf("%d %s; want %d with %q", resp.StatusCode, b, tt.wantCode, tt.wantMsg)
			}
			if !json.Valid(b) {
				t.Errorf("error body is not JSON: %q", b)
			}
			if up.count() != before {
				t.Error("the request reached the upstream")
			}
		})
	}
	// The right token passes, the sidecar also takes it as a bearer token, health
	// needs none.
	resp, _ := post(t, tokenEnv.http.URL+"/v1/chat/completions", []byte(`{"messages":[{"role":"user","content":"hi"}]}`), map[string]string{server.HeaderToken: "s3cret-token"})
	if resp.StatusCode != 200 {
		t.Errorf("with token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, tokenEnv.http.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("metrics with bearer token: %v %v", resp.StatusCode, err)
	}
	if resp, err := http.Get(tokenEnv.http.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz: %v %v", resp.StatusCode, err)
	}
}

func TestCheckListen(t *testing.T) {
	tests := []struct {
		addr, token string
		wantErr     bool
	}{
		{"127.0.0.1:8377", "", false},
		{"[::1]:8377", "", false},
		{"localhost:8377", "", false},
		{"127.3.4.5:0", "", false},
		{"0.0.0.0:8377", "", true},
		{":8377", "", true},
		{"192.168.1.5:8377", "", true},
		{"example.com:80", "", true},
		{"0.0.0.0:8377", "t", false},
		{"no-port", "t", true},
	}
	for _, tt := range tests {
		err := server.CheckListen(tt.addr, tt.token)
		if (err != nil) != tt.wantErr {
			t.Errorf("CheckListen(%q, %q) = %v; want error %v", tt.addr, tt.token, err, tt.wantErr)
		}
		if err != nil && tt.token == "" && tt.addr != "no-port" && !errors.Is(err, server.ErrExposed) {
			t.Errorf("CheckListen(%q): %v does not wrap ErrExposed", tt.addr, err)
		}
	}
}

// Credentials never reach the log, the database or an error message: requests that
// are pruned, fail open, fail upstream and fail validation all carry them.
func TestCredentialsNeverStored(t *testing.T) {
	const openaiKey, anthropicKey, proxyToken = "sk-proj-SECRETopenai123", "sk-ant-SECRETanthropic456", "TOKENsecret789"
	up := newRecorder(t, openAIUpstream(newStreamGate()))
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	deadURL := "http://" + closed.Addr().String()
	closed.Close()
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: deadURL, Token: proxyToken})
	hdr := map[string]string{"Authorization": "Bearer " + openaiKey, server.HeaderToken: proxyToken}
	// Anthropic's routes take its key and a bearer token (OAuth) alike.
	both := map[string]string{"Authorization": "Bearer " + openaiKey, "X-Api-Key": anthropicKey, server.HeaderToken: proxyToken}
	var bodies []string

	// A pruned conversation (stores originals and stubs).
	msgs := `[{"role":"system","content":"agent"},{"role":"user","content":"fix it"}`
	for k := 1; k <= 5; k++ {
		msgs += `,{"role":"assistant","content":null,"tool_calls":[{"id":"c` + string(rune('0'+k)) + `","type":"function","function":{"name":"sh","arguments":"{}"}}]}`
		out, _ := json.Marshal(toolOutput(k))
		msgs += `,{"role":"tool","tool_call_id":"c` + string(rune('0'+k)) + `","content":` + string(out) + `}`
	}
	_, b := post(t, env.http.URL+"/v1/chat/completions", []byte(`{"model":"m","messages":`+msgs+`]}`), hdr)
	bodies = append(bodies, string(b))
	// Fail open (messages not a list), upstream unreachable, invalid JSON, an
	// Anthropic key on an OpenAI route and on a path no API claims beside an OpenAI
	// key (refused), wrong token.
	for _, c := range []struct {
		path, body string
		hdr        map[string]string
	}{
		{"/v1/chat/completions", `{"messages":{"role":"user"}}`, hdr},
		{"/v1/messages", `{"messages":[{"role":"user","content":"hi"}]}`, both},
		{"/v1/messages", `{"messages":[`, both},
		{"/v1/chat/completions", `{"messages":[]}`, both},
		{"/v1/models", ``, both},
		{"/v1/advise", `{"session_id":"s","format":"openai","messages":` + msgs + `]}`, both},
	} {
		_, b := post(t, env.http.URL+c.path, []byte(c.body), c.hdr)
		bodies = append(bodies, string(b))
	}
	if !strings.Contains(env.log.String(), "request refused") {
		t.Errorf("the log lacks the refusals:\n%s", env.log.String())
	}
	_, b = post(t, env.http.URL+"/v1/chat/completions", []byte(`{}`), map[string]string{"Authorization": "Bearer " + openaiKey, server.HeaderToken: "wrong-" + proxyToken})
	bodies = append(bodies, string(b))

	if !strings.Contains(env.log.String(), "advising failed") || !strings.Contains(env.log.String(), "upstream unreachable") {
		t.Fatalf("the log lacks the expected failures:\n%s", env.log.String())
	}
	stored := ""
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if b, err := os.ReadFile(env.dbPth + suffix); err == nil {
			stored += string(b)
		}
	}
	if !strings.Contains(stored, "NOISE build log 1 line 1") {
		t.Fatal("the database does not hold the pruned original: the check below would prove nothing")
	}
	for _, secret := range []string{openaiKey, anthropicKey, proxyToken, "SECRET"} {
		if strings.Contains(env.log.String(), secret) {
			t.Errorf("log holds %q", secret)
		}
		if strings.Contains(stored, secret) {
			t.Errorf("database holds %q", secret)
		}
		for _, b := range bodies {
			if strings.Contains(b, secret) {
				t.Errorf("response %q holds %q", b, secret)
			}
		}
	}
}
