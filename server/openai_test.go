package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/server"
)

// toolOutput is the text the fake agent's tool returns at turn k: odd turns a build
// log the noiseScorer scores 0.05, even turns parser source it scores 0.9. About 400
// tokens each.
func toolOutput(k int) string {
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		if k%2 == 1 {
			fmt.Fprintf(&b, "NOISE build log %d line %d: compiling package internal/p%d <ok> & cached\n", k, i, i)
		} else {
			fmt.Fprintf(&b, "parser.go:%d: func parseExpr%d(tok Token) (*Node, error) { return nil, errEOF }\n", 100+i, i)
		}
	}
	return b.String()
}

// streamGate lets a fake upstream hold back the rest of a stream until the client
// has seen the first event: if the proxy buffered, the client never would.
type streamGate struct {
	first    chan struct{}
	timedOut atomic.Bool
}

func newStreamGate() *streamGate { return &streamGate{first: make(chan struct{})} }

// wait blocks until the client saw the first event, or 5 s.
func (g *streamGate) wait() {
	select {
	case <-g.first:
	case <-time.After(5 * time.Second):
		g.timedOut.Store(true)
	}
}

func writeSSE(w http.ResponseWriter, event, data string) {
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

var streamWords = []string{"The ", "parser ", "test ", "passes ", "now."}

// openAIUpstream answers chat completions: request n gets a tool call
// "call_n" to run_command; a streaming request gets streamWords as deltas, the
// first one alone until the client has seen it.
func openAIUpstream(gate *streamGate) func(http.ResponseWriter, *http.Request, []byte) {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		k := n.Add(1)
		if gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Request-Id", "req_stream")
			for i, word := range streamWords {
				chunk := fmt.Sprintf(`{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`, word)
				writeSSE(w, "", chunk)
				if i == 0 {
					gate.wait()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
			writeSSE(w, "", `{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
			writeSSE(w, "", "[DONE]")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", fmt.Sprintf("req_%d", k))
		fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","created":1,"model":"gpt-test",`+
			`"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Step %d: running it.",`+
			`"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"make step%d\"}"}}]}}],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, k, k, k, k)
	}
}

// A multi-turn tool-using conversation through the proxy with the real OpenAI SDK:
// the NOISE outputs older than K = 2 steps are pruned (turn k's output is a candidate
// from request k+3), each stub is byte-identical on every later request, every other
// byte is what the SDK sent, the originals come back from GET /v1/recall/{id}, and a
// streamed answer arrives event by event.
func TestOpenAISDKThroughProxy(t *testing.T) {
	gate := newStreamGate()
	up := newRecorder(t, openAIUpstream(gate))
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL})
	sent := &sentBodies{}
	client := openai.NewClient(
		option.WithBaseURL(env.http.URL+"/v1"),
		option.WithAPIKey("sk-test-openai-key"),
		option.WithMaxRetries(0),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			if err := sent.add(req); err != nil {
				return nil, err
			}
			return next(req)
		}),
	)
	ctx := context.Background()
	// The agent has the recall tool its stubs name (the server's default, "recall").
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name:       "run_command",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}},
	}), openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name:       "recall",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}},
	})}
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are a coding agent. Use run_command."),
		openai.UserMessage("Fix the failing parser test."),
	}
	const requests = 8
	for r := 1; r <= requests; r++ {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-test", Messages: msgs, Tools: tools})
		if err != nil {
			t.Fatalf("request %d: %v", r, err)
		}
		m := resp.Choices[0].Message
		if len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != fmt.Sprintf("call_%d", r) {
			t.Fatalf("request %d: answer %+v", r, m)
		}
		msgs = append(msgs, m.ToParam(), openai.ToolMessage(toolOutput(r), m.ToolCalls[0].ID))
	}

	// Streamed final answer.
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-test", Messages: msgs, Tools: tools})
	var words []string
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			if len(words) == 0 {
				close(gate.first)
			}
			words = append(words, ch.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if gate.timedOut.Load() {
		t.Error("the client saw no event before the upstream finished: the stream was buffered")
	}
	if d := cmp.Diff(streamWords, words); d != "" {
		t.Errorf("streamed deltas (-want +got):\n%s", d)
	}

	// Request r carries tool outputs 1..r-1; output k sits at messages.(2k+1) and is
	// pruned from request k+3 on when k is odd (NOISE).
	stubs := map[int]string{}
	for r := 1; r <= requests+1; r++ {
		var paths []string
		var ks []int
		for k := 1; k <= r-3; k += 2 {
			paths = append(paths, fmt.Sprintf("messages.%d.content", 2*k+1))
			ks = append(ks, k)
		}
		raws := checkOnlyChanged(t, sent.get(r-1), up.body(r-1), paths)
		for i, k := range ks {
			stub := gjson.Parse(raws[i]).String()
			if !strings.HasPrefix(stub, "[pruned: run_command") || !strings.Contains(stub, `; recall("o_`) || !strings.HasSuffix(stub, `") restores it]`) {
				t.Errorf("request %d: output %d became %q; want a stub", r, k, stub)
			}
			if first, ok := stubs[k]; !ok {
				stubs[k] = raws[i]
			} else if first != raws[i] {
				t.Errorf("request %d: stub of output %d changed:\n%s\nwas\n%s", r, k, raws[i], first)
			}
		}
	}
	if len(stubs) != 3 {
		t.Fatalf("pruned outputs %v; want 1, 3 and 5", stubs)
	}

	// Each stub's recall id gives the original back, byte for byte.
	for k, raw := range stubs {
		stub := gjson.Parse(raw).String()
		i := strings.Index(stub, `recall("`)
		id := stub[i+len(`recall("`) : i+len(`recall("`)+advisor.RecallIDLen]
		resp, err := http.Get(env.http.URL + "/v1/recall/" + id)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != toolOutput(k) {
			t.Errorf("recall %s (output %d): %d %q", id, k, resp.StatusCode, clip(got))
		}
	}

	// The upstream saw the SDK's credential; the proxy's own headers never.
	up.mu.Lock()
	h := up.headers[0]
	up.mu.Unlock()
	checkHeadersPassed(t, sent.headers[0], h)
	if h.Get("Authorization") != "Bearer sk-test-openai-key" || h.Get(server.HeaderSession) != "" {
		t.Errorf("upstream headers: %v", h)
	}
	metrics := scrape(t, env.http.URL)
	for _, want := range []string{
		`pruneadvisor_outputs_pruned_total{reason="score"} 3`,
		`pruneadvisor_rewrites_total{reason="over-budget"} 3`,
		`pruneadvisor_requests_total{code="200",route="openai"} 9`,
		`pruneadvisor_recalls_total{result="ok"} 3`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
