package transcript

import (
	"math"

	"github.com/tidwall/gjson"
)

// DefaultCompactTrigger is the input tokens at which Anthropic's compact_20260112
// context edit compacts when the edit gives no trigger (docs/DESIGN.md "Compaction:
// what pruning is for").
const DefaultCompactTrigger = 150_000

// CompactTrigger returns the context size, in input tokens, at which a request
// body asks the provider to compact, 0 when it asks none (or the body is not a
// JSON object):
//
//   - Anthropic Messages: a "context_management" edit of type "compact_20260112"
//     ({"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens",
//     "value":N}}]}): N, or DefaultCompactTrigger without a trigger;
//   - OpenAI Responses: a "context_management" entry of type "compaction" with
//     "compact_threshold" N ([{"type":"compaction","compact_threshold":N}]);
//     without a threshold the provider's own point applies, unknown here: 0.
//
// With several, the lowest. A trigger that is not a positive integer is ignored.
func CompactTrigger(body []byte) int {
	cm := gjson.GetBytes(body, "context_management")
	if !cm.Exists() {
		return 0
	}
	low := 0
	take := func(v gjson.Result) {
		if v.Type != gjson.Number || v.Num < 1 || v.Num > math.MaxInt32 || v.Num != math.Trunc(v.Num) {
			return
		}
		if n := int(v.Num); low == 0 || n < low {
			low = n
		}
	}
	entries := cm.Get("edits")
	if cm.IsArray() {
		entries = cm
	}
	entries.ForEach(func(_, e gjson.Result) bool {
		switch e.Get("type").String() {
		case "compact_20260112":
			tr := e.Get("trigger")
			switch {
			case !tr.Exists():
				take(gjson.Result{Type: gjson.Number, Num: DefaultCompactTrigger})
			case tr.Get("type").String() == "input_tokens":
				take(tr.Get("value"))
			}
		case "compaction":
			take(e.Get("compact_threshold"))
		}
		return true
	})
	return low
}
