// Package testbodies builds provider request bodies that several packages' tests
// send through the advisor, replay and the proxy alike, so that each shape is
// written once.
package testbodies

import (
	"encoding/json"
	"fmt"
)

// AnthropicCompacted is an Anthropic Messages request body: the user's task, two
// reads (/src/a.go, /src/b.go), then (message 5) an assistant message that opens
// with a provider compaction block ({"type": "compaction"}) when compacted is set
// and with a plain text block of the same words otherwise, a user turn, then
// eight more reads (/src/c0.go to /src/c7.go). Each read's result is output(path).
// Read ids are toolu_1, toolu_2, … in order. The error is encoding/json's.
func AnthropicCompacted(compacted bool, output func(path string) string) ([]byte, error) {
	var msgs []map[string]any
	n := 0
	read := func(path string) {
		n++
		id := fmt.Sprintf("toolu_%d", n)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Read", "input": map[string]any{"file_path": path}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": output(path)}}})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "Port the parser to the new API."})
	read("/src/a.go")
	read("/src/b.go")
	first := map[string]any{"type": "text", "text": "Summary so far: a.go and b.go read."}
	if compacted {
		first = map[string]any{"type": "compaction", "content": "Summary so far: a.go and b.go read."}
	}
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": []any{first, map[string]any{"type": "text", "text": "Going on."}}},
		map[string]any{"role": "user", "content": "Carry on."})
	for i := range 8 {
		read(fmt.Sprintf("/src/c%d.go", i))
	}
	return json.Marshal(map[string]any{"model": "claude-test", "max_tokens": 1024, "messages": msgs})
}
