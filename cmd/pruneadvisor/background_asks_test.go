package main

// The agent never waits for the small model (issue 32): serve with the Ollama
// scorer against a stand-in that takes 3 s per /api/chat forwards every request
// at once and stubs what the stand-in scores low a few requests later.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// slowChatBody is an OpenAI Chat Completions request at step `step`: the task,
// then step-1 turns each reading a file of about 480 tokens (output of step i:
// call_i), so the output of step i is a candidate from step i+4 on.
func slowChatBody(step int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o","messages":[{"role":"user","content":"Review the modules and fix the failing test."}`)
	for i := 1; i < step; i++ {
		var text strings.Builder
		for j := range 30 {
			fmt.Fprintf(&text, "func module%dFunction%d(x int) int { return x * %d }\n", i, j, j)
		}
		body, _ := json.Marshal(text.String())
		fmt.Fprintf(&b, `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"mod%d.go\"}"}}]}`, i, i)
		fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":%s}`, i, body)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// stubbedCalls returns the calls (1-based step numbers) whose tool result the
// body carries as a stub.
func stubbedCalls(t *testing.T, body []byte) []int {
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			Content    string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("upstream body: %v", err)
	}
	var out []int
	for _, m := range req.Messages {
		var n int
		if m.Role == "tool" && strings.HasPrefix(m.Content, "[pruned:") {
			if _, err := fmt.Sscanf(m.ToolCallID, "call_%d", &n); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// TestServeNeverWaitsForScorer is issue 32's acceptance test: 20 proxied steps
// 0.5 s apart through serve --scorer ollama, whose Ollama takes 3 s per
// /api/chat and scores every card 10 (keep 0.10, under the cutoff 0.25). From
// the third step on no request waits for the scorer (each within 250 ms, the
// median within 50 ms, at the client, the proxy's whole round trip), and the
// low-scored outputs are stubbed a few steps after their ask: the output of step
// 1 (asked at step 5, answered about 3 s = 6 steps later) by step 13, and those
// of steps 1-7 (the second ask, made when the first answer came) by step 20.
func TestServeNeverWaitsForScorer(t *testing.T) {
	t.Parallel() // mostly waiting: overlap with the rest
	f, host := newFakeOllama(t, "ok")
	f.delay = 3 * time.Second
	up := newRecordingUpstream(t)
	srv := startServe(t, testEnv(t, "OLLAMA_HOST="+host), "--db", filepath.Join(t.TempDir(), "s.db"),
		"--scorer", "ollama", "--budget", "2000", "--price-forced=false", "--openai-upstream", up.URL)
	if !strings.Contains(srv.proc.stderr.String(), "asked in the background") {
		t.Fatalf("serve does not ask in the background:\n%s", srv.proc.output())
	}
	const steps, gap = 20, 500 * time.Millisecond
	took := make([]time.Duration, steps)
	firstStub := 0
	var last []int
	for k := 1; k <= steps; k++ {
		start := time.Now()
		code, resp := srv.post(t, "/v1/chat/completions", slowChatBody(k), "X-Pruneadvisor-Session", "slow-ollama")
		took[k-1] = time.Since(start)
		if code != 200 {
			t.Fatalf("step %d: %d %s", k, code, cutOut(resp, 500))
		}
		bodies := up.take()
		if len(bodies) != 1 {
			t.Fatalf("step %d: the upstream got %d bodies", k, len(bodies))
		}
		last = stubbedCalls(t, bodies[0])
		if firstStub == 0 && slices.Contains(last, 1) {
			firstStub = k
		}
		time.Sleep(gap - min(time.Since(start), gap))
	}
	var ms []string
	for _, d := range took {
		ms = append(ms, fmt.Sprintf("%.0f", d.Seconds()*1000))
	}
	t.Logf("request times (ms): %s; /api/chat requests %d; output 1 stubbed at step %d; stubbed at step 20: %v",
		strings.Join(ms, " "), f.requests(), firstStub, last)
	rest := slices.Clone(took[2:])
	slices.Sort(rest)
	if worst, median := rest[len(rest)-1], rest[len(rest)/2]; worst > 250*time.Millisecond || median > 50*time.Millisecond {
		t.Errorf("steps 3-20: slowest %v (want <= 250ms), median %v (want <= 50ms)", worst, median)
	}
	if f.requests() < 2 {
		t.Errorf("%d /api/chat requests; want the ask of step 5 and the one its answer let go", f.requests())
	}
	if firstStub == 0 || firstStub > 13 {
		t.Errorf("the output of step 1 (score 0.10) was stubbed at step %d; want by step 13", firstStub)
	}
	if len(last) < 7 || !slices.Equal(last[:7], []int{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("stubbed at step 20: %v; want at least the outputs of steps 1-7", last)
	}
}
