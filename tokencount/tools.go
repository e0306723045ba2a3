package tokencount

import "github.com/tidwall/gjson"

// Tools returns the o200k_base tokens of a request body's tool definitions,
// counted as the JSON they are sent as: the "tools" value (Anthropic Messages,
// OpenAI Chat Completions and Responses, the Gemini API) and Chat Completions'
// legacy "functions". The provider counts them as input on every call and the
// agent compares that count with its compaction point, but no message holds them,
// so a session's messages fall short of the context by this much (Claude Code
// 2.1.332's thirteen tools: 11,087 tokens; the e2e rig, docs/INTEGRATIONS.md).
// 0 when the body has neither, or they are not arrays or objects. Counts of long
// texts are remembered (Count), so the same tools on every request of a session
// are tokenized once.
func Tools(body []byte) int {
	n := 0
	for _, r := range gjson.GetManyBytes(body, "tools", "functions") {
		if r.IsArray() || r.IsObject() {
			n += Count(r.Raw)
		}
	}
	return n
}
