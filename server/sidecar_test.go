package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/server"
)

// batchRecorder is noiseScorer remembering the task and now of the last batch.
type batchRecorder struct {
	testkit.Func
	mu        sync.Mutex
	task, now string
}

func (b *batchRecorder) Score(ctx context.Context, batch cards.Batch) ([]cards.Score, error) {
	b.mu.Lock()
	b.task, b.now = batch.Task, batch.Now
	b.mu.Unlock()
	return noiseScorer.Score(ctx, batch)
}

// openAIMessages is a Chat Completions history with n tool outputs (toolOutput(k) for
// call ck), spaced and indented unlike any encoder would.
func openAIMessages(n int) string {
	var b strings.Builder
	b.WriteString("[\n  {\"role\": \"system\", \"content\": \"You are a coding agent.\"},\n  {\"content\": \"Fix the parser.\", \"role\": \"user\"}")
	for k := 1; k <= n; k++ {
		out, _ := json.Marshal(toolOutput(k))
		fmt.Fprintf(&b, ",\n  {\"role\":\"assistant\", \"content\":\"step %d \\u2192 run\", \"tool_calls\":[{\"id\":\"c%d\",\"type\":\"function\",\"function\":{\"name\":\"run_command\",\"arguments\":\"{\\\"command\\\":\\\"make s%d\\\"}\"}}]}", k, k, k)
		fmt.Fprintf(&b, ",\n  {\"tool_call_id\":\"c%d\", \"role\":\"tool\", \"content\": %s}", k, out)
	}
	b.WriteString("\n]")
	return b.String()
}

type adviseAnswer struct {
	Messages json.RawMessage `json:"messages"`
	Plan     advisor.Plan    `json:"plan"`
}

func TestSidecarAdvise(t *testing.T) {
	scorer := &batchRecorder{Func: noiseScorer}
	env := newProxy(t, server.Options{Scorer: scorer})
	msgs := openAIMessages(5)
	req := fmt.Sprintf(`{"session_id":"side-1","format":"openai","messages":%s,"task":"Make parser_test pass","now":"Now checking the parser."}`, msgs)
	resp, body := post(t, env.http.URL+"/v1/advise", []byte(req), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var ans adviseAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatal(err)
	}
	// Step 6 (five assistant messages + 1), K = 2: outputs 1-3 are candidates, the
	// NOISE ones (c1, c3) are pruned; c3 at messages.7, c1 at messages.3.
	raws := checkOnlyChanged(t, []byte(msgs), ans.Messages, []string{"3.content", "7.content"})
	var pruned []string
	for _, it := range ans.Plan.Items {
		if it.Decision == advisor.DecisionPruned {
			pruned = append(pruned, it.Key)
			if want := fmt.Sprintf("%q", it.Stub); !strings.Contains(strings.Join(raws, "|"), strings.ReplaceAll(want, "<", `\u003c`)) {
				t.Errorf("stub of %s not in the messages: %s", it.Key, want)
			}
		}
	}
	if d := cmp.Diff([]string{"c1", "c3"}, pruned); d != "" {
		t.Errorf("pruned (-want +got):\n%s", d)
	}
	if ans.Plan.Step != 6 || ans.Plan.SessionID != "side-1" || ans.Plan.Budget != 1000 || !ans.Plan.Rewrite {
		t.Errorf("plan step %d session %q budget %d rewrite %v", ans.Plan.Step, ans.Plan.SessionID, ans.Plan.Budget, ans.Plan.Rewrite)
	}
	scorer.mu.Lock()
	if scorer.task != "Make parser_test pass" || scorer.now != "Now checking the parser." {
		t.Errorf("scorer saw task %q now %q", scorer.task, scorer.now)
	}
	scorer.mu.Unlock()

	// A budget of its own: 5% of 100,000 is more than the pending prunes, so nothing
	// is applied yet.
	req = fmt.Sprintf(`{"session_id":"side-2","format":"openai","messages":%s,"budget":100000}`, msgs)
	_, body = post(t, env.http.URL+"/v1/advise", []byte(req), nil)
	ans = adviseAnswer{}
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatal(err)
	}
	pending := 0
	for _, it := range ans.Plan.Items {
		if it.Decision == advisor.DecisionPending {
			pending++
		}
	}
	if ans.Plan.Budget != 100000 || ans.Plan.Pruned != 0 || pending != 2 || string(ans.Messages) != msgs {
		t.Errorf("own budget: budget %d pruned %d pending %d, messages changed %v", ans.Plan.Budget, ans.Plan.Pruned, pending, string(ans.Messages) != msgs)
	}

	// Anthropic shape.
	amsgs := `[{"role":"user","content":"Fix the parser."}`
	for k := 1; k <= 4; k++ {
		out, _ := json.Marshal(toolOutput(k))
		amsgs += fmt.Sprintf(`,{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"sig%d"},{"type":"tool_use","id":"tu%d","name":"Bash","input":{"command":"make s%d"}}]}`, k, k, k)
		amsgs += fmt.Sprintf(`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu%d","content":%s}]}`, k, out)
	}
	amsgs += "]"
	_, body = post(t, env.http.URL+"/v1/advise", []byte(`{"session_id":"side-3","format":"anthropic","messages":`+amsgs+`}`), nil)
	ans = adviseAnswer{}
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	checkOnlyChanged(t, []byte(amsgs), ans.Messages, []string{"2.content.0.content"})
}

func TestSidecarErrors(t *testing.T) {
	env := newProxy(t, server.Options{})
	msgs := `[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, body string
		code       int
		want       string
	}{
		{"missing session", `{"format":"openai","messages":` + msgs + `}`, 400, "session_id is required"},
		{"bad format", `{"session_id":"s","format":"gemini","messages":` + msgs + `}`, 400, `format \"gemini\": want one of openai, anthropic`},
		{"unknown field", `{"session_id":"s","format":"openai","messages":` + msgs + `,"budgte":5}`, 400, `unknown field \"budgte\"`},
		{"wrong type", `{"session_id":"s","format":"openai","messages":` + msgs + `,"budget":"5"}`, 400, "field budget: expected int, got JSON string"},
		{"budget over the window", `{"session_id":"s","format":"openai","messages":` + msgs + `,"budget":300000}`, 400, "over the context window of 200000"},
		{"messages not a list", `{"session_id":"s","format":"openai","messages":{"role":"user"}}`, 400, "messages must be a JSON array"},
		{"unreadable message", `{"session_id":"s","format":"openai","messages":[{"role":5}]}`, 400, "field messages.0.role: missing or not a string"},
		{"GET", "", 405, "method GET not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp *http.Response
			var body []byte
			if tt.name == "GET" {
				r, err := http.Get(env.http.URL + "/v1/advise")
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(r.Body)
				r.Body.Close()
				resp = r
			} else {
				resp, body = post(t, env.http.URL+"/v1/advise", []byte(tt.body), nil)
			}
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
				t.Errorf("%d %s; want %d with %s", resp.StatusCode, body, tt.code, tt.want)
			}
		})
	}
	for id, want := range map[string]int{"o_0123456789": 404, "nope": 400} {
		resp, err := http.Get(env.http.URL + "/v1/recall/" + id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || !json.Valid(b) {
			t.Errorf("recall %s: %d %s; want %d", id, resp.StatusCode, b, want)
		}
	}
	if resp, err := http.Get(env.http.URL + "/elsewhere"); err != nil || resp.StatusCode != 404 {
		t.Errorf("unknown route: %v %v", resp, err)
	}
}
