package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// lowScorer gives every card keep 0.05: every candidate is pruned.
var lowScorer = testkit.Const("fuzz-low", 0.05)

// capture is the fuzz proxy's upstream: it keeps the last body forwarded.
type capture struct {
	mu   sync.Mutex
	body []byte
	n    int
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.body, c.n = b, c.n+1
	c.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"ok":true}`)), Request: r}, nil
}

func (c *capture) last() ([]byte, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.body, c.n
}

// fuzzProxy is one proxy per fuzz process: an eager configuration (2 protected
// steps, candidates from 50 tokens, a 1,000-token budget, over-budget rewrites
// unpriced) over a memory store.
var fuzzProxy = sync.OnceValues(func() (http.Handler, *capture) {
	cfg := advisor.DefaultConfig()
	cfg.ProtectedSteps = 2
	cfg.MinCandidateTokens = 50
	cfg.Budget = 1000
	cfg.PriceForced = false
	up := &capture{}
	srv, err := server.New(server.Options{
		Config: cfg, Scorer: lowScorer, Store: advisor.NewMemoryStore(), Transport: up,
		OpenAIUpstream: "http://upstream.invalid", AnthropicUpstream: "http://upstream.invalid",
		Logger: slog.New(slog.DiscardHandler), MaxSessions: 64,
	})
	if err != nil {
		panic(err)
	}
	return srv.Handler(), up
})

// longConversation is an Anthropic request whose first outputs a proxy with the
// fuzz configuration prunes at once.
func longConversation() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"Review the modules."}`)
	for i := range 8 {
		id := string(rune('a' + i))
		text, _ := json.Marshal(strings.Repeat("func f() int { return 42 } // module line\n", 20+i))
		b.WriteString(`,{"role":"assistant","content":[{"type":"tool_use","id":"t` + id + `","name":"Read","input":{"file_path":"m` + id + `.go"}}]}`)
		b.WriteString(`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t` + id + `","content":` + string(text) + `}]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestFuzzProxyRewrites makes sure FuzzProxy's rewrite branch is reached: its long
// seed is forwarded with stubs.
func TestFuzzProxyRewrites(t *testing.T) {
	h, up := fuzzProxy()
	body := longConversation()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/messages", bytes.NewReader(body)))
	sent, _ := up.last()
	if rec.Code != http.StatusOK || bytes.Equal(sent, body) || bytes.Count(sent, []byte("[pruned: ")) == 0 {
		t.Fatalf("status %d, %d stubs forwarded; want 200 and some", rec.Code, bytes.Count(sent, []byte("[pruned: ")))
	}
}

// FuzzProxy sends any body to the proxy routes. The proxy must answer 400 exactly
// when the body is not JSON, and otherwise forward either the client's bytes or a
// rewrite that reads back as the same conversation with some tool results replaced
// by stubs (transcript.FuzzRewrite checks the bytes around them).
func FuzzProxy(f *testing.F) {
	for _, name := range []string{"anthropic-healthy.json", "anthropic-unknown-blocks.json", "openai-healthy.json",
		"openai-lone-surrogate.json", "anthropic-truncated.json", "openai-messages-object.json"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "bad", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, strings.HasPrefix(name, "anthropic"))
	}
	f.Add(longConversation(), true)

	f.Fuzz(func(t *testing.T, body []byte, anthropic bool) {
		h, up := fuzzProxy()
		path, kind := "/v1/chat/completions", transcript.FormatOpenAI
		if anthropic {
			path, kind = "/v1/messages", transcript.FormatAnthropic
		}
		_, before := up.last()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+path, bytes.NewReader(body)))
		sent, after := up.last()
		switch rec.Code {
		case http.StatusBadRequest:
			if json.Valid(body) {
				t.Fatalf("400 for a JSON body: %s", rec.Body)
			}
			if after != before {
				t.Fatalf("a refused body was forwarded")
			}
			return
		case http.StatusOK:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if !json.Valid(body) {
			t.Fatalf("a body that is not JSON was forwarded")
		}
		if after != before+1 {
			t.Fatalf("200 but %d requests forwarded", after-before)
		}
		if bytes.Equal(sent, body) {
			return
		}
		// Rewritten: the same conversation, some outputs stubbed.
		orig, err := transcript.Read("in", body, transcript.Options{Format: kind})
		if err != nil {
			t.Fatalf("the body was rewritten although it does not read: %v", err)
		}
		got, err := transcript.Read("out", sent, transcript.Options{Format: kind})
		if err != nil {
			t.Fatalf("the rewritten body does not read: %v\n%s", err, sent)
		}
		if len(got.Messages) != len(orig.Messages) || len(got.Calls) != len(orig.Calls) {
			t.Fatalf("rewrite changed the conversation: %d messages, %d calls -> %d, %d",
				len(orig.Messages), len(orig.Calls), len(got.Messages), len(got.Calls))
		}
		stubbed := 0
		for i, o := range orig.Outputs() {
			g := got.Outputs()[i]
			if g.Key != o.Key {
				t.Fatalf("output %d: key %q became %q", i, o.Key, g.Key)
			}
			if g.Text != o.Text {
				if !strings.HasPrefix(g.Text, "[pruned: ") {
					t.Fatalf("output %q changed, and not to a stub: %q", o.Key, g.Text)
				}
				stubbed++
			}
		}
		if stubbed == 0 {
			t.Fatalf("the body was rewritten but no output changed")
		}
	})
}
