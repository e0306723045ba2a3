package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// The agent each CLI's User-Agent names (issue 31).
func TestAgentFromUserAgent(t *testing.T) {
	for ua, want := range map[string]string{
		"claude-cli/2.1.332 (external, cli)":        "claude",
		"codex_cli_rs/0.171.0 (Mac OS 15.5; arm64)": "codex",
		"codex_exec/0.171.0 (Ubuntu 24.4; x86_64)":  "codex",
		"GeminiCLI/0.61.0 (darwin; arm64)":          "gemini",
		"opencode/1.18.33":                          "opencode",
		"Anthropic/JS 0.60.0":                       "", // pi: its SDK's
		"curl/8.5.0":                                "",
		"":                                          "",
	} {
		if got := server.AgentFromUserAgent(ua); got != want {
			t.Errorf("AgentFromUserAgent(%q) = %q; want %q", ua, got, want)
		}
	}
}

// keepScorer keeps every output (0.9, over any cutoff): only the hard limit prunes.
var keepScorer = testkit.Const("keep-test", 0.9)

// readsBody is an Anthropic Messages request of n Read calls, each answered with
// a file of about 2,279 tokens (the session), and the tokens of those
// results as sent; extra is added to the body's top level (",\"k\":v" or "").
func readsBody(t *testing.T, n int, extra string) ([]byte, int) {
	t.Helper()
	msgs := []any{map[string]any{"role": "user", "content": "Read the files"}}
	tokens := 0
	for i := 1; i <= n; i++ {
		text := readText(i)
		tokens += tokencount.Count(text)
		id := fmt.Sprintf("toolu_%02d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Read", "input": map[string]any{"file_path": fmt.Sprintf("/src/f%d.go", i)}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": text}}})
	}
	m, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"model":"claude-test","max_tokens":100,"messages":` + string(m) + extra + `}`), tokens
}

// readText is file i's content: distinct lines, about 2,279 tokens.
func readText(i int) string {
	var b strings.Builder
	for j, got := 0, 0; got < 2_279; j++ {
		line := fmt.Sprintf("f%d line %d: value_%d = %d\n", i, j, j*7, j*j+i)
		got += tokencount.Count(line)
		b.WriteString(line)
	}
	return b.String()
}

// resultTokens is the tokens of the tool results a forwarded body holds, and how
// many are stubs.
func resultTokens(body []byte) (tokens, stubs int) {
	gjson.GetBytes(body, "messages.#.content.#(type==\"tool_result\")#.content").ForEach(func(_, v gjson.Result) bool {
		v.ForEach(func(_, c gjson.Result) bool {
			tokens += tokencount.Count(c.String())
			if strings.HasPrefix(c.String(), "[pruned:") {
				stubs++
			}
			return true
		})
		return true
	})
	return tokens, stubs
}

// hardLimitProxy is a proxy over a real SQLite store with the settings: a
// budget of 4,000 tokens, the price rule on (PriceForced, the default), a window of
// 60,000 tokens: Claude Code compacts at 60,000 - 33,000 = 27,000, so its hard
// limit is 17,000 (margin 10,000); the window fraction's 54,000.
func hardLimitProxy(t *testing.T, cfg func(*advisor.Config)) (*proxyEnv, *recorder) {
	up := newRecorder(t, anthropicUpstream(nil))
	c := advisor.DefaultConfig()
	c.ContextWindow, c.Budget = 60_000, 4_000
	if cfg != nil {
		cfg(&c)
	}
	return newProxy(t, server.Options{Config: c, Scorer: keepScorer, AnthropicUpstream: up.URL}), up
}

func postReads(t *testing.T, env *proxyEnv, body []byte, hdr map[string]string) {
	t.Helper()
	h := map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "k"}
	for k, v := range hdr {
		h[k] = v
	}
	resp, b := post(t, env.http.URL+"/v1/messages", body, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
}

// Issue 31, must show 3: Claude Code (by its User-Agent) on a warm cache, 20
// steps of 2,279-token reads at a budget of 4,000: stubs go in before the point
// (27,000), and no forwarded body holds more than the hard limit (17,000) of tool
// results. Under the window fraction (no agent known) the same session gets no
// stub up to 45,000 tokens: the price rule holds the budget's rewrites.
func TestProxyHardLimitGrowing(t *testing.T) {
	for _, tt := range []struct {
		name, ua string
		limit    int
	}{{"claude", "claude-cli/2.1.332 (external, cli)", 17_000}, {"unknown", "Anthropic/JS 0.60.0", 54_000}} {
		t.Run(tt.name, func(t *testing.T) {
			env, up := hardLimitProxy(t, nil)
			firstStub := 0
			for n := 1; n <= 20; n++ {
				body, orig := readsBody(t, n, "")
				postReads(t, env, body, map[string]string{"User-Agent": tt.ua, server.HeaderSession: "grow-" + tt.name})
				got, stubs := resultTokens(up.body(up.count() - 1))
				if got > tt.limit {
					t.Fatalf("step %d: %d tokens of tool results forwarded, over the hard limit %d", n, got, tt.limit)
				}
				if stubs > 0 && firstStub == 0 {
					firstStub = n
					if orig >= 27_000 {
						t.Errorf("first stubs at step %d, with %d tokens of results: not before the point 27,000", n, orig)
					}
				}
			}
			switch {
			case tt.name == "claude" && firstStub == 0:
				t.Error("no stub in 20 steps of 2,279 tokens with Claude Code's hard limit 17,000")
			case tt.name == "unknown" && firstStub != 0:
				t.Errorf("stubs from step %d under the window fraction's 54,000", firstStub)
			}
			// serve --verbose says why: the rewrites the hard limit forced, or, under
			// the window fraction, each request over the budget without one.
			want := map[string]string{"claude": `msg=rewrite session=grow-claude`, "unknown": `msg="over budget, no rewrite" session=grow-unknown`}[tt.name]
			if !strings.Contains(env.log.String(), want) {
				t.Errorf("the log lacks %q:\n%s", want, env.log.String())
			}
			logged := strings.Count(env.log.String(), "the agent is not known")
			if want := map[string]int{"claude": 0, "unknown": 1}[tt.name]; logged != want {
				t.Errorf("the fallback to the window fraction was logged %d times; want %d:\n%s", logged, want, env.log.String())
			}
		})
	}
}

// A session that reaches the proxy already past the point (15 reads, 34,000
// tokens) is pruned at its first request, down under the hard limit; serve
// --agent (Config.Agent) names the agent here.
func TestProxyHardLimitStartsPast(t *testing.T) {
	env, up := hardLimitProxy(t, func(c *advisor.Config) { c.Agent = "claude" })
	body, orig := readsBody(t, 15, "")
	postReads(t, env, body, map[string]string{server.HeaderSession: "past"})
	got, stubs := resultTokens(up.body(0))
	if stubs == 0 || got > 17_000 {
		t.Fatalf("first request of %d tokens: forwarded %d tokens with %d stubs; want stubs and <= 17,000", orig, got, stubs)
	}
}

// The trigger a request asks the provider to compact at is the point (issue 38's
// leftover): with compact_20260112 at 20,000 input tokens and no agent known, the
// hard limit is 10,000, and stubs come by the fifth read (about 11,400 tokens);
// without the trigger, none in 10 reads.
func TestProxyHardLimitTrigger(t *testing.T) {
	const cm = `,"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":20000}}]}`
	for _, tt := range []struct {
		name, extra string
		limit       int
	}{{"trigger", cm, 10_000}, {"none", "", 54_000}} {
		t.Run(tt.name, func(t *testing.T) {
			env, up := hardLimitProxy(t, nil)
			stubbed := 0
			for n := 1; n <= 10; n++ {
				body, _ := readsBody(t, n, tt.extra)
				postReads(t, env, body, map[string]string{server.HeaderSession: "trigger-" + tt.name})
				got, stubs := resultTokens(up.body(up.count() - 1))
				if got > tt.limit {
					t.Fatalf("step %d: %d tokens of results forwarded, over %d", n, got, tt.limit)
				}
				if stubs > 0 && stubbed == 0 {
					stubbed = n
				}
				if !strings.Contains(string(up.body(up.count()-1)), tt.extra) {
					t.Fatalf("step %d: the context_management field was not forwarded as sent", n)
				}
			}
			if (stubbed != 0 && stubbed <= 5) != (tt.name == "trigger") {
				t.Errorf("first stubs at step %d", stubbed)
			}
		})
	}
}

// An unknown agent in X-Pruneadvisor-Agent is a 400 naming the header; serve's
// configured agent must be known (server.New fails naming the field).
func TestProxyUnknownAgent(t *testing.T) {
	env, up := hardLimitProxy(t, nil)
	body, _ := readsBody(t, 2, "")
	resp, b := post(t, env.http.URL+"/v1/messages", body, map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "k", server.HeaderAgent: "aider"})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `X-Pruneadvisor-Agent header: unknown agent \"aider\"`) {
		t.Errorf("unknown agent header: %d %s; want 400 naming the header", resp.StatusCode, b)
	}
	if up.count() != 0 {
		t.Errorf("%d requests reached the upstream", up.count())
	}
	c := advisor.DefaultConfig()
	c.Agent = "aider"
	if _, err := server.New(server.Options{Config: c, Store: env.db}); err == nil || !strings.Contains(err.Error(), `agent: unknown agent "aider"`) {
		t.Errorf("server.New with agent aider: %v; want an error naming agent", err)
	}
}

// The tool definitions a request carries count toward the agent's point but are
// in no message (e2e TestClaudeCompaction: Claude Code's 11,087 tokens of tools
// took it past its point through the proxy): with about 7,000 tokens of tools the
// proxy's hard limit for Claude Code's session is 17,000 less them, and the tool
// results forwarded stay under it at every step of the growing session.
func TestProxyHardLimitTools(t *testing.T) {
	var tools []any
	for i := 0; len(tools) == 0 || tokencount.Tools([]byte(`{"tools":`+mustJSON(t, tools)+`}`)) < 7_000; i++ {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("tool_%d", i),
			"description":  strings.Repeat(fmt.Sprintf("Tool %d reads the files the user names and says what each holds. ", i), 20),
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}})
	}
	extra := `,"tools":` + mustJSON(t, tools)
	toolTokens := tokencount.Tools([]byte(`{"tools":` + mustJSON(t, tools) + `}`))
	limit := 17_000 - toolTokens
	env, up := hardLimitProxy(t, nil)
	stubbed := 0
	for n := 1; n <= 12; n++ {
		body, _ := readsBody(t, n, extra)
		postReads(t, env, body, map[string]string{"User-Agent": "claude-cli/2.1.332 (external, cli)", server.HeaderSession: "tools"})
		got, stubs := resultTokens(up.body(up.count() - 1))
		if got > limit {
			t.Fatalf("step %d: %d tokens of tool results forwarded beside %d of tools, over the hard limit %d less the tools (%d)", n, got, toolTokens, 17_000, limit)
		}
		if stubs > 0 && stubbed == 0 {
			stubbed = n
		}
	}
	if stubbed == 0 {
		t.Fatalf("no stub in 12 steps of 2,279 tokens with %d tokens of tools", toolTokens)
	}
	t.Logf("%d tokens of tools: the results kept under %d; first stubs at step %d", toolTokens, limit, stubbed)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
