package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/server"
)

// serveOn runs env's server with Serve on a loopback listener (the timeouts are
// Serve's) and returns its address; it shuts down at cleanup.
func serveOn(t *testing.T, env *proxyEnv) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// rawRequest writes head to a new connection to addr, then feeds the body bytes
// one at a time every gap, and returns the connection's
// response read (status line and body) and how long it took.
func rawRequest(t *testing.T, addr, head, body string, gap time.Duration) (string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(gap):
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "read: " + err.Error(), time.Since(start)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b), time.Since(start)
}

// A body trickled slower than --body-timeout, or stopped mid-chunk, gets 408 on
// every route that reads bodies; the upstream never sees it.
func TestBodyTimeout(t *testing.T) {
	up := newRecorder(t, okJSON)
	const timeout = 300 * time.Millisecond
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL, BodyTimeout: timeout})
	addr := serveOn(t, env)
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 80) + `"}]}`
	for _, path := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1/advise", "/v1/messages/count_tokens"} {
		for _, mode := range []string{"trickle", "chunk-stalled"} {
			t.Run(path+" "+mode, func(t *testing.T) {
				// trickle: 130 bytes, one every 100 ms (13 s in all); chunk-stalled: a
				// chunk announced as 0x80 bytes, 10 of them, then silence.
				head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, len(body))
				feed, gap := body, 100*time.Millisecond
				if mode == "chunk-stalled" {
					head = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n80\r\n%s", path, body[:10])
					feed, gap = " ", time.Hour
				}
				n := up.count()
				got, took := rawRequest(t, addr, head, feed, gap)
				if !strings.HasPrefix(got, "408 ") || !strings.Contains(got, "request body not received within 300ms (--body-timeout)") {
					t.Errorf("got %q after %s; want 408 naming --body-timeout", got, took)
				}
				if took < timeout || took > 10*timeout {
					t.Errorf("answered after %s; want soon after the %s body timeout", took, timeout)
				}
				if up.count() != n {
					t.Errorf("the upstream got the request")
				}
			})
		}
	}
	// A body that arrives in time is served as usual, on a connection that stays up.
	got, _ := rawRequest(t, addr, fmt.Sprintf("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s", len(body), body), " ", time.Hour)
	if got != `200 {"ok":true}` {
		t.Errorf("a prompt body: %q", got)
	}
}

// A keep-alive connection left idle is closed after --idle-timeout.
func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	env := newProxy(t, server.Options{IdleTimeout: idle})
	addr := serveOn(t, env)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = br.ReadByte()
	took := time.Since(start)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v after %s; want the server to close it (EOF)", err, took)
	}
	if took < idle-50*time.Millisecond || took > 10*idle {
		t.Errorf("closed after %s idle; want about %s", took, idle)
	}
}

// A streamed response that lasts much longer than every timeout (headers, body,
// idle: 200 ms each; the stream 12 events 100 ms apart) reaches the client whole,
// through the proxy routes (whose body was read) and the passthrough
// (count_tokens, whose body was streamed).
func TestSlowStreamOutlivesTimeouts(t *testing.T) {
	const events = 12
	up := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range events {
			writeSSE(w, "delta", fmt.Sprintf(`{"i":%d}`, i))
			time.Sleep(100 * time.Millisecond)
		}
		writeSSE(w, "", "[DONE]")
	})
	const timeout = 200 * time.Millisecond
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL,
		HeaderTimeout: timeout, BodyTimeout: timeout, IdleTimeout: timeout})
	addr := serveOn(t, env)
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"stream please"}]}`
	for _, path := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1/messages/count_tokens"} {
		t.Run(path, func(t *testing.T) {
			start := time.Now()
			resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("stream cut after %s: %v (%d bytes: %q); the server's log:\n%s", took, err, len(got), got, env.log.String())
			}
			if n := strings.Count(string(got), "event: delta\n"); n != events || !strings.HasSuffix(string(got), "data: [DONE]\n\n") {
				t.Errorf("got %d of %d events (done %v) in %s; the server's log:\n%s", n, events, strings.HasSuffix(string(got), "[DONE]\n\n"), took, env.log.String())
			}
			if took < 5*timeout {
				t.Errorf("the stream took %s: it must outlive the %s timeouts several times", took, timeout)
			}
		})
	}
}

// A stream the upstream cuts short is cut short for the client too: it gets an
// error, not a response that looks whole.
func TestUpstreamCutReachesClient(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeSSE(w, "delta", `{"i":0}`)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // mid-stream, without the chunked body's end
		}
	})
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL})
	addr := serveOn(t, env)
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(string(got), `{"i":0}`) {
			t.Errorf("%s: read %q, %v; want the first event, then io.ErrUnexpectedEOF", path, got, err)
		}
	}
	if !strings.Contains(env.log.String(), "upstream response cut short; closing the client's connection") {
		t.Errorf("log:\n%s", env.log.String())
	}
	_, metrics := get(t, "http://"+addr+"/metrics")
	if !strings.Contains(string(metrics), `pruneadvisor_requests_total{code="aborted",route="anthropic"} 1`) {
		t.Errorf("aborted response not counted:\n%s", metrics)
	}
}
