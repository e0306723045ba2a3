package main

// The script command ledger.txtar uses: real proxied traffic, from the real SDK
// clients through server.Server into a database, for `pruneadvisor ledger` to read.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// noiseScorer keeps outputs whose head says NOISE at 0.05, the others at 0.9.
var noiseScorer = testkit.Noise("noise-test")

// trafficOutput is the tool output of turn k: a NOISE build log on odd turns.
func trafficOutput(k int) string {
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		if k%2 == 1 {
			fmt.Fprintf(&b, "NOISE build log %d line %d: compiling package internal/p%d <ok>\n", k, i, i)
		} else {
			fmt.Fprintf(&b, "parser.go:%d: func parseExpr%d(tok Token) (*Node, error) { return nil, errEOF }\n", 100+i, i)
		}
	}
	return b.String()
}

// cmdLedgerTraffic is the script command `ledgertraffic DB`: it serves a proxy on
// the database DB (K = 2, candidates from 50 tokens, a 1,000-token budget, the
// noise-test scorer, a clock that starts at 2026-05-04 10:00 UTC and moves 10 s per
// reading) in front of fake Anthropic and OpenAI upstreams, and sends through it,
// with the real SDKs: session agent-a, 8 Messages requests of a tool loop (three
// rewrites) and a streamed one, then one recall of its first stub; session agent-b,
// 3 Chat Completions requests, a stream with include_usage and one without;
// session agent-c, one request the upstream answers 429. The upstreams report
// usage from a fake prompt cache (promptCache).
func cmdLedgerTraffic(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: ledgertraffic DB")
	}
	ctx := context.Background()
	db, err := storage.Open(ctx, ts.MkAbs(args[0]))
	ts.Check(err)
	defer db.Close()
	var last atomic.Value // the last body the Anthropic upstream got
	anth := httptest.NewServer(trafficAnthropic(&last))
	defer anth.Close()
	oai := httptest.NewServer(trafficOpenAI())
	defer oai.Close()
	cfg := advisor.DefaultConfig()
	cfg.ProtectedSteps, cfg.MinCandidateTokens, cfg.Budget = 2, 50, 1000
	cfg.PriceForced = false // every over-budget rewrite goes: the ledger must show rewrites
	var ticks atomic.Int64
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	srv, err := server.New(server.Options{
		Config: cfg, Scorer: noiseScorer, Store: db, Ledger: db, AnthropicUpstream: anth.URL, OpenAIUpstream: oai.URL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock:  func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * 10 * time.Second) },
	})
	ts.Check(err)
	proxy := httptest.NewServer(srv.Handler())
	defer proxy.Close()

	trafficAgentA(ts, proxy.URL)
	id := regexp.MustCompile(`recall\(\\?"(o_[0-9a-f]+)\\?"\)`).FindSubmatch(last.Load().([]byte))
	if id == nil {
		ts.Fatalf("no stub in the last request")
	}
	resp, err := http.Get(proxy.URL + "/v1/recall/" + string(id[1]))
	ts.Check(err)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		ts.Fatalf("recall: %s", resp.Status)
	}
	trafficAgentB(ts, proxy.URL)
	c := anthropic.NewClient(aoption.WithBaseURL(proxy.URL), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0),
		aoption.WithHeader(server.HeaderSession, "agent-c"))
	if _, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("rate me"))}}); err == nil {
		ts.Fatalf("agent-c: the 429 did not come through")
	}
	ts.Check(srv.Flush(ctx))
}

// trafficAgentA runs session agent-a.
func trafficAgentA(ts *testscript.TestScript, base string) {
	ctx := context.Background()
	// The agent has the recall tool the stubs name, as wrap tells the proxy (the
	// header is not forwarded: the bodies and their usage are as without it).
	client := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0),
		aoption.WithHeader(server.HeaderSession, "agent-a"), aoption.WithHeader(server.HeaderRecallTool, "recall"))
	tools := []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"command": map[string]any{"type": "string"}}}, "run_command")}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Fix the failing parser test."))}
	params := func() anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 1024, Messages: msgs, Tools: tools,
			System: []anthropic.TextBlockParam{{Text: "You are a coding agent. Use run_command."}}}
	}
	for k := 1; k <= 8; k++ {
		resp, err := client.Messages.New(ctx, params())
		ts.Check(err)
		msgs = append(msgs, resp.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(resp.Content[1].ID, trafficOutput(k), false)))
	}
	stream := client.Messages.NewStreaming(ctx, params())
	for stream.Next() {
	}
	ts.Check(stream.Err())
}

// trafficAgentB runs session agent-b.
func trafficAgentB(ts *testscript.TestScript, base string) {
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0),
		option.WithHeader(server.HeaderSession, "agent-b"), option.WithHeader(server.HeaderRecallTool, "recall"))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a coding agent."), openai.UserMessage("Fix it.")}
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "run_command"})}
	for k := 1; k <= 3; k++ {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-test", Messages: msgs, Tools: tools})
		ts.Check(err)
		m := resp.Choices[0].Message
		msgs = append(msgs, m.ToParam(), openai.ToolMessage(trafficOutput(k), m.ToolCalls[0].ID))
	}
	for _, include := range []bool{true, false} {
		p := openai.ChatCompletionNewParams{Model: "gpt-test", Messages: msgs, Tools: tools}
		if include {
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		stream := client.Chat.Completions.NewStreaming(ctx, p)
		for stream.Next() {
		}
		ts.Check(stream.Err())
	}
}

func sse(w http.ResponseWriter, event, data string) {
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

// promptCache is a fake upstream's prompt cache, as providers keep one: a request
// reads from the cache the longest prefix it shares with the one before (in
// tokens of 4 bytes, the usual rule of thumb) and writes the rest.
type promptCache struct {
	mu   sync.Mutex
	prev []byte
}

// split returns the request's cached and written tokens.
func (c *promptCache) split(body []byte) (read, write int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for n < len(body) && n < len(c.prev) && body[n] == c.prev[n] {
		n++
	}
	c.prev = body
	return n / 4, (len(body) - n) / 4
}

// trafficAnthropic is a Messages upstream with a promptCache: output 20 + k for
// request k; streams carry message_start and message_delta usage (their writes
// split 5m/1h two to one); a request whose message says "rate me" gets 429. last
// keeps the latest body.
func trafficAnthropic(last *atomic.Value) http.HandlerFunc {
	var n atomic.Int64
	cache := &promptCache{}
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		last.Store(body)
		if bytes.Contains(body, []byte("rate me")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
			return
		}
		k := n.Add(1)
		read, write := cache.split(body)
		usage := fmt.Sprintf(`"input_tokens":3,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d`, write, read)
		if gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, "message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{%s,"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":%d},"output_tokens":1}}}`,
				usage, write-write/3, write/3))
			sse(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			sse(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Fixed."}}`)
			sse(w, "content_block_stop", `{"type":"content_block_stop","index":0}`)
			sse(w, "message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{%s,"output_tokens":%d}}`, usage, 20+k))
			sse(w, "message_stop", `{"type":"message_stop"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_%d","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Step %d."},`+
			`{"type":"tool_use","id":"toolu_%d","name":"run_command","input":{"command":"make step%d"}}],"stop_reason":"tool_use","stop_sequence":null,`+
			`"usage":{%s,"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":0},"output_tokens":%d}}`, k, k, k, k, usage, write, 20+k)
	}
}

// trafficOpenAI is a Chat Completions upstream with a promptCache (cached in
// whole 128-token blocks, as OpenAI's are), 10 + k completion tokens for request
// k; a stream sends its usage chunk only when the request asks for it.
func trafficOpenAI() http.HandlerFunc {
	var n atomic.Int64
	cache := &promptCache{}
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		k := int(n.Add(1))
		read, write := cache.split(body)
		read -= read % 128
		prompt := read + write
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
			prompt, 10+k, prompt+10+k, read)
		if gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, "", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"Fixed."},"finish_reason":"stop"}]}`)
			if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
				sse(w, "", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":`+usage+`}`)
			}
			sse(w, "", "[DONE]")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"finish_reason":"tool_calls",`+
			`"message":{"role":"assistant","content":"Step %d.","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"run_command","arguments":"{}"}}]}}],"usage":%s}`,
			k, k, k, usage)
	}
}
