package advisor_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// A call to the recall tool that asks for part of the original (lines, grep and
// context beside the id: recall.Args) is a recall as one without them is: its
// result, a new output, is pruned later like any other, and its stub names the
// recalled output's id (docs/DESIGN.md "Recall"), not an id of its own.
func TestPartialRecallCallIsARecall(t *testing.T) {
	const c1 = "o_839409989792" // rules.json's c1 (TestRecallOfPendingOutput)
	for _, tt := range []struct{ tool, args string }{
		{"mcp__pruneadvisor__recall", `{"id":"` + c1 + `"}`},
		{"mcp__pruneadvisor__recall", `{"id":"` + c1 + `","lines":"1-3"}`},
		{"recall", `{"id":"` + c1 + `","grep":"value_7","context":1}`},
		{"pruneadvisor_recall", `{"lines":"200-","id":"` + c1 + `"}`},
		{"Bash", `{"id":"` + c1 + `","lines":"1-3"}`}, // no recall: an id of its own
	} {
		args := tt.args
		// rulesSession's calls, then a recall of c1 and one more step.
		c := newChat("Change the port to 9090")
		c.read("Reading the config.", "/app/config.go", filler("config.go v1", 400))
		c.call("Changing it.", "Edit", `{"file_path":"/app/config.go","old_string":"8080","new_string":"9090"}`,
			"The file /app/config.go has been updated successfully.")
		c.read("Checking the edit.", "/app/config.go", filler("config.go v2", 400))
		c.call("Running the tests.", "Bash", `{"command":"go test ./..."}`, filler("test output", 300))
		c.call("Once more.", "Bash", `{"command":"go test ./..."}`, filler("test output", 300))
		for i := 0; i < 4; i++ {
			c.call("", "Bash", `{"command":"ls"}`, fmt.Sprintf("a b %d", i))
		}
		key := c.call("Reading the old config again.", tt.tool, args, filler("1:config.go v1", 300))
		for i := 0; i < 8; i++ {
			c.call("", "Bash", `{"command":"ls"}`, fmt.Sprintf("a b done %d", i))
		}
		cfg := advisor.DefaultConfig()
		cfg.RemainingMin = 100_000 // every prune pays for itself at once
		steps := simulate(t, newAdvisor(t, cfg, constScorer(0.01), advisor.NewMemoryStore(), newClock()), c.session(t, "rules.json"))
		if it := item(t, steps[len(steps)-1].plan, "c1"); it.RecallID != c1 {
			t.Fatalf("c1's recall id %s; want %s", it.RecallID, c1)
		}
		it := item(t, steps[len(steps)-1].plan, key)
		if isRecall := tt.tool != "Bash"; it.Decision != advisor.DecisionPruned || (it.RecallID == c1) != isRecall ||
			strings.Contains(it.Stub, `("`+c1+`") restores it`) != isRecall {
			t.Errorf("%s %s: the result %s is %s (%s), id %s, stub %q; want pruned with a stub naming %s: %v", tt.tool, args, key, it.Decision, it.Reason, it.RecallID, it.Stub, c1, isRecall)
		}
	}
}
