package transcript

import "testing"

// The trigger a request asks the provider to compact at (issue 38's leftover).
func TestCompactTrigger(t *testing.T) {
	tests := []struct {
		name, body string
		want       int
	}{
		{"none", `{"model":"m","messages":[]}`, 0},
		{"not json", `not json`, 0},
		{"anthropic trigger", `{"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":120000}}]}}`, 120_000},
		{"anthropic default", `{"context_management":{"edits":[{"type":"compact_20260112"}]}}`, 150_000},
		{"anthropic other edit", `{"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":30000}}]}}`, 0},
		{"anthropic two edits", `{"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":30000}},{"type":"compact_20260112","trigger":{"type":"input_tokens","value":90000}}]}}`, 90_000},
		{"anthropic bad value", `{"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":"lots"}}]}}`, 0},
		{"openai threshold", `{"input":[],"context_management":[{"type":"compaction","compact_threshold":200000}]}`, 200_000},
		{"openai no threshold", `{"context_management":[{"type":"compaction"}]}`, 0},
		{"openai negative", `{"context_management":[{"type":"compaction","compact_threshold":-5}]}`, 0},
		{"openai fraction", `{"context_management":[{"type":"compaction","compact_threshold":1.5}]}`, 0},
	}
	for _, tt := range tests {
		if got := CompactTrigger([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: CompactTrigger = %d; want %d", tt.name, got, tt.want)
		}
	}
}
