package transcript

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// codexBody is a Responses API body in the shape Codex CLI 0.171 sends: developer
// and injected user context, the prompt, a reasoning item, an exec_command call, its
// output with Codex's Chunk ID / Wall time header, an apply_patch custom tool call
// and its output, and a re-read.
const codexBody = `{"model":"gpt-5-codex","instructions":"You are Codex, based on GPT-5.","input":[` +
	`{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>sandbox</permissions instructions>"}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the port"}]},` +
	`{"type":"reasoning","summary":[],"encrypted_content":"gAAAA"},` +
	`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cat main.go\",\"workdir\":\"/w\"}","call_id":"call_1"},` +
	`{"type":"function_call_output","call_id":"call_1","output":"Chunk ID: 1a2b3c\nWall time: 0.0012 seconds\nProcess exited with code 0\nOriginal token count: 12\nOutput:\npackage main\n"},` +
	`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Editing."}]},` +
	`{"type":"custom_tool_call","status":"completed","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** Update File: main.go\n@@\n-package main\n+package main // fixed\n*** End Patch\n"},` +
	`{"type":"custom_tool_call_output","call_id":"call_2","output":"Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM main.go\n"},` +
	`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cat main.go\",\"workdir\":\"/w\"}","call_id":"call_3"},` +
	`{"type":"function_call_output","call_id":"call_3","output":[{"type":"input_text","text":"package main // fixed\n"}]}` +
	`],"tools":[],"tool_choice":"auto","parallel_tool_calls":false,"store":false,"stream":true,"prompt_cache_key":"019a-conv"}`

func TestReadResponses(t *testing.T) {
	f, err := Detect("body", []byte(codexBody))
	if err != nil || f != FormatResponses {
		t.Fatalf("Detect = %q, %v; want %q", f, err, FormatResponses)
	}
	s, err := Read("body", []byte(codexBody), Options{Format: FormatResponses})
	if err != nil {
		t.Fatal(err)
	}
	type msgView struct {
		Role  Role
		Meta  bool
		Step  int
		Text  string
		Calls []string
		Outs  []string
	}
	var got []msgView
	for _, m := range s.Messages {
		v := msgView{Role: m.Role, Meta: m.Meta, Step: m.Step, Text: m.Text}
		for _, c := range m.Calls {
			v.Calls = append(v.Calls, c.ID+" "+c.Name+" "+string(c.Action)+" "+c.Path)
		}
		for _, o := range m.Outputs {
			v.Outs = append(v.Outs, o.Key+" "+strings.SplitN(o.Text, "\n", 2)[0])
		}
		got = append(got, v)
	}
	want := []msgView{
		{Role: RoleSystem, Text: "You are Codex, based on GPT-5."},
		{Role: RoleSystem, Meta: true, Text: "<permissions instructions>sandbox</permissions instructions>"},
		{Role: RoleUser, Meta: true, Text: "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"},
		{Role: RoleUser, Text: "fix the port"},
		{Role: RoleAssistant, Step: 1, Calls: []string{"call_1 exec_command read /w/main.go"}},
		{Role: RoleTool, Step: 1, Outs: []string{"call_1 Chunk ID: 1a2b3c"}},
		{Role: RoleAssistant, Step: 2, Text: "Editing.", Calls: []string{"call_2 apply_patch edit /w/main.go"}},
		{Role: RoleTool, Step: 2, Outs: []string{"call_2 Exit code: 0"}},
		{Role: RoleAssistant, Step: 3, Calls: []string{"call_3 exec_command read /w/main.go"}},
		{Role: RoleTool, Step: 3, Outs: []string{"call_3 package main // fixed"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("messages (-want +got):\n%s", d)
	}
	if s.Task != "fix the port" || s.Cwd != "/w" {
		t.Errorf("Task %q Cwd %q", s.Task, s.Cwd)
	}
	out, err := s.Rewrite(map[string]string{"call_1": "STUB1", "call_3": "STUB3"})
	if err != nil {
		t.Fatal(err)
	}
	wantOut := strings.Replace(codexBody, `"output":"Chunk ID: 1a2b3c\nWall time: 0.0012 seconds\nProcess exited with code 0\nOriginal token count: 12\nOutput:\npackage main\n"`, `"output":"STUB1"`, 1)
	wantOut = strings.Replace(wantOut, `"output":[{"type":"input_text","text":"package main // fixed\n"}]`, `"output":[{"type":"input_text","text":"STUB3"}]`, 1)
	if string(out) != wantOut {
		t.Fatalf("rewrite:\n got %s\nwant %s", out, wantOut)
	}
}

func TestReadResponsesShapes(t *testing.T) {
	tests := []struct {
		name, body string
		msgs       int
		err        string
	}{
		{"string input", `{"model":"m","instructions":"sys","input":"hello"}`, 2, ""},
		{"short message form", `{"model":"m","input":[{"role":"user","content":"hi"}]}`, 1, ""},
		{"continuation", `{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c9","output":"x"}]}`, 1, ""},
		{"input missing", `{"model":"m"}`, 0, "field input: missing"},
		{"input number", `{"model":"m","input":3}`, 0, "field input: neither a string nor a list of items"},
		{"item not object", `{"model":"m","input":[1]}`, 0, "field input.0: item is not a JSON object"},
		{"output without call id", `{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, 0, "field input.0.call_id: missing or not a string"},
		{"bad role", `{"model":"m","input":[{"type":"message","role":"robot","content":"x"}]}`, 0, `field input.0.role: unknown message role "robot"`},
		{"not JSON", `{"model":`, 0, "truncated JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Read("b", []byte(tt.body), Options{Format: FormatResponses})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v; want ErrMalformed with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Messages) != tt.msgs {
				t.Errorf("%d messages; want %d", len(s.Messages), tt.msgs)
			}
		})
	}
}

func TestResponsesContinuation(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","previous_response_id":"resp_1","input":[]}`: true,
		`{"model":"m","previous_response_id":null,"input":[]}`:     false,
		`{"model":"m","previous_response_id":"","input":[]}`:       false,
		`{"model":"m","input":[]}`:                                 false,
		`[1]`:                                                      false,
		`{"previous_response_id":"r"`:                              false,
	} {
		if got := ResponsesContinuation([]byte(body)); got != want {
			t.Errorf("ResponsesContinuation(%s) = %v; want %v", body, got, want)
		}
	}
}

func FuzzResponses(f *testing.F) {
	f.Add([]byte(codexBody))
	f.Add([]byte(`{"model":"m","input":"x"}`))
	f.Add([]byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lenient := range []bool{false, true} {
			s, err := Read("fuzz", data, Options{Format: FormatResponses, Lenient: lenient})
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrEmpty) {
					t.Fatalf("lenient=%v: error is neither ErrMalformed nor ErrEmpty: %v", lenient, err)
				}
				continue
			}
			checkRewrite(t, s, FormatResponses, lenient, ^uint64(0), "[pruned]")
		}
		ResponsesContinuation(data)
	})
}

// bigNewBody builds an n-turn Responses (gemini false) or Gemini API body, each turn
// a call and a 10 KB output, about as large as bodyBig's Anthropic one.
func bigNewBody(gemini bool, n int) []byte {
	var b strings.Builder
	line := strings.Repeat("func handler(x int) int { return x * 2 } // padding\n", 200)
	if gemini {
		b.WriteString(`{"contents":[{"role":"user","parts":[{"text":"fix it"}]}`)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, `,{"role":"model","parts":[{"functionCall":{"id":"c%d","name":"read_file","args":{"file_path":"/w/f%d.go"}}}]}`, i, i)
			fmt.Fprintf(&b, `,{"role":"user","parts":[{"functionResponse":{"id":"c%d","name":"read_file","response":{"output":%s}}}]}`, i, jsonQuote(fmt.Sprint(i)+line))
		}
		b.WriteString(`]}`)
		return []byte(b.String())
	}
	b.WriteString(`{"model":"m","instructions":"sys","input":[{"type":"message","role":"user","content":"fix it"}`)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `,{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cat f%d.go\"}","call_id":"c%d"}`, i, i)
		fmt.Fprintf(&b, `,{"type":"function_call_output","call_id":"c%d","output":%s}`, i, jsonQuote(fmt.Sprint(i)+line))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkReadNewBodies reads an 80-turn Responses and Gemini API body (about
// 860 KB each) without a cache and through a warm one (which keeps the outputs'
// token counts and hashes; the items are decoded on every read). Compare
// BenchmarkReadBodyCached for the Anthropic body.
func BenchmarkReadNewBodies(b *testing.B) {
	for _, gemini := range []bool{false, true} {
		for _, cached := range []bool{false, true} {
			name, format := "responses", FormatResponses
			if gemini {
				name, format = "gemini", FormatGeminiAPI
			}
			var c *MessageCache
			if cached {
				name += "/cached"
				c = NewMessageCache(0)
			}
			b.Run(name, func(b *testing.B) {
				body := bigNewBody(gemini, 80)
				if _, err := Read("body", body, Options{Format: format, Cache: c}); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := Read("body", body, Options{Format: format, Cache: c}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// The measures a cache keeps give the same session as measuring afresh, and a
// second read of a body takes every long output's measure from the cache.
func TestNewBodiesMeasureCache(t *testing.T) {
	for _, tt := range []struct {
		format Format
		body   []byte
	}{
		{FormatResponses, bigNewBody(false, 5)}, {FormatGeminiAPI, bigNewBody(true, 5)},
		{FormatResponses, []byte(codexBody)}, {FormatGeminiAPI, []byte(geminiBody)},
	} {
		plain, err := Read("b", tt.body, Options{Format: tt.format})
		if err != nil {
			t.Fatal(err)
		}
		c := NewMessageCache(0)
		for round := 0; round < 2; round++ {
			before := c.Stats()
			s, err := Read("b", tt.body, Options{Format: tt.format, Cache: c})
			if err != nil {
				t.Fatal(err)
			}
			long := 0
			for i, o := range s.Outputs() {
				p := plain.Outputs()[i]
				if o.Tokens != p.Tokens || o.Hash != p.Hash || o.Tokens != tokencount.Count(o.Text) || o.Hash != TextHash(o.Text) {
					t.Fatalf("%s round %d output %s: %d %s; want %d %s", tt.format, round, o.Key, o.Tokens, o.Hash, p.Tokens, p.Hash)
				}
				if len(o.Text) >= minMeasured {
					long++
				}
			}
			after := c.Stats()
			if hits := after.Hits - before.Hits; round == 1 && hits != int64(long) || round == 0 && hits != 0 {
				t.Errorf("%s round %d: %d hits; want %d", tt.format, round, hits, map[bool]int{true: long}[round == 1])
			}
		}
	}
}

// A compaction item (the provider's, encrypted) marks the model turn that holds it
// and goes out byte for byte when the outputs after it are stubbed.
func TestResponsesCompactionItem(t *testing.T) {
	const item = `{"type":"compaction","id":"cmp_1","encrypted_content":"gAAAAB-opaque=="}`
	body := []byte(`{"model":"gpt-test","input":[` + item + `,` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"go on"}]},` +
		`{"type":"function_call","call_id":"c1","name":"shell","arguments":"{\"command\":[\"ls\"]}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"a.go\nb.go"}]}`)
	s, err := Read("body.json", body, Options{Format: FormatResponses})
	if err != nil {
		t.Fatal(err)
	}
	var marked []int
	for _, m := range s.Messages {
		if m.Compaction {
			marked = append(marked, m.Index)
		}
	}
	if len(marked) != 1 || s.Messages[marked[0]].Role != RoleAssistant {
		t.Fatalf("messages marked as compactions: %v; want the one model turn that holds the item", marked)
	}
	out, err := s.Rewrite(map[string]string{s.Outputs()[0].Key: "[pruned]"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(item)) || !bytes.Contains(out, []byte(`"output":"[pruned]"`)) {
		t.Errorf("rewritten body %s; want the compaction item as sent and the output stubbed", out)
	}
}
