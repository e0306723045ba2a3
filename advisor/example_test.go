package advisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// fakeModel plays the model of a small coding agent: it reads main.go, fixes it,
// reads it again to check, runs the tests, and stops. It returns the tool call for
// step n, or "" when it is done.
func fakeModel(n int) (tool, args string) {
	switch n {
	case 1:
		return "read_file", `{"path":"main.go"}`
	case 2:
		return "edit_file", `{"path":"main.go","old_string":"return a - b","new_string":"return a + b"}`
	case 3:
		return "read_file", `{"path":"main.go"}`
	case 4:
		return "run_command", `{"command":"go test ./..."}`
	}
	return "", ""
}

// runTool plays the tools: main.go is about 1,200 tokens of Go.
func runTool(tool string, step int) string {
	switch tool {
	case "read_file":
		var b strings.Builder
		op := "-"
		if step > 2 {
			op = "+"
		}
		b.WriteString("package main\n\n")
		for i := range 60 {
			fmt.Fprintf(&b, "func add%02d(a, b int) int { return a %s b } // helper %d\n", i, op, i)
		}
		return b.String()
	case "edit_file":
		return "The file main.go has been updated."
	}
	return "ok  \texample.com/calc\t0.004s"
}

// Wrap an agent loop: before every model call, hand the advisor the messages the
// agent is about to send, and send what it gives back. Here the first read of main.go
// is superseded once the agent edits the file and reads it again; the context is
// over the budget, so the planner applies the prune and the read becomes a stub that
// names its recall id; the model gets the same stub on every later call.
func Example() {
	cfg := advisor.DefaultConfig()
	cfg.Budget = 1000       // a small agent, over its budget from step 2
	cfg.PriceForced = false // the budget matters more to it than the cache
	cfg.ProtectedSteps = 1  // only the latest step is off limits
	cfg.MinCandidateTokens = 50
	store := advisor.NewMemoryStore()        // storage.Open(ctx, path) keeps originals on disk
	adv, err := advisor.New(cfg, nil, store) // nil scorer: the rules alone
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	history := []map[string]any{
		{"role": "system", "content": "You are a coding agent."},
		{"role": "user", "content": "Fix add in main.go so the tests pass."},
	}
	for n := 1; ; n++ {
		// The request the agent is about to send, read as a session.
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": history})
		s, err := transcript.Read("request", body, transcript.Options{Format: transcript.FormatOpenAI})
		if err != nil {
			log.Fatal(err)
		}
		s.ID = "example-session" // the same id on every step of this conversation
		plan, err := adv.Advise(ctx, s)
		if err != nil {
			log.Fatal(err)
		}
		send, err := s.Rewrite(plan.Stubs) // the request bytes with stubs in the pruned slots
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("step %d: %d tokens in context, %d saved, %d bytes sent\n", plan.Step, plan.ContextTokens, plan.SavedTokens, len(send))
		for _, it := range plan.Items {
			if it.Decision == advisor.DecisionPruned && it.DecidedAt == plan.Step {
				fmt.Printf("  pruned %s: %s\n", it.Key, it.Stub)
			}
		}

		tool, args := fakeModel(n) // the model call, with send as its request
		if tool == "" {
			break
		}
		id := fmt.Sprintf("call_%d", n)
		history = append(history,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": id, "type": "function", "function": map[string]any{"name": tool, "arguments": args}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": runTool(tool, n)})
	}
	orig, _ := store.Original(ctx, advisor.RecallID("example-session", "call_1"))
	fmt.Printf("recall gives back %d tokens of %s\n", orig.Tokens, orig.Summary)
	// Output:
	// step 1: 16 tokens in context, 0 saved, 146 bytes sent
	// step 2: 1225 tokens in context, 0 saved, 3719 bytes sent
	// step 3: 1255 tokens in context, 0 saved, 4024 bytes sent
	// step 4: 1296 tokens in context, 1168 saved, 4339 bytes sent
	//   pruned call_1: [pruned: read_file main.go, 1,203 tokens, superseded by call call_3; recall("o_112007357115") restores it]
	// step 5: 1316 tokens in context, 1168 saved, 4587 bytes sent
	// recall gives back 1203 tokens of main.go
}
