package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// The scripted model: one fake server per wire protocol (Anthropic Messages, OpenAI
// Responses, Gemini generateContent), streaming included, that drives an agent
// through the same script whatever it is: read a file, edit it, read it again
// whole, run a command twice, read a large file, recall an id it finds in a stub,
// and finish. The step it is at is the number of tool results in the request (read
// with pruneadvisor's own request readers); requests without the agent's tools
// (titles, next-speaker checks) get a short text answer.

// action is one step of the script, in the agent's own tool vocabulary.
type action struct {
	tool string
	args map[string]any
	// custom marks a Responses custom (freeform) tool call whose input is args["input"].
	custom bool
	// namespace is the Responses namespace tool the function belongs to (Codex lists
	// MCP servers' tools as {type: namespace, name: mcp__<server>, tools}).
	namespace string
	// text, in a plan without a tool, is an answer that does not end the task:
	// the next next-speaker check (Gemini CLI's) says the model goes on.
	text string
}

// script maps a step to the agent's tool call; recall is given the stub's id.
type script struct {
	read, edit, reread, shell1, shell2, large func() action
	recall                                    func(id string) action
}

// finalText is what the model says when it is done.
const finalText = "All done: the port is fixed."

// stubIDRe finds a stub's recall id and the tool it names.
var stubIDRe = regexp.MustCompile(`\[pruned: [^\]]*?superseded by call[^\]]*?; ([A-Za-z0-9_\-.:]+)\(\\*"(o_[0-9]{12})\\*"\) restores it\]`)

// model is the fake upstream of one agent's run.
type model struct {
	t      *testing.T
	proto  string // anthropic | responses | gemini
	agent  string
	script script
	// readTool is a tool name every main-loop request of the agent lists.
	readTool string
	// plan, when set, replaces script: the model answers its k-th main-loop
	// request with steps[k] (counted by the model, not by the tool results in the
	// request, so that a compaction that drops them does not start it over), and
	// with finalText after the last.
	plan []func() action
	// compactMark is a phrase of the agent's own compaction prompt: a request
	// holding it is the agent compacting, answered with summaryText.
	compactMark string

	mu       sync.Mutex
	requests []recorded // as the proxy forwarded them
	steps    []string   // what the model did per main-loop request
	recallID string     // the id it recalled
	recallBy string     // the tool the stub named
	recallAt int        // index in requests of the request answered with the recall
	toolList []string   // tool names of the first main-loop request
	n        int
	planned  int // main-loop requests answered from plan
	// goOn makes the next next-speaker check answer "model" (action.text).
	goOn bool
}

type recorded struct {
	path string
	body []byte
	main bool
	at   time.Time
	// tokens is the input the usage of the answer reports (requestTokens).
	tokens int
	// compaction marks the agent's summarising request (model.compactMark).
	compaction bool
}

// outputTokens is the output every answer's usage reports.
const outputTokens = 10

// summaryText is the fake's answer to a compaction request: the agent carries on
// from it. In <analysis> and <summary> blocks, as Claude Code asks (it asks
// again when the summary is not in <summary> tags); the others take any text.
const summaryText = "<analysis>The user asked for a fix; the files are read.</analysis>\n<summary>\n## Goal\nFix main.go so the server reads $PORT.\n## Progress\nRead the numbered files; nothing is left to do but answer.\n## Next steps\nAnswer the user.\n</summary>"

// requestTokens is the input tokens the fake reports for a request: the o200k
// tokens of the whole body as sent, what a provider's usage counts (tool
// definitions and instructions included) give or take the JSON punctuation, so
// that an agent that compacts by its usage sees the context it really sent.
func requestTokens(body []byte) int {
	return tokencount.Count(string(body))
}

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	switch {
	case r.Method == http.MethodGet || strings.Contains(r.URL.Path, "countTokens") || strings.HasSuffix(r.URL.Path, "/count_tokens"):
		m.other(w, r)
		return
	}
	tokens := requestTokens(body)
	if m.compactMark != "" && strings.Contains(string(body), m.compactMark) {
		m.requests = append(m.requests, recorded{path: r.URL.Path, body: body, at: time.Now(), tokens: tokens, compaction: true})
		m.steps = append(m.steps, "compaction")
		m.reply(w, r, body, action{}, summaryText, tokens)
		return
	}
	main := m.isMain(body)
	if !main && m.toolList == nil {
		m.t.Logf("fake %s: side request %s, tools %s", m.proto, r.URL.Path, gjson.GetBytes(body, "tools.#.name").Raw)
	}
	m.requests = append(m.requests, recorded{path: r.URL.Path, body: body, main: main, at: time.Now(), tokens: tokens})
	if !main {
		m.reply(w, r, body, action{}, m.sideText(body), tokens)
		return
	}
	var a action
	var text string
	if m.plan != nil {
		a, text = m.nextPlanned()
	} else {
		a, text = m.next(body)
	}
	m.reply(w, r, body, a, text, tokens)
}

// nextPlanned answers a main-loop request from m.plan.
func (m *model) nextPlanned() (action, string) {
	k := m.planned
	m.planned++
	if k >= len(m.plan) {
		m.steps = append(m.steps, "final")
		return action{}, finalText
	}
	a := m.plan[k]()
	if a.tool == "" {
		m.steps = append(m.steps, fmt.Sprintf("%d text", k))
		m.goOn = true
		return action{}, a.text
	}
	m.steps = append(m.steps, fmt.Sprintf("%d %s", k, a.tool))
	return a, ""
}

// other answers model listings and token counts.
func (m *model) other(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.Contains(r.URL.Path, "countTokens"):
		_, _ = w.Write([]byte(`{"totalTokens":100}`))
	case strings.HasSuffix(r.URL.Path, "/count_tokens"):
		_, _ = w.Write([]byte(`{"input_tokens":100}`))
	default:
		_, _ = w.Write([]byte(`{"object":"list","data":[],"models":[]}`))
	}
}

// isMain reports whether the request lists the agent's read tool.
func (m *model) isMain(body []byte) bool {
	var names []string
	switch m.proto {
	case "gemini":
		gjson.GetBytes(body, "tools.#.functionDeclarations.#.name").ForEach(func(_, v gjson.Result) bool {
			v.ForEach(func(_, n gjson.Result) bool { names = append(names, n.String()); return true })
			return true
		})
	default:
		gjson.GetBytes(body, "tools.#.name").ForEach(func(_, v gjson.Result) bool { names = append(names, v.String()); return true })
		if len(names) == 0 {
			gjson.GetBytes(body, "tools.#.function.name").ForEach(func(_, v gjson.Result) bool { names = append(names, v.String()); return true })
		}
	}
	for _, n := range names {
		if n == m.readTool {
			if m.toolList == nil {
				m.toolList = names
			}
			return true
		}
	}
	return false
}

// sideText answers a side request: JSON where the request asks for JSON (Gemini
// CLI's next-speaker check), else a short title.
func (m *model) sideText(body []byte) string {
	if gjson.GetBytes(body, "generationConfig.responseMimeType").String() == "application/json" ||
		gjson.GetBytes(body, "generationConfig.responseJsonSchema").Exists() {
		if m.goOn {
			m.goOn = false
			return `{"reasoning":"The model said it goes on.","next_speaker":"model"}`
		}
		return `{"reasoning":"The model finished its task.","next_speaker":"user"}`
	}
	return "Fix the port"
}

// format is the transcript format of the fake's protocol.
func (m *model) format() transcript.Format {
	switch m.proto {
	case "anthropic":
		return transcript.FormatAnthropic
	case "gemini":
		return transcript.FormatGeminiAPI
	}
	return transcript.FormatResponses
}

// next chooses the model's answer to a main-loop request.
func (m *model) next(body []byte) (action, string) {
	s, err := transcript.Read("request", body, transcript.Options{Format: m.format()})
	if err != nil {
		m.t.Errorf("fake %s: request %d does not read: %v", m.proto, m.n, err)
		return action{}, "the request did not read"
	}
	step := len(s.Outputs())
	var a action
	switch step {
	case 0:
		a = m.script.read()
	case 1:
		a = m.script.edit()
	case 2:
		a = m.script.reread()
	case 3:
		a = m.script.shell1()
	case 4:
		a = m.script.shell2()
	case 5:
		a = m.script.large()
	case 6:
		mm := stubIDRe.FindSubmatch(body)
		if mm == nil {
			m.steps = append(m.steps, "no stub to recall")
			return action{}, "NO STUB FOUND"
		}
		m.recallBy, m.recallID = string(mm[1]), string(mm[2])
		m.recallAt = len(m.requests) - 1
		a = m.script.recall(m.recallID)
	default:
		m.steps = append(m.steps, "final")
		return action{}, finalText
	}
	m.steps = append(m.steps, fmt.Sprintf("%d %s", step, a.tool))
	return a, ""
}

// reply writes the model's answer: a tool call when a.tool is set, else text;
// streamed when the request asks for it; its usage reports tokens of input.
func (m *model) reply(w http.ResponseWriter, r *http.Request, body []byte, a action, text string, tokens int) {
	callID := fmt.Sprintf("call_%03d", m.n)
	switch m.proto {
	case "anthropic":
		anthropicReply(w, gjson.GetBytes(body, "stream").Bool(), a, text, "toolu_"+callID, tokens)
	case "responses":
		responsesReply(w, gjson.GetBytes(body, "stream").Bool(), a, text, callID, m.n, tokens)
	case "gemini":
		geminiReply(w, strings.Contains(r.URL.Path, ":streamGenerateContent"), a, text, tokens)
	}
}

func sseEvent(w io.Writer, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func argsJSON(a action) string {
	b, _ := json.Marshal(a.args)
	return string(b)
}

// anthropicReply speaks the Messages API (SSE events or one JSON message).
func anthropicReply(w http.ResponseWriter, stream bool, a action, text, id string, tokens int) {
	usage := map[string]any{"input_tokens": tokens, "output_tokens": outputTokens, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
	var block map[string]any
	stop := "end_turn"
	if a.tool != "" {
		block = map[string]any{"type": "tool_use", "id": id, "name": a.tool, "input": a.args}
		stop = "tool_use"
	} else {
		block = map[string]any{"type": "text", "text": text}
	}
	msg := map[string]any{"id": "msg_" + id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"] = []any{}
	start["stop_reason"] = nil
	sseEvent(w, "message_start", map[string]any{"type": "message_start", "message": start})
	if a.tool != "" {
		sseEvent(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": id, "name": a.tool, "input": map[string]any{}}})
		sseEvent(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": argsJSON(a)}})
	} else {
		sseEvent(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		sseEvent(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": text}})
	}
	sseEvent(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sseEvent(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": outputTokens}})
	sseEvent(w, "message_stop", map[string]any{"type": "message_stop"})
}

// responsesReply speaks the Responses API (SSE events or one response object).
func responsesReply(w http.ResponseWriter, stream bool, a action, text, callID string, n, tokens int) {
	respID := fmt.Sprintf("resp_%03d", n)
	var item map[string]any
	switch {
	case a.tool != "" && a.custom:
		item = map[string]any{"type": "custom_tool_call", "id": "ctc_" + callID, "call_id": callID, "name": a.tool, "input": a.args["input"], "status": "completed"}
	case a.tool != "":
		item = map[string]any{"type": "function_call", "id": "fc_" + callID, "call_id": callID, "name": a.tool, "arguments": argsJSON(a), "status": "completed"}
		if a.namespace != "" {
			item["namespace"] = a.namespace
		}
	default:
		item = map[string]any{"type": "message", "id": "msg_" + callID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	usage := map[string]any{"input_tokens": tokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": outputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": tokens + outputTokens}
	resp := map[string]any{"id": respID, "object": "response", "created_at": 1764590000, "status": "completed", "model": "gpt-5",
		"output": []any{item}, "usage": usage, "error": nil, "incomplete_details": nil}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	ev := func(typ string, v map[string]any) {
		v["type"] = typ
		v["sequence_number"] = seq
		seq++
		sseEvent(w, typ, v)
	}
	inProgress := map[string]any{}
	for k, v := range resp {
		inProgress[k] = v
	}
	inProgress["status"] = "in_progress"
	inProgress["output"] = []any{}
	ev("response.created", map[string]any{"response": inProgress})
	ev("response.in_progress", map[string]any{"response": inProgress})
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	switch item["type"] {
	case "function_call":
		added["arguments"] = ""
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		ev("response.function_call_arguments.delta", map[string]any{"output_index": 0, "item_id": item["id"], "delta": item["arguments"]})
		ev("response.function_call_arguments.done", map[string]any{"output_index": 0, "item_id": item["id"], "arguments": item["arguments"]})
	case "custom_tool_call":
		added["input"] = ""
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		ev("response.custom_tool_call_input.delta", map[string]any{"output_index": 0, "item_id": item["id"], "delta": item["input"]})
		ev("response.custom_tool_call_input.done", map[string]any{"output_index": 0, "item_id": item["id"], "input": item["input"]})
	default:
		added["content"] = []any{}
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
		ev("response.content_part.added", map[string]any{"output_index": 0, "item_id": item["id"], "content_index": 0, "part": part})
		ev("response.output_text.delta", map[string]any{"output_index": 0, "item_id": item["id"], "content_index": 0, "delta": text, "logprobs": []any{}})
		ev("response.output_text.done", map[string]any{"output_index": 0, "item_id": item["id"], "content_index": 0, "text": text, "logprobs": []any{}})
		ev("response.content_part.done", map[string]any{"output_index": 0, "item_id": item["id"], "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
	}
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": resp})
}

// geminiReply speaks generateContent (one JSON object) or streamGenerateContent
// with alt=sse.
func geminiReply(w http.ResponseWriter, stream bool, a action, text string, tokens int) {
	var part map[string]any
	if a.tool != "" {
		part = map[string]any{"functionCall": map[string]any{"name": a.tool, "args": a.args}}
	} else {
		part = map[string]any{"text": text}
	}
	resp := map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": tokens, "candidatesTokenCount": outputTokens, "totalTokenCount": tokens + outputTokens},
		"modelVersion":  "gemini-2.5-pro", "responseId": "r1",
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sseEvent(w, "", resp)
}
