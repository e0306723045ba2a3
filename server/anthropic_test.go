package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/server"
)

// anthropicUpstream answers Messages requests: request n gets a thinking block with a
// signature, text and a tool_use "toolu_n"; request 2 also a server_tool_use and its
// web_search_tool_result (the SDK sends all of them back). A streaming request gets
// streamWords as text deltas, the first alone until the client has seen it.
func anthropicUpstream(gate *streamGate) func(http.ResponseWriter, *http.Request, []byte) {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		k := n.Add(1)
		if gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			writeSSE(w, "message_start", `{"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`)
			writeSSE(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			for i, word := range streamWords {
				writeSSE(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, word))
				if i == 0 {
					gate.wait()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
			writeSSE(w, "content_block_stop", `{"type":"content_block_stop","index":0}`)
			writeSSE(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`)
			writeSSE(w, "message_stop", `{"type":"message_stop"}`)
			return
		}
		server := ""
		if k == 2 {
			server = `{"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{"query":"go parser EOF"}},` +
				`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_01","content":[{"type":"web_search_result","url":"https://go.dev/ref/spec","title":"The Go Spec","encrypted_content":"EqgfCioIARgBIiQ3","page_age":null}]},`
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", fmt.Sprintf("req_%d", k))
		fmt.Fprintf(w, `{"id":"msg_%d","type":"message","role":"assistant","model":"claude-test","content":[`+
			`{"type":"thinking","thinking":"Step %d needs a build.","signature":"EqQBCkgIARABGAIiQL%dsig+/=="},`+
			`%s{"type":"text","text":"Running step %d."},`+
			`{"type":"tool_use","id":"toolu_%d","name":"run_command","input":{"command":"make step%d"}}],`+
			`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`, k, k, k, server, k, k, k)
	}
}

// The Anthropic SDK through the proxy: the same pruning as the OpenAI test, with a
// 1-hour cache_control marker on a pruned tool result kept with its ttl; thinking
// blocks with signatures, server_tool_use and web_search_tool_result blocks, the
// image and the document are never touched (every byte outside the pruned texts is
// checked); a streamed answer arrives event by event.
func TestAnthropicSDKThroughProxy(t *testing.T) {
	gate := newStreamGate()
	up := newRecorder(t, anthropicUpstream(gate))
	env := newProxy(t, server.Options{AnthropicUpstream: up.URL})
	sent := &sentBodies{}
	client := anthropic.NewClient(
		option.WithBaseURL(env.http.URL),
		option.WithAPIKey("sk-ant-test-key"),
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
	tools := []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"command": map[string]any{"type": "string"}},
	}, "run_command"), anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"id": map[string]any{"type": "string"}},
	}, "recall")}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(
		anthropic.NewTextBlock("Fix the failing parser test. Screenshot and notes attached."),
		anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="),
		anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: strings.Repeat("Design notes: the parser must accept trailing commas. ", 40)}),
	)}
	params := func() anthropic.MessageNewParams {
		return anthropic.MessageNewParams{
			Model: "claude-test", MaxTokens: 1024, Messages: msgs, Tools: tools,
			System: []anthropic.TextBlockParam{{Text: "You are a coding agent. Use run_command."}},
		}
	}
	const requests = 8
	for r := 1; r <= requests; r++ {
		resp, err := client.Messages.New(ctx, params())
		if err != nil {
			t.Fatalf("request %d: %v", r, err)
		}
		var useID string
		for _, blk := range resp.Content {
			if blk.Type == "tool_use" {
				useID = blk.ID
			}
		}
		if useID != fmt.Sprintf("toolu_%d", r) {
			t.Fatalf("request %d: answer %s", r, resp.RawJSON())
		}
		result := anthropic.ToolResultBlockParam{
			ToolUseID: useID,
			Content:   []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: toolOutput(r)}}},
		}
		if r == 1 {
			result.CacheControl = anthropic.CacheControlEphemeralParam{TTL: anthropic.CacheControlEphemeralTTLTTL1h}
		}
		msgs = append(msgs, resp.ToParam(), anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfToolResult: &result}))
	}

	stream := client.Messages.NewStreaming(ctx, params())
	var words []string
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "content_block_delta" && ev.Delta.Text != "" {
			if len(words) == 0 {
				close(gate.first)
			}
			words = append(words, ev.Delta.Text)
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

	// Tool result k sits at messages.(2k); odd k is pruned from request k+3 on.
	stubs := map[int]string{}
	for r := 1; r <= requests+1; r++ {
		sentBody, got := sent.get(r-1), up.body(r-1)
		var paths []string
		var ks []int
		for k := 1; k <= r-3; k += 2 {
			paths = append(paths, fmt.Sprintf("messages.%d.content.0.content.0.text", 2*k))
			ks = append(ks, k)
		}
		raws := checkOnlyChanged(t, sentBody, got, paths)
		for i, k := range ks {
			stub := gjson.Parse(raws[i]).String()
			if !strings.HasPrefix(stub, "[pruned: run_command make step") || !strings.HasSuffix(stub, `") restores it]`) {
				t.Errorf("request %d: output %d became %q", r, k, stub)
			}
			if first, ok := stubs[k]; !ok {
				stubs[k] = raws[i]
			} else if first != raws[i] {
				t.Errorf("request %d: stub of output %d changed", r, k)
			}
		}
		if r >= 4 {
			if ttl := gjson.GetBytes(got, "messages.2.content.0.cache_control.ttl").String(); ttl != "1h" {
				t.Errorf("request %d: cache_control ttl on the pruned result is %q", r, ttl)
			}
		}
	}
	if len(stubs) != 3 {
		t.Fatalf("pruned outputs %v; want 1, 3 and 5", stubs)
	}
	// The blocks that must pass untouched really were in the requests.
	last := up.body(requests)
	for path, want := range map[string]string{
		"messages.0.content.1.type":                        "image",
		"messages.0.content.2.type":                        "document",
		"messages.1.content.0.signature":                   "EqQBCkgIARABGAIiQL1sig+/==",
		"messages.3.content.1.type":                        "server_tool_use",
		"messages.3.content.2.type":                        "web_search_tool_result",
		"messages.3.content.2.content.0.encrypted_content": "EqgfCioIARgBIiQ3",
	} {
		if got := gjson.GetBytes(last, path).String(); got != want {
			t.Errorf("%s = %q; want %q", path, got, want)
		}
	}
	up.mu.Lock()
	h := up.headers[0]
	up.mu.Unlock()
	checkHeadersPassed(t, sent.headers[0], h)
	if h.Get("Authorization") != "Bearer sk-ant-test-key" || h.Get("Anthropic-Version") == "" {
		t.Errorf("upstream headers: %v", h)
	}
}
