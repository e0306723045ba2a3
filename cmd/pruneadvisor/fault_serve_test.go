package main

// Hostile requests to a running serve (docs/RELIABILITY.md "Hostile requests"): a
// Host that is not this machine's (DNS rebinding), recall ids computed from public
// facts, compressed bodies and decompression bombs, trickled bodies, idle
// connections, and a slow response stream that must outlive every timeout.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// send sends one request to the server with the given Host (the URL's when "") and
// headers; it returns the status and body (0 and the error text on failure).
func (s *served) send(t testing.TB, method, path, host string, body []byte, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return doRequest(httpClient, req)
}

// adviseBody is a POST /v1/advise request for session over faultMessages.
func adviseBody(session string) []byte {
	return fmt.Appendf(nil, `{"session_id":%q,"format":"openai","budget":1000,"messages":%s}`, session, faultMessages())
}

// TestServeForeignHost: without --token, serve answers only requests naming a
// loopback host or one of --allowed-hosts; a page that pointed its own domain at
// 127.0.0.1 gets 403 on every route and reaches neither the store nor the upstream.
func TestServeForeignHost(t *testing.T) {
	t.Parallel()
	up := upstream(t)
	args := []string{"--scorer", "lexical", "--price-forced=false", "--openai-upstream", up.URL, "--anthropic-upstream", up.URL}
	plain := startServe(t, testEnv(t), append(args, "--db", filepath.Join(t.TempDir(), "p.db"))...)
	allowed := startServe(t, testEnv(t), append(args, "--db", filepath.Join(t.TempDir(), "a.db"), "--allowed-hosts", "pa.internal,*.dev.example")...)
	token := startServe(t, testEnv(t), append(args, "--db", filepath.Join(t.TempDir(), "t.db"), "--token", "s3cret")...)
	const refusal = `Host \"evil.example:8377\" is not a loopback name or address`
	tests := []struct {
		name   string
		srv    *served
		host   string
		header []string
		code   int
		text   string
	}{
		{"loopback", plain, "", nil, 200, `"step":9`},
		{"localhost", plain, "localhost:8377", nil, 200, `"step":9`},
		{"rebinding", plain, "evil.example:8377", nil, 403, refusal},
		{"allowed", allowed, "pa.internal:8377", nil, 200, `"step":9`},
		{"allowed-wildcard", allowed, "box.dev.example", nil, 200, `"step":9`},
		{"not-allowed", allowed, "evil.example:8377", nil, 403, refusal},
		{"token", token, "evil.example:8377", []string{"X-Pruneadvisor-Token", "s3cret"}, 200, `"step":9`},
		{"token-missing", token, "evil.example:8377", nil, 401, "missing or wrong pruneadvisor token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := tt.srv.send(t, "POST", "/v1/advise", tt.host, adviseBody("host-"+tt.name), tt.header...)
			if code != tt.code || !strings.Contains(out, tt.text) {
				t.Errorf("POST /v1/advise with Host %q: %d %s; want %d with %q", tt.host, code, cutOut(out, 500), tt.code, tt.text)
			}
			if tt.code != 403 {
				return
			}
			for _, path := range []string{"/v1/recall/o_0123456789", "/healthz", "/metrics"} {
				if code, out := tt.srv.send(t, "GET", path, tt.host, nil); code != 403 {
					t.Errorf("GET %s with Host %q: %d %s; want 403", path, tt.host, code, cutOut(out, 300))
				}
			}
			if code, out := tt.srv.send(t, "POST", "/v1/messages", tt.host, []byte(`{"messages":[]}`)); code != 403 ||
				!strings.Contains(out, `"type":"permission_error"`) {
				t.Errorf("POST /v1/messages with Host %q: %d %s; want 403 permission_error", tt.host, code, cutOut(out, 300))
			}
		})
	}
}

// TestServeRecallIDsKeyed: the recall ids of serve's stubs are keyed with the
// database's secret: the id anyone can compute from the session and call ids (the
// unkeyed advisor.RecallID) finds nothing, the stub's own id finds the original, and
// a restarted serve on the same database makes the same ids.
func TestServeRecallIDsKeyed(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "k.db")
	// A recall undoes its stub at the next step, so only the second serve recalls.
	ids := func(recall bool) map[string]string {
		srv := startServe(t, testEnv(t), "--db", db, "--scorer", "lexical", "--price-forced=false")
		code, out := srv.post(t, "/v1/advise", adviseBody("keyed"))
		if code != 200 {
			t.Fatalf("advise: %d %s", code, cutOut(out, 500))
		}
		var p advisedPlan
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		byKey := map[string]string{}
		for _, it := range p.Plan.Items {
			if it.Decision == "pruned" {
				byKey[it.Key] = it.RecallID
				derived := advisor.RecallID("keyed", it.Key)
				if derived == it.RecallID {
					t.Errorf("output %s: stub id %s is the unkeyed SHA-256 id", it.Key, derived)
				}
				if code, text := srv.get(t, "/v1/recall/"+derived); code != 404 {
					t.Errorf("recall %s (derived from session and call id): %d %.100s; want 404", derived, code, text)
				}
			}
		}
		if len(byKey) != 5 {
			t.Fatalf("%d outputs pruned, want 5", len(byKey))
		}
		for _, id := range byKey {
			if !recall {
				break
			}
			if code, text := srv.get(t, "/v1/recall/"+id); code != 200 || !strings.Contains(text, "func module") {
				t.Errorf("recall %s (stub id): %d %.100s", id, code, text)
			}
		}
		_ = srv.cmd.Process.Signal(syscall.SIGTERM)
		if code := srv.wait(lightBound); code != 0 {
			t.Errorf("serve exit %d: %s", code, srv.output())
		}
		return byKey
	}
	first := ids(false)
	second := ids(true) // the same session again: the stubs come from the store
	for k, id := range first {
		if second[k] != id {
			t.Errorf("output %s: recall id %s, after a restart %s", k, id, second[k])
		}
	}
	var n int
	for _, row := range querySQL(t, db, `SELECT length(value) FROM secrets`) {
		n++
		if row[0] != "32" {
			t.Errorf("secret of %s bytes, want 32", row[0])
		}
	}
	if n != 1 {
		t.Errorf("%d secrets, want 1", n)
	}
}

// TestServeTimeouts runs serve with every timeout at 500 ms: a body trickled one
// byte every 100 ms gets 408 and never reaches the upstream, an idle keep-alive
// connection is closed, and a streamed response of 3 s (15 events 200 ms apart)
// arrives whole.
func TestServeTimeouts(t *testing.T) {
	t.Parallel()
	const events = 15
	got := make(chan int, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- len(b)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range events {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(200 * time.Millisecond)
		}
	}))
	t.Cleanup(up.Close)
	srv := startServe(t, testEnv(t), "--db", filepath.Join(t.TempDir(), "t.db"), "--scorer", "lexical",
		"--anthropic-upstream", up.URL, "--openai-upstream", up.URL,
		"--header-timeout", "500ms", "--body-timeout", "500ms", "--idle-timeout", "500ms")
	addr := strings.TrimPrefix(srv.url, "http://")
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Stream a long answer please."}]}`

	t.Run("slow-stream", func(t *testing.T) {
		start := time.Now()
		code, out := srv.post(t, "/v1/messages", []byte(body))
		took := time.Since(start)
		if n := strings.Count(out, "event: content_block_delta"); code != 200 || n != events {
			t.Errorf("status %d, %d of %d events after %s:\n%s", code, n, events, took, cutOut(out, 500))
		}
		if took < 2500*time.Millisecond {
			t.Errorf("the stream took %s; it must outlive the 500 ms timeouts", took)
		}
		if n := <-got; n != len(body) {
			t.Errorf("upstream got %d bytes, want %d", n, len(body))
		}
	})
	t.Run("trickled-body", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
		go func() {
			for i := range len(body) {
				if _, err := conn.Write([]byte{body[i]}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("after %s: %v", time.Since(start), err)
		}
		b, _ := io.ReadAll(resp.Body)
		took := time.Since(start)
		want := "request body not received within 500ms (--body-timeout)"
		if resp.StatusCode != 408 || !strings.Contains(string(b), want) || took > 5*time.Second {
			t.Errorf("%d %s after %s; want 408 with %q soon after 500 ms", resp.StatusCode, b, took, want)
		}
		select {
		case n := <-got:
			t.Errorf("the upstream got a request of %d bytes", n)
		default:
		}
	})
	t.Run("idle-connection", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err = br.ReadByte()
		if took := time.Since(start); !errors.Is(err, io.EOF) || took < 400*time.Millisecond || took > 5*time.Second {
			t.Errorf("idle connection: %v after %s; want closed (EOF) after about 500 ms", err, took)
		}
	})
	t.Run("bad-flag", func(t *testing.T) {
		code, out := runPA(t, lightBound, testEnv(t), "serve", "--addr", "127.0.0.1:0", "--body-timeout", "0s")
		if code != 2 || !strings.Contains(out, "--body-timeout 0s: want a positive duration") {
			t.Errorf("exit %d: %s", code, out)
		}
	})
}
