package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/server"
)

// The forwarder is an httputil.ReverseProxy in Rewrite mode, which on its own would
// strip Forwarded and X-Forwarded-* and pass on "Te: trailers" and an Upgrade: the
// upstream gets the client's forwarding headers as sent and no Te, Upgrade or
// Connection, on the advised routes and the passthrough alike (as before the
// ReverseProxy). The query goes as sent too, with what Rewrite mode would drop as
// unparsable (a semicolon, a bad escape).
func TestForwardHeadersAsSent(t *testing.T) {
	up := newRecorder(t, okJSON)
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL})
	sent := http.Header{
		"X-Forwarded-For":   {"10.0.0.7, 10.0.0.8"},
		"X-Forwarded-Host":  {"agents.example"},
		"X-Forwarded-Proto": {"https"},
		"Forwarded":         {"for=10.0.0.7;proto=https"},
	}
	const query = "?api-version=2024;x=1&q=%zz"
	for i, path := range []string{"/v1/chat/completions", "/v1/models"} {
		req, _ := http.NewRequest(http.MethodPost, env.http.URL+path+query, strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		for k, vs := range sent {
			req.Header[k] = vs
		}
		req.Header.Set("Te", "trailers")
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != `{"ok":true}` {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, b)
		}
		if up.paths[i] != path+query {
			t.Errorf("upstream path %q; want %q", up.paths[i], path+query)
		}
		h := up.headers[i]
		got := http.Header{}
		for k := range sent {
			got[k] = h.Values(k)
		}
		if d := cmp.Diff(sent, got); d != "" {
			t.Errorf("%s: forwarding headers (-sent +upstream):\n%s", path, d)
		}
		for _, k := range []string{"Te", "Upgrade", "Connection"} {
			if v := h.Values(k); len(v) != 0 {
				t.Errorf("%s: upstream got %s %q", path, k, v)
			}
		}
	}
}

// What the ReverseProxy adds on the way back: interim 1xx responses (103 Early
// Hints) and response trailers reach the client, on both kinds of route.
func TestForwardEarlyHintsAndTrailers(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Trailer", "X-Upstream-Checksum")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
		w.Header().Set("X-Upstream-Checksum", "c0ffee")
	})
	env := newProxy(t, server.Options{AnthropicUpstream: up.URL})
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		var hints []string
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			hints = append(hints, http.StatusText(code)+" "+h.Get("Link"))
			return nil
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost,
			env.http.URL+path, strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(b) != `{"ok":true}` {
			t.Fatalf("%s: %d %q %v", path, resp.StatusCode, b, err)
		}
		if d := cmp.Diff([]string{"Early Hints </style.css>; rel=preload"}, hints); d != "" {
			t.Errorf("%s: interim responses (-want +got):\n%s", path, d)
		}
		if got := resp.Trailer.Get("X-Upstream-Checksum"); got != "c0ffee" {
			t.Errorf("%s: trailer %q (trailers %v)", path, got, resp.Trailer)
		}
	}
}

// A client that goes away in the middle of a stream ends the request quietly: it is
// counted with its status, not as "aborted" (which is for a response the upstream
// cut short, TestUpstreamCutReachesClient), and the upstream's request is
// cancelled.
func TestClientGoneMidStream(t *testing.T) {
	cancelled := make(chan struct{})
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeSSE(w, "message_start", `{"type":"message_start"}`)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	})
	env := newProxy(t, server.Options{AnthropicUpstream: up.URL})
	addr := serveOn(t, env)
	resp, err := http.Post("http://"+addr+"/v1/messages", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: message_start\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	resp.Body.Close() // mid-stream
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream's request was not cancelled when the client went away")
	}
	want := `pruneadvisor_requests_total{code="200",route="anthropic"} 1`
	var metrics []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, metrics = get(t, "http://"+addr+"/metrics"); strings.Contains(string(metrics), want) {
			break
		}
	}
	if !strings.Contains(string(metrics), want) || strings.Contains(string(metrics), `code="aborted"`) {
		t.Errorf("want %s and no aborted request:\n%s", want, grepLines(string(metrics), "requests_total"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, ln := range strings.Split(s, "\n") {
		if strings.Contains(ln, sub) {
			out = append(out, ln)
		}
	}
	return strings.Join(out, "\n")
}

// A client's "Expect: 100-continue" is answered by the proxy, which reads the body
// before it forwards anything: the upstream gets no Expect header (its 100 would
// come after the body was sent), and the request is counted with its final status,
// not an interim 100.
func TestExpectContinueAnsweredHere(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"message","content":[]}`)
	})
	env := newProxy(t, server.Options{AnthropicUpstream: up.URL})
	resp, _ := post(t, env.http.URL+"/v1/messages", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`),
		map[string]string{"X-Api-Key": "sk-ant-test", "Expect": "100-continue"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	up.mu.Lock()
	got := up.headers[0].Get("Expect")
	up.mu.Unlock()
	if got != "" {
		t.Errorf("the upstream got Expect: %q; want none", got)
	}
	_, metrics := get(t, env.http.URL+"/metrics")
	if want := `pruneadvisor_requests_total{code="200",route="anthropic"} 1`; !strings.Contains(string(metrics), want) || strings.Contains(string(metrics), `code="100"`) {
		t.Errorf("want %s and no code 100:\n%s", want, grepLines(string(metrics), "requests_total"))
	}
}

// A client that gives up before the upstream answers at all is counted as
// "canceled", not as the 200 no one received.
func TestClientGoneBeforeAnyResponse(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		<-r.Context().Done() // an upstream that never answers
	})
	env := newProxy(t, server.Options{AnthropicUpstream: up.URL})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.http.URL+"/v1/messages",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-test")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("got a response (%d) from an upstream that never answers", resp.StatusCode)
	}
	want := `pruneadvisor_requests_total{code="canceled",route="anthropic"} 1`
	var metrics []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, metrics = get(t, env.http.URL+"/metrics"); strings.Contains(string(metrics), want) {
			break
		}
	}
	// The polls above are themselves counted (route="metrics"); only an
	// anthropic 200 would be wrong.
	if !strings.Contains(string(metrics), want) || strings.Contains(string(metrics), `code="200",route="anthropic"`) {
		t.Errorf("want %s and no anthropic 200:\n%s", want, grepLines(string(metrics), "requests_total"))
	}
	if !strings.Contains(env.log.String(), `msg="the client left before any response" route=anthropic path=/v1/messages`) {
		t.Errorf("serve --verbose does not say the client left:\n%s", env.log.String())
	}
}
