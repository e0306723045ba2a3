package ollama

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// fake is an httptest Ollama 0.17.4 that speaks as OLLAMA-WIRE.md describes and
// checks every /api/chat request it gets.
type fake struct {
	t      *testing.T
	model  string // expected model name
	numCtx int    // expected num_ctx

	// reply decides the answer to request n (1-based) with card keys and args as
	// found in the prompt. nil answers every card with its value.
	reply func(n int, keys, args []string) reply
	// value gives a card's answer from its args (default 50).
	value map[string]int

	mu       sync.Mutex
	requests int
	cards    [][]string // args of the cards of each request, in order
	problems []string
}

// reply is one fault or answer of the fake.
type reply struct {
	status  int    // HTTP status for an error reply
	errText string // {"error": errText}
	content string // message content (done true unless truncated)
	notDone bool   // done:false, no done_reason, no metrics
	reason  string // done_reason ("stop" when empty)
	slow    bool   // hold the answer until the client gives up
	reset   bool   // send part of the body, then reset the connection
	inband  bool   // 200 with {"error": errText}
}

func newFake(t *testing.T, model string, numCtx int) (*fake, *httptest.Server) {
	f := &fake{t: t, model: model, numCtx: numCtx, value: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func clientFor(t *testing.T, rawURL string) *api.Client {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

func (f *fake) problem(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

// cardLine matches the first line of Card.Text: "[c3] Tool args (age …".
var cardLine = regexp.MustCompile(`(?m)^\[(c\d+)\] \S* (.*) \(age \d+ steps, \d+ chars`)

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/version":
		fmt.Fprint(w, `{"version":"0.17.4"}`)
		return
	case r.Method == http.MethodPost && r.URL.Path == "/api/chat":
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `404 page not found`)
		return
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Stream    *bool           `json:"stream"`
		Think     *bool           `json:"think"`
		Format    json.RawMessage `json:"format"`
		KeepAlive string          `json:"keep_alive"`
		Options   map[string]any  `json:"options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.problem("request body: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":%q}`, err.Error())
		return
	}
	var keys, args []string
	tokens := 0
	for _, m := range req.Messages {
		tokens += transcript.CountTokens(m.Content)
		for _, sm := range cardLine.FindAllStringSubmatch(m.Content, -1) {
			keys = append(keys, sm[1])
			args = append(args, sm[2])
		}
	}
	f.mu.Lock()
	f.requests++
	n := f.requests
	f.cards = append(f.cards, args)
	f.mu.Unlock()
	f.check(req.Model, req.Stream, req.Think, req.KeepAlive, req.Options, req.Format, keys, tokens)

	rep := reply{}
	if f.reply != nil {
		rep = f.reply(n, keys, args)
	}
	if rep.content == "" && rep.status == 0 && !rep.inband && !rep.slow && !rep.reset {
		rep.content = f.answer(keys, args)
	}
	switch {
	case rep.status != 0:
		w.WriteHeader(rep.status)
		fmt.Fprintf(w, `{"error":%q}`, rep.errText)
	case rep.inband:
		fmt.Fprintf(w, `{"error":%q}`, rep.errText)
	case rep.slow:
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	case rep.reset:
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			f.problem("hijack: %v", err)
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 400\r\n\r\n")
		buf.WriteString(`{"model":"` + req.Model + `","created_at":"2026-11-30T10:54:58.076234093Z","message":{"role":"assistant","content":"{\n\t\"c1\": 4`)
		buf.Flush()
		time.Sleep(20 * time.Millisecond)
		conn.(*net.TCPConn).SetLinger(0) // close with RST
		conn.Close()
	case rep.notDone:
		// Silent truncation: 200, done false, no done_reason, no metrics.
		body, _ := json.Marshal(map[string]any{
			"model": req.Model, "created_at": "2026-11-30T10:54:58.076234093Z",
			"message": map[string]any{"role": "assistant", "content": rep.content},
			"done":    false,
		})
		w.Write(body)
	default:
		reason := rep.reason
		if reason == "" {
			reason = "stop"
		}
		body, _ := json.Marshal(map[string]any{
			"model": req.Model, "created_at": "2026-11-30T10:54:58.076234093Z",
			"message":     map[string]any{"role": "assistant", "content": rep.content},
			"done":        true,
			"done_reason": reason, "total_duration": 6983019806, "load_duration": 2293117679,
			"prompt_eval_count": tokens, "prompt_eval_duration": 5584903,
			"eval_count": 118, "eval_duration": 893190778,
		})
		w.Write(body)
	}
}

// answer is a valid content, padded with whitespace as the real server pads it.
func (f *fake) answer(keys, args []string) string {
	var b strings.Builder
	b.WriteString("{\n\n\t\t ")
	for i, k := range keys {
		v, ok := f.value[args[i]]
		if !ok {
			v = 50
		}
		if i > 0 {
			b.WriteString(" ,\n\t")
		}
		fmt.Fprintf(&b, "%q: %d", k, v)
	}
	b.WriteString("\n}")
	return b.String()
}

// check records what is wrong with a request.
func (f *fake) check(model string, stream, think *bool, keepAlive string, opts map[string]any, format json.RawMessage, keys []string, tokens int) {
	if model != f.model {
		f.problem("model %q, want %q", model, f.model)
	}
	if stream == nil || *stream {
		f.problem("stream is %v, want false", stream)
	}
	if think == nil || *think {
		f.problem("think is %v, want false", think)
	}
	if keepAlive != "2m0s" {
		f.problem("keep_alive %q, want 2m0s", keepAlive)
	}
	if v, ok := opts["temperature"].(float64); !ok || v != 0 {
		f.problem("temperature %v, want 0", opts["temperature"])
	}
	if v, ok := opts["num_ctx"].(float64); !ok || int(v) != f.numCtx {
		f.problem("num_ctx %v, want %d", opts["num_ctx"], f.numCtx)
	}
	np, ok := opts["num_predict"].(float64)
	if !ok || np <= 0 {
		f.problem("num_predict %v, want > 0", opts["num_predict"])
	}
	if _, ok := opts["seed"].(float64); !ok {
		f.problem("seed %v missing", opts["seed"])
	}
	if tokens+int(np) > f.numCtx {
		f.problem("request needs %d prompt + %d answer tokens, num_ctx is %d", tokens, int(np), f.numCtx)
	}
	if len(keys) == 0 {
		f.problem("no cards in the prompt")
	}
	var schema struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type    string   `json:"type"`
			Minimum *float64 `json:"minimum"`
			Maximum *float64 `json:"maximum"`
		} `json:"properties"`
		Required             []string `json:"required"`
		AdditionalProperties *bool    `json:"additionalProperties"`
	}
	if err := json.Unmarshal(format, &schema); err != nil {
		f.problem("format %s: %v", format, err)
		return
	}
	if schema.Type != "object" || schema.AdditionalProperties == nil || *schema.AdditionalProperties {
		f.problem("format %s: want an object with additionalProperties false", format)
	}
	if !slices.Equal(schema.Required, keys) {
		f.problem("format required %v, want the prompt's ids %v", schema.Required, keys)
	}
	if len(schema.Properties) != len(keys) {
		f.problem("format has %d properties, want %d", len(schema.Properties), len(keys))
	}
	for _, k := range keys {
		p, ok := schema.Properties[k]
		if !ok || p.Type != "integer" || p.Minimum == nil || *p.Minimum != 0 || p.Maximum == nil || *p.Maximum != 100 {
			f.problem("format property %s = %+v, want integer 0-100", k, p)
		}
	}
}

func (f *fake) stats() (int, [][]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests, slices.Clone(f.cards), slices.Clone(f.problems)
}
