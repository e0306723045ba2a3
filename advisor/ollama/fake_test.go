package ollama

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
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
	"unicode/utf8"

	"github.com/ollama/ollama/api"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// fake is an httptest Ollama 0.17.4 that speaks as OLLAMA-WIRE.md describes the
// real server, and checks every /api/chat request it gets:
//   - it has one model (f.model); any other name gets 404 `model 'x' not found`
//     from /api/chat and /api/show;
//   - its tokenizer needs ratio times the o200k tokens of the prompt, plus
//     fakeTemplateTokens; a prompt over num_ctx is cut from the front and still
//     answered (prompt_eval_count = num_ctx) when `truncate` is absent, and
//     refused with 400 "the input length exceeds the context length" when it is
//     false (unless ignoreTruncate: a server that knows neither truncate nor
//     shift);
//   - it pads its answers with whitespace in every place the grammar allows,
//     before ':' and after '}' too (fakePads), one token per character, and stops
//     at num_predict (done_reason "length") or, under `shift: false`, where the
//     context is full;
//   - `think` absent on a model that thinks: 200, empty message, done false;
//     `think: true` on one that does not: 400 `"x" does not support thinking`;
//   - durations as measured: 30 ms per generated token of wall time (10 ms
//     reported as eval), a 2.3 s load on the first request and 0.15 s after.
//
// tokenDelay, when set, is slept per generated token, so wall time scales with
// the cards as it does on the real server (load_duration is then 0).
type fake struct {
	t              *testing.T
	model          string        // the model the server has
	numCtx         int           // expected num_ctx
	thinks         bool          // the model's template can think
	ratio          float64       // model tokens per o200k token of the prompt; 0 means 1
	ignoreTruncate bool          // know neither truncate nor shift (an older server): cut long prompts, shift the context
	tokenDelay     time.Duration // real time slept per generated token

	// reply decides the answer to request n (1-based) with card keys and args as
	// found in the prompt. nil answers every card with its value.
	reply func(n int, keys, args []string) reply
	// value gives a card's answer from its args (default 50). Cards the model
	// never saw (cut from a truncated prompt) get unseenValue.
	value map[string]int

	mu       sync.Mutex
	requests int
	loaded   bool
	cards    [][]string      // args of the cards of each request, in order
	bodies   [][]byte        // each /api/chat request body as received
	served   []time.Duration // wall time of each /api/chat answer
	problems []string
}

// unseenValue is what the fake answers for cards cut from a truncated prompt: the
// grammar still forces a value for every key, but it is noise.
const unseenValue = 77

// fakeTemplateTokens is the fake's chat template cost per request (qwen2.5's role
// markers: about 5 tokens per message).
const fakeTemplateTokens = 10

// fakePads are the whitespace strings the fake puts, in turn, at each place the
// grammar allows it (average 2.5 characters, so 18-20 tokens per card with the
// JSON: the 13-23 seen on the real server).
var fakePads = []string{"\n\t\t", "\n\t\t\t", "", " ", "\n\n\t ", " ", "\t\t", "\n\t\t  "}

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

// runnerStopped is the real server's 500 text for a runner killed mid-request.
const runnerStopped = "model runner has unexpectedly stopped, this may be due to resource limitations or an internal error, check ollama server logs for details"

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

// chatRequest is what the fake reads of a /api/chat body.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Stream    *bool           `json:"stream"`
	Think     json.RawMessage `json:"think"`
	Truncate  *bool           `json:"truncate"`
	Shift     *bool           `json:"shift"`
	Format    json.RawMessage `json:"format"`
	KeepAlive string          `json:"keep_alive"`
	Options   map[string]any  `json:"options"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":%q}`, msg)
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/version":
		fmt.Fprint(w, `{"version":"0.17.4"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/api/tags":
		fmt.Fprintf(w, `{"models":[{"name":%q,"model":%q,"size":397821319,"details":{"family":"qwen2","parameter_size":"494.03M","quantization_level":"Q4_K_M"}}]}`, f.model, f.model)
	case r.Method == http.MethodPost && r.URL.Path == "/api/show":
		var req struct {
			Model string `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if req.Model != f.model {
			writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
			return
		}
		fmt.Fprint(w, `{"details":{"family":"qwen2","parameter_size":"494.03M"},"capabilities":["completion"]}`)
	case r.Method == http.MethodPost && r.URL.Path == "/api/chat":
		f.chat(w, r)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `404 page not found`)
	}
}

func (f *fake) chat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(r.Body)
	var req chatRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		f.problem("request body: %v", err)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var text strings.Builder
	for _, m := range req.Messages {
		text.WriteString(m.Content)
		text.WriteString("\n")
	}
	keys, args := cardsIn(text.String())
	o200k := tokencount.Count(text.String())
	f.mu.Lock()
	f.requests++
	n := f.requests
	f.cards = append(f.cards, args)
	f.bodies = append(f.bodies, body)
	first := !f.loaded
	f.loaded = true
	f.mu.Unlock()
	f.check(req, keys, o200k)

	if req.Model != f.model {
		writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", req.Model))
		return
	}
	think := strings.TrimSpace(string(req.Think))
	switch {
	case think == "" && f.thinks:
		f.write(w, req.Model, map[string]any{"message": map[string]any{"role": "assistant", "content": ""}, "done": false})
		return
	case think != "" && think != "false" && !f.thinks:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q does not support thinking", req.Model))
		return
	}
	numCtx := intOption(req.Options, "num_ctx", 2048)
	promptTokens := int(math.Ceil(f.tokenRatio()*float64(o200k))) + fakeTemplateTokens
	seen := text.String()
	if promptTokens > numCtx {
		if req.Truncate != nil && !*req.Truncate && !f.ignoreTruncate {
			writeError(w, http.StatusBadRequest, "the input length exceeds the context length")
			return
		}
		// The runner keeps the first few tokens and the last ones: the system
		// prompt and the first cards are gone.
		keep := len(seen) * numCtx / promptTokens
		seen = seen[len(seen)-keep:]
		promptTokens = numCtx
	}
	rep := reply{}
	if f.reply != nil {
		rep = f.reply(n, keys, args)
	}
	if rep.content == "" && rep.status == 0 && !rep.inband && !rep.slow && !rep.reset {
		rep.content = f.answer(keys, args, seen)
	}
	switch {
	case rep.status != 0:
		writeError(w, rep.status, rep.errText)
	case rep.inband:
		fmt.Fprintf(w, `{"error":%q}`, rep.errText)
	case rep.slow:
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	case rep.reset:
		f.reset(w, req.Model)
	case rep.notDone:
		// Silent truncation: 200, done false, no done_reason, no metrics.
		f.write(w, req.Model, map[string]any{"message": map[string]any{"role": "assistant", "content": rep.content}, "done": false})
	default:
		f.generate(w, r, req, rep, promptTokens, numCtx, first)
		f.mu.Lock()
		f.served = append(f.served, time.Since(start))
		f.mu.Unlock()
	}
}

// generate writes a complete answer: rep.content cut at num_predict, or under
// shift false where the context is full, with realistic durations.
func (f *fake) generate(w http.ResponseWriter, r *http.Request, req chatRequest, rep reply, promptTokens, numCtx int, first bool) {
	content, reason := rep.content, cmpOr(rep.reason, "stop")
	limit := intOption(req.Options, "num_predict", -1)
	if req.Shift != nil && !*req.Shift && !f.ignoreTruncate && (limit < 0 || numCtx-promptTokens < limit) {
		limit = numCtx - promptTokens
	}
	if runes := []rune(content); limit >= 0 && len(runes) > limit {
		content, reason = string(runes[:limit]), "length"
	}
	evalCount := utf8.RuneCountInString(content)
	if f.tokenDelay > 0 {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(time.Duration(evalCount) * f.tokenDelay):
		}
	}
	load := 150 * time.Millisecond
	switch {
	case f.tokenDelay > 0:
		load = 0 // the wall time is real: nothing of it was loading
	case first:
		load = 2293117679
	}
	promptEval := time.Duration(promptTokens) * 166 * time.Microsecond // 842 tokens in 0.14 s
	f.write(w, req.Model, map[string]any{
		"message":     map[string]any{"role": "assistant", "content": content},
		"done":        true,
		"done_reason": reason, "total_duration": load + promptEval + time.Duration(evalCount)*30*time.Millisecond,
		"load_duration": load, "prompt_eval_count": promptTokens, "prompt_eval_duration": promptEval,
		"eval_count": evalCount, "eval_duration": time.Duration(evalCount) * 10 * time.Millisecond,
	})
}

func (f *fake) write(w http.ResponseWriter, model string, fields map[string]any) {
	fields["model"] = model
	fields["created_at"] = "2026-11-30T10:54:58.076234093Z"
	body, _ := json.Marshal(fields)
	w.Write(body)
}

// reset sends part of a 200 body, then resets the connection.
func (f *fake) reset(w http.ResponseWriter, model string) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		f.problem("hijack: %v", err)
		return
	}
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 400\r\n\r\n")
	buf.WriteString(`{"model":"` + model + `","created_at":"2026-11-30T10:54:58.076234093Z","message":{"role":"assistant","content":"{\n\t\"c1\": 4`)
	buf.Flush()
	time.Sleep(20 * time.Millisecond)
	conn.(*net.TCPConn).SetLinger(0) // close with RST
	conn.Close()
}

func (f *fake) tokenRatio() float64 {
	if f.ratio <= 0 {
		return 1
	}
	return f.ratio
}

func intOption(opts map[string]any, name string, def int) int {
	if v, ok := opts[name].(float64); ok {
		return int(v)
	}
	return def
}

// cardsIn returns the keys and args of the cards in a prompt text, in order.
func cardsIn(text string) (keys, args []string) {
	for _, sm := range cardLine.FindAllStringSubmatch(text, -1) {
		keys = append(keys, sm[1])
		args = append(args, sm[2])
	}
	return keys, args
}

// answer is a valid content for keys, padded as the real server pads it: every
// card the model saw (its line is in seen) gets its value, the others
// unseenValue.
func (f *fake) answer(keys, args []string, seen string) string {
	visible := map[string]bool{}
	seenKeys, _ := cardsIn(seen)
	for _, k := range seenKeys {
		visible[k] = true
	}
	slot := 0
	pad := func() string {
		slot++
		return fakePads[(slot-1)%len(fakePads)]
	}
	var b strings.Builder
	b.WriteString("{" + pad())
	for i, k := range keys {
		v, ok := f.value[args[i]]
		if !ok {
			v = 50
		}
		if !visible[k] {
			v = unseenValue
		}
		if i > 0 {
			b.WriteString("," + pad())
		}
		fmt.Fprintf(&b, "%q%s:%s%d%s", k, pad(), pad(), v, pad())
	}
	b.WriteString("}" + pad())
	return b.String()
}

// check records what is wrong with a request.
func (f *fake) check(req chatRequest, keys []string, o200k int) {
	if req.Stream == nil || *req.Stream {
		f.problem("stream is %v, want false", req.Stream)
	}
	if string(req.Think) != "false" {
		f.problem("think is %s, want false", req.Think)
	}
	if req.Truncate == nil || *req.Truncate {
		f.problem("truncate is %v, want false", req.Truncate)
	}
	if req.Shift == nil || *req.Shift {
		f.problem("shift is %v, want false", req.Shift)
	}
	if req.KeepAlive != "2m0s" {
		f.problem("keep_alive %q, want 2m0s", req.KeepAlive)
	}
	opts := req.Options
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
	if o200k+int(np) > f.numCtx {
		f.problem("request needs %d prompt + %d answer tokens, num_ctx is %d", o200k, int(np), f.numCtx)
	}
	if len(keys) == 0 {
		f.problem("no cards in the prompt")
	}
	f.checkFormat(req.Format, keys)
}

func (f *fake) checkFormat(format json.RawMessage, keys []string) {
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

func (f *fake) servedTimes() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.served)
}
