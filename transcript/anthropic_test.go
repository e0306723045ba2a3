package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/tidwall/gjson"
)

// anSDKBody marshals a request the way the Go SDK sends it (MessageNewParams'
// MarshalJSON is what client.Messages.New writes to the wire).
func anSDKBody(t testing.TB) []byte {
	t.Helper()
	img := anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{Data: "iVBORw0KGgo=", MediaType: "image/png"}}}
	shot := anthropic.ToolResultBlockParam{
		ToolUseID: "toolu_03",
		Content: []anthropic.ToolResultBlockParamContentUnion{
			{OfText: &anthropic.TextBlockParam{Text: "screenshot of <main> & friends"}},
			{OfImage: &img},
			{OfText: &anthropic.TextBlockParam{Text: "page 2"}},
		},
		CacheControl: anthropic.NewCacheControlEphemeralParam(),
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet4_5,
		MaxTokens: 4096,
		System:    []anthropic.TextBlockParam{{Text: "You are a coding agent.", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"file_path": map[string]any{"type": "string"}}, Required: []string{"file_path"},
		}, "Read")},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(
				anthropic.NewTextBlock("<system-reminder>\nAs you answer, use the context below.\n</system-reminder>"),
				anthropic.NewTextBlock("Fix the failing test in parser_test.go"),
			),
			anthropic.NewAssistantMessage(
				anthropic.NewThinkingBlock("c2lnbmF0dXJl", "Read the parser first."),
				anthropic.NewTextBlock("Reading the parser and running the tests."),
				anthropic.NewToolUseBlock("toolu_01", map[string]any{"file_path": "/w/parser.go", "offset": 10, "limit": 20}, "Read"),
				anthropic.NewToolUseBlock("toolu_02", map[string]any{"command": "go test ./..."}, "Bash"),
			),
			anthropic.NewUserMessage(
				anthropic.NewToolResultBlock("toolu_01", "    10→func Parse(s string) (*Node, error) {\n    11→\treturn nil, nil", false),
				anthropic.NewToolResultBlock("toolu_02", "--- FAIL: TestParse (0.00s)\nFAIL", true),
			),
			anthropic.NewAssistantMessage(
				anthropic.NewRedactedThinkingBlock("EmwKAhgBEgy3va3pzix/LafPsn4a"),
				anthropic.NewToolUseBlock("toolu_03", map[string]any{}, "screenshot"),
			),
			anthropic.NewUserMessage(
				anthropic.ContentBlockParamUnion{OfToolResult: &shot},
				anthropic.NewTextBlock("also check the README"),
			),
		},
	}
	body, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestAnthropicSDKBody(t *testing.T) {
	body := anSDKBody(t)
	s, err := Read("request.json", body, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Format != FormatAnthropic {
		t.Fatalf("format %q", s.Format)
	}
	want := []rdrShape{
		{Role: RoleSystem, Text: "You are a coding agent."},
		{Role: RoleUser, Text: "<system-reminder>\nAs you answer, use the context below.\n</system-reminder>\nFix the failing test in parser_test.go"},
		{Role: RoleAssistant, Text: "Reading the parser and running the tests.", Calls: []string{"toolu_01", "toolu_02"}},
		{Role: RoleTool, Outs: []string{"toolu_01=    10→func Parse(s string) (*Node, error) {\n    11→\treturn nil, nil", "toolu_02=--- FAIL: TestParse (0.00s)\nFAIL"}},
		{Role: RoleAssistant, Calls: []string{"toolu_03"}},
		{Role: RoleUser, Text: "also check the README", Outs: []string{"toolu_03=screenshot of <main> & friends\npage 2"}},
	}
	if d := cmp.Diff(want, rdrShapes(s)); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	if s.Task != "Fix the failing test in parser_test.go" || s.Steps() != 2 {
		t.Errorf("task %q, steps %d", s.Task, s.Steps())
	}
	type outView struct {
		Key      string
		IsError  bool
		HasImage bool
		Block    int
		Message  int
	}
	var outs []outView
	for _, o := range s.Outputs() {
		outs = append(outs, outView{o.Key, o.IsError, o.HasImage, o.Block, o.Message})
	}
	wantOuts := []outView{{"toolu_01", false, false, 0, 3}, {"toolu_02", true, false, 1, 3}, {"toolu_03", false, true, 0, 5}}
	if d := cmp.Diff(wantOuts, outs); d != "" {
		t.Errorf("outputs (-want +got):\n%s", d)
	}
	c := s.Calls[0]
	if c.Action != toolcall.ActionRead || c.Path != "/w/parser.go" || c.Range != (toolcall.Range{Start: 10, End: 29}) {
		t.Errorf("read call: %s %s %v", c.Action, c.Path, c.Range)
	}
	anCheckRewrite(t, body, s, map[string]string{"toolu_02": "[pruned: go test, 12 tokens]", "toolu_03": "[pruned: screenshot]"})
}

// anCheckRewrite rewrites the stubbed outputs and checks, independently of the reader's
// paths, that (1) decoded, the new body equals the old one with exactly the stubbed
// tool_result texts replaced (stub in the first text piece, the other text blocks
// removed, since the API rejects empty ones, or "[pruned]" where they carry
// cache_control),
// (2) every byte outside those tool_result blocks is unchanged, and (3) the reader reads
// the new body back with the stubs in place.
func anCheckRewrite(t *testing.T, body []byte, s *Session, stubs map[string]string) {
	t.Helper()
	out, err := s.Rewrite(stubs)
	if err != nil {
		t.Fatal(err)
	}
	var before, after any
	if err := json.Unmarshal(body, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &after); err != nil {
		t.Fatalf("rewritten body is not JSON: %v", err)
	}
	var spans []string
	msgs, _ := before.(map[string]any)["messages"].([]any)
	for i, m := range msgs {
		blocks, _ := m.(map[string]any)["content"].([]any)
		for j, b := range blocks {
			blk, _ := b.(map[string]any)
			id, _ := blk["tool_use_id"].(string)
			stub, ok := stubs[id]
			if blk["type"] != "tool_result" || !ok {
				continue
			}
			spans = append(spans, fmt.Sprintf("messages.%d.content.%d", i, j))
			switch c := blk["content"].(type) {
			case string:
				blk["content"] = stub
			case []any:
				first := true
				kept := []any{}
				for _, p := range c {
					pb, _ := p.(map[string]any)
					if pb["type"] != "text" {
						kept = append(kept, p)
						continue
					}
					switch {
					case first:
						pb["text"] = stub
					case pb["cache_control"] != nil:
						pb["text"] = PrunedPiece
					default:
						continue
					}
					first = false
					kept = append(kept, p)
				}
				blk["content"] = kept
			}
		}
	}
	if len(spans) != len(stubs) {
		t.Fatalf("found %d stubbed tool_result blocks; want %d", len(spans), len(stubs))
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("decoded rewrite differs beyond the stubbed texts:\n%s", cmp.Diff(before, after))
	}
	// Bytes outside the stubbed blocks: walk both bodies block by block.
	pos, opos := 0, 0
	for _, p := range spans {
		a, b := gjson.GetBytes(body, p), gjson.GetBytes(out, p)
		if !bytes.Equal(body[pos:a.Index], out[opos:b.Index]) {
			t.Errorf("bytes before %s changed", p)
		}
		pos, opos = a.Index+len(a.Raw), b.Index+len(b.Raw)
	}
	if !bytes.Equal(body[pos:], out[opos:]) {
		t.Error("bytes after the last stubbed block changed")
	}
	s2, err := Read(s.Name, out, Options{Format: FormatAnthropic})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range s2.Outputs() {
		if st, ok := stubs[o.Key]; ok && o.Text != st {
			t.Errorf("re-read %s: %q; want the stub", o.Key, o.Text)
		}
	}
	if len(s2.Outputs()) != len(s.Outputs()) || len(s2.Messages) != len(s.Messages) {
		t.Errorf("re-read: %d messages, %d outputs; want %d, %d", len(s2.Messages), len(s2.Outputs()), len(s.Messages), len(s.Outputs()))
	}
}

// Every block type a request can carry: only text, tool_use and tool_result enter the
// model; the others (and unknown ones with odd fields) are skipped and survive a
// rewrite byte for byte.
func TestAnthropicAllBlockTypes(t *testing.T) {
	body := []byte(`{
  "model": "claude-opus-4-5",
  "max_tokens": 2048,
  "system": "Be brief.",
  "messages": [
    {"role": "user", "content": [
      {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "spec"}},
      {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
      {"type": "text", "text": "Summarise the spec, then list the repo.", "cache_control": {"type": "ephemeral"}}
    ]},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "plan", "signature": "sig"},
      {"type": "redacted_thinking", "data": "xyz"},
      {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "spec"}},
      {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result", "url": "https://e.com", "title": "E", "encrypted_content": "abc"}]},
      {"type": "fancy_new_block", "text": 5, "id": ["not", "a", "string"]},
      {"type": "text", "text": "Listing."},
      {"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {"command": "ls"}},
      {"type": "tool_use", "id": "toolu_b", "name": "Glob", "input": {"pattern": "**/*.go"}},
      {"type": "tool_use", "id": "toolu_c", "name": "Bash", "input": {"command": "true"}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_a", "content": "a.go\nb.go", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
      {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": false, "content": [
        {"type": "text", "text": "a.go"},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}},
        {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "hidden"}]},
        {"type": "text", "text": "b.go"}
      ]},
      {"type": "tool_result", "tool_use_id": "toolu_c"}
    ]},
    {"role": "assistant", "content": "Done."}
  ]
}
`)
	if !detectAnthropic(body) {
		t.Fatal("not detected")
	}
	s, err := readAnthropic("blocks.json", body, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rdrShape{
		{Role: RoleSystem, Text: "Be brief."},
		{Role: RoleUser, Text: "Summarise the spec, then list the repo."},
		{Role: RoleAssistant, Text: "Listing.", Calls: []string{"toolu_a", "toolu_b", "toolu_c"}},
		{Role: RoleTool, Outs: []string{"toolu_a=a.go\nb.go", "toolu_b=a.go\nb.go", "toolu_c="}},
		{Role: RoleAssistant, Text: "Done."},
	}
	if d := cmp.Diff(want, rdrShapes(s)); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	if len(s.Calls) != 3 || len(s.Unanswered()) != 0 || len(s.Warnings) != 0 {
		t.Errorf("calls %d, unanswered %d, warnings %q", len(s.Calls), len(s.Unanswered()), s.Warnings)
	}
	anCheckRewrite(t, body, s, map[string]string{"toolu_a": "[pruned a]", "toolu_b": "[pruned b]"})
	// An output with no text piece cannot be located; Rewrite says so.
	if _, err := s.Rewrite(map[string]string{"toolu_c": "x"}); err == nil || !strings.Contains(err.Error(), "cannot be located") {
		t.Errorf("rewrite of a content-less result: %v", err)
	}
}

func TestAnthropicBadInput(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	tests := []struct {
		name    string
		body    string
		line    int
		field   string
		msgPart string
		lenient int // messages a lenient read gives; -1 when lenient fails too
	}{
		{"not JSON", "model: x", 1, "", "invalid JSON", -1},
		{"truncated", `{"max_tokens":1,"messages":[` + user + `,{"role":"assistant","content":"ok"`, 1, "", "unexpected end", -1},
		{"error on line 3", "{\n\"messages\": [\n  {\"role\": \"user\" \"content\": \"x\"}]}", 3, "", "invalid JSON", -1},
		{"array", `[` + user + `]`, 1, "", "found a JSON array", -1},
		{"two objects", `{"messages":[` + user + `]}` + "\n" + `{"messages":[]}`, 2, "", "data after the request body", -1},
		{"no messages", `{"model":"x","system":"s"}`, 0, "messages", "no messages array", -1},
		{"messages not an array", `{"messages":{"role":"user"}}`, 0, "messages", "must be an array", -1},
		{"system role", `{"messages":[{"role":"system","content":"s"},` + user + `]}`, 0, "messages.0.role", "neither user nor assistant", 1},
		{"message not an object", `{"messages":[` + user + `, 7]}`, 0, "messages.1", "found a JSON number", 1},
		{"content a number", `{"messages":[` + user + `,{"role":"assistant","content":3}]}`, 0, "messages.1.content", "string or an array", 1},
		{"tool_use without id", `{"messages":[` + user + `,{"role":"assistant","content":[{"type":"tool_use","name":"x","input":{}}]}]}`, 0, "messages.1.content.0.id", "without an id", 1},
		{"tool_result without id", `{"messages":[` + user + `,{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, 0, "messages.1.content.0.tool_use_id", "without a tool_use_id", 1},
		{"tool_result text not a string", `{"messages":[` + user + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":{}}]}]}]}`, 0, "messages.1.content.0.content.0.text", "expected a string, found JSON object", 1},
		// Keys are matched exactly, as the API and Rewrite's paths match them (a fuzz find:
		// encoding/json alone would take "messAges" for "messages").
		{"keys are case-sensitive", `{"messAges":[{"role":"user","Content":[{"tYpe":"tool_result","tool_use_id":"0","Content":[{"tYpe":"text"}]}]}]}`, 0, "messages", "no messages array", -1},
		{"block without type", `{"messages":[{"role":"user","content":[{"text":"x"}]},` + user + `]}`, 0, "messages.0.content.0.type", "no type", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readAnthropic("req.json", []byte(tt.body), Options{})
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("strict error = %v; want *ParseError", err)
			}
			if pe.File != "req.json" || pe.Line != tt.line || pe.Field != tt.field || !strings.Contains(pe.Msg, tt.msgPart) {
				t.Errorf("error = %+v; want line %d field %q msg ~%q", *pe, tt.line, tt.field, tt.msgPart)
			}
			s, err := readAnthropic("req.json", []byte(tt.body), Options{Lenient: true})
			if tt.lenient < 0 {
				if err == nil {
					t.Errorf("lenient read succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Messages) != tt.lenient || s.Skipped != 1 || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], tt.field) {
				t.Errorf("lenient: %d messages, skipped %d, warnings %q", len(s.Messages), s.Skipped, s.Warnings)
			}
		})
	}
	t.Run("case variants of known keys are other keys", func(t *testing.T) {
		body := `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","Content":"hidden","content":[{"type":"text","Text":"no","text":"yes"}]}],"Role":"assistant"}]}`
		s, err := readAnthropic("case.json", []byte(body), Options{})
		if err != nil {
			t.Fatal(err)
		}
		o := s.Outputs()[0]
		if o.Text != "yes" || s.Messages[2].Role != RoleTool {
			t.Fatalf("output %q, role %s", o.Text, s.Messages[2].Role)
		}
		anCheckRewrite(t, []byte(body), s, map[string]string{"t": "[pruned]"})
	})
	t.Run("empty", func(t *testing.T) {
		if _, err := readAnthropic("e.json", []byte(" \n"), Options{}); !errors.Is(err, ErrEmpty) {
			t.Errorf("err = %v", err)
		}
		if _, err := readAnthropic("e.json", []byte(`{"messages":[]}`), Options{}); !errors.Is(err, ErrEmpty) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("invalid UTF-8, duplicate ids, result before call", func(t *testing.T) {
		body := "\xef\xbb\xbf" + `{"messages":[` + user + `,
{"role":"user","content":[{"type":"tool_result","tool_use_id":"t0","content":"early"}]},
{"role":"assistant","content":[{"type":"tool_use","id":"t0","name":"Bash","input":{}},{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"bin ` + "\xff\xfe" + `"}]},
{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"again"}]}]}`
		s, err := readAnthropic("mix.json", []byte(body), Options{})
		if err != nil {
			t.Fatal(err)
		}
		var pairs []string
		for _, c := range s.Calls {
			k := "-"
			if c.Output != nil {
				k = c.Output.Key + ":" + c.Output.Text
			}
			pairs = append(pairs, c.ID+"->"+k)
		}
		if d := cmp.Diff([]string{"t0->-", "t1->t1:bin \ufffd\ufffd", "t1->t1#2:again"}, pairs); d != "" {
			t.Errorf("pairs (-want +got):\n%s", d)
		}
		if len(s.Warnings) != 2 || len(s.Orphans) != 1 {
			t.Errorf("warnings %q, orphans %d", s.Warnings, len(s.Orphans))
		}
		out, err := s.Rewrite(map[string]string{"t1": "S", "t0": "E"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(out, []byte("\xef\xbb\xbf{")) || bytes.Contains(out, []byte("\xff")) || !bytes.Contains(out, []byte(`"content":"again"`)) {
			t.Errorf("rewritten: %q", out)
		}
	})
}

func TestAnthropicDetect(t *testing.T) {
	big := `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"` + strings.Repeat("x", 80_000) + `"}]}],"max_tokens":10}`
	tests := []struct {
		name string
		head string
		want bool
	}{
		{"system key and text only", `{"model":"m","max_tokens":5,"system":"s","messages":[{"role":"user","content":"hi"}]}`, true},
		{"tool blocks, no system", `{"model":"m","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}]}`, true},
		{"tools with input_schema", `{"tools":[{"name":"x","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`, true},
		{"head cut inside a long tool result", big[:DetectBytes], true},
		{"plain text chat: left to the OpenAI reader", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"OpenAI system role", `{"model":"gpt","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`, false},
		{"OpenAI tool calls", `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`, false},
		{"OpenAI image_url with system key", `{"system":"s","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`, false},
		{"OpenAI function tools", `{"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}]}`, false},
		{"mini-swe-agent trajectory", `{"info":{},"messages":[{"role":"system","content":"s"}],"trajectory_format":"mini-swe-agent-1"}`, false},
		{"Gemini session", `{"sessionId":"x","messages":[{"id":"1","type":"user","content":"hi"}]}`, false},
		{"JSONL of bodies", `{"system":"s","messages":[{"role":"user","content":"a"}]}` + "\n" + `{"system":"s","messages":[]}`, false},
		{"bare list", `[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}]`, false},
		{"no messages", `{"system":"s","max_tokens":3}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := detectAnthropic([]byte(tt.head)); got != tt.want {
				t.Errorf("detectAnthropic = %v; want %v", got, tt.want)
			}
		})
	}
	f, err := Detect("sdk.json", anSDKBody(t))
	if err != nil || f != FormatAnthropic {
		t.Errorf("Detect(SDK body) = %q, %v", f, err)
	}
}

// FuzzAnthropic: see FuzzClaude.
func FuzzAnthropic(f *testing.F) {
	f.Add(anSDKBody(f))
	f.Add([]byte(`{"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"a"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"\xff"}]},{"role":"tool"}]}` + " x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rdrFuzzOne(t, data, readAnthropic)
	})
}
