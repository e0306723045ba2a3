package transcript

import (
	"errors"
	"strings"
	"testing"
)

// Rewrite cases the proxy depends on. Each want is the input with exactly the
// expected byte edits, written out by hand.
func TestRewriteEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		body   string
		stubs  map[string]string
		want   string // "" when an error is expected
		errHas string
	}{
		{
			name:   "anthropic: later text blocks removed, a cache-marked one kept as [pruned]",
			format: FormatAnthropic,
			body: `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"mcp__x","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"one"},{"type":"text","text":"two"},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"text","text":"three","cache_control":{"type":"ephemeral","ttl":"1h"}},{"type":"text","text":"four"}]}]}]}`,
			stubs: map[string]string{"t1": "S"},
			want: `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"mcp__x","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"S"},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"text","text":"[pruned]","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}]}`,
		},
		{
			name:   "anthropic: odd spacing, escapes and key order survive",
			format: FormatAnthropic,
			body: "{ \"max_tokens\" : 5,\n  \"messages\" : [ {\"content\":\"\\u0067o\", \"role\":\"user\"},\n {\"content\" : [ {\"input\":{}, \"name\":\"Read\", \"id\":\"t1\", \"type\":\"tool_use\"} ], \"role\":\"assistant\"},\n" +
				" {\"role\":\"user\",\"content\":[ { \"content\" :\t\"a\\u00e9\\n\\\"b\" , \"tool_use_id\":\"t1\",\"type\":\"tool_result\", \"cache_control\":{\"ttl\":\"1h\",\"type\":\"ephemeral\"} } ]} ] ,\"system\":\"\\u003csys\\u003e\"}\n",
			stubs: map[string]string{"t1": `[pruned: Read, recall("o_0123456789")]`},
			want: "{ \"max_tokens\" : 5,\n  \"messages\" : [ {\"content\":\"\\u0067o\", \"role\":\"user\"},\n {\"content\" : [ {\"input\":{}, \"name\":\"Read\", \"id\":\"t1\", \"type\":\"tool_use\"} ], \"role\":\"assistant\"},\n" +
				" {\"role\":\"user\",\"content\":[ { \"content\" :\t\"[pruned: Read, recall(\\\"o_0123456789\\\")]\" , \"tool_use_id\":\"t1\",\"type\":\"tool_result\", \"cache_control\":{\"ttl\":\"1h\",\"type\":\"ephemeral\"} } ]} ] ,\"system\":\"\\u003csys\\u003e\"}\n",
		},
		{
			name:   "anthropic: a key spelt in another case is refused, never added",
			format: FormatAnthropic,
			body:   `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","Content":"text"}]}]}`,
			stubs:  map[string]string{"t1": "S"},
			// The reader matches keys exactly, so "Content" is not the result's
			// content: the output has no text piece and Rewrite refuses it.
			errHas: `output "t1" cannot be located`,
		},
		{
			name:   "openai: other text parts emptied (the API accepts empty parts)",
			format: FormatOpenAI,
			body: `{"messages":[{"role":"system","content":"s"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}]}`,
			stubs: map[string]string{"c1": "S"},
			want: `{"messages":[{"role":"system","content":"s"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"S"},{"type":"text","text":""}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Read("body.json", []byte(tt.body), Options{Format: tt.format})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Rewrite(tt.stubs)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v; want one containing %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("rewritten:\n%s\nwant:\n%s", got, tt.want)
			}
			if string(s.raw) != tt.body {
				t.Error("Rewrite changed the session's own bytes")
			}
		})
	}
}

// TestReleaseBytes: after ReleaseBytes a session keeps its messages and outputs
// and Rewrite fails with ErrReleased.
func TestReleaseBytes(t *testing.T) {
	data := []byte(`{"type":"session","id":"s1","timestamp":"2025-12-01T09:00:00.000Z","cwd":"/w"}
{"type":"message","timestamp":"2025-12-01T09:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"list the files"}]}}
{"type":"message","timestamp":"2025-12-01T09:00:01.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}]}}
{"type":"message","timestamp":"2025-12-01T09:00:02.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"a.go\nb.go"}],"isError":false}}
`)
	s, err := Read("s.jsonl", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rewrite(map[string]string{"c1": "[pruned]"}); err != nil {
		t.Fatalf("Rewrite before ReleaseBytes: %v", err)
	}
	s.ReleaseBytes()
	outs := s.Outputs()
	if len(s.Messages) != 3 || len(outs) != 1 || outs[0].Text != "a.go\nb.go" {
		t.Fatalf("after ReleaseBytes: %d messages, outputs %+v", len(s.Messages), outs)
	}
	if _, err := s.Rewrite(map[string]string{"c1": "[pruned]"}); !errors.Is(err, ErrReleased) {
		t.Errorf("Rewrite after ReleaseBytes: %v, want ErrReleased", err)
	}
	if _, err := s.Rewrite(nil); !errors.Is(err, ErrReleased) {
		t.Errorf("Rewrite(nil) after ReleaseBytes: %v, want ErrReleased", err)
	}
}
