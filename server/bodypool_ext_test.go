package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/server"
)

// The proxy reuses request body buffers (bodypool.go). Many sessions at once, each
// request a different body of 14-114 KB (pooled from 32 KiB on) with nothing to prune, through a real
// http.Transport: every body reaches the upstream byte for byte, which fails if a
// buffer went back to the pool while a request still read from it or sent it. (A
// sabotaged pool, giving the buffer back before forwarding, failed this test.)
func TestPooledBodiesReachUpstreamIntact(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		sum := sha256.Sum256(body)
		if got := hex.EncodeToString(sum[:]); got != r.Header.Get("X-Test-Sha256") {
			http.Error(w, "body changed on the way: sha256 "+got, http.StatusTeapot)
			return
		}
		okJSON(w, r, body)
	})
	up.discard.Store(true)
	cfg := advisor.DefaultConfig() // 100,000-token budget: these sessions prune nothing
	env := newProxy(t, server.Options{AnthropicUpstream: up.URL, Config: cfg})
	const sessions, turns = 12, 8
	var wg sync.WaitGroup
	errs := make(chan error, sessions*turns)
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; n <= turns; n++ {
				body := pooledBody(s, n)
				sum := sha256.Sum256(body)
				req, _ := http.NewRequest(http.MethodPost, env.http.URL+"/v1/messages", strings.NewReader(string(body)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set(server.HeaderSession, fmt.Sprint("pool-", s))
				req.Header.Set("X-Test-Sha256", hex.EncodeToString(sum[:]))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("session %d turn %d: %d %s", s, n, resp.StatusCode, b)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := up.n.Load(); got != sessions*turns {
		t.Errorf("upstream got %d requests; want %d", got, sessions*turns)
	}
}

// pooledBody is turn n of session s: n read results of about 14 KB each, unique to
// the session and turn, as a Messages API body (about 14 KB a turn).
func pooledBody(s, n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"start"}`)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"Read","input":{"file_path":"/s%d/f%d.go"}}]}`, i, s, i)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"`, i)
		for l := range 300 {
			fmt.Fprintf(&b, "session %d file %d line %d: x := compute(%d)\\n", s, i, l, s*1000+i*10+l)
		}
		b.WriteString(`"}]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}
