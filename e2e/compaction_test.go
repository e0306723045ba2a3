package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// Issue 31: with its compaction point set low through its own settings, an agent
// run straight at the fake model compacts (its summarising request reaches the
// model), and the same scripted task run through wrap, the proxy told the same
// point, does not: the hard limit prunes first. The fake's usage reports the
// tokens of the whole request (requestTokens), so the agent measures its context
// as a provider would count it.

// The compaction script reads bigFiles distinct files one after another and
// answers; each file holds bigLines lines no other file holds, so no rule prunes
// any of them (no superseded read, no duplicate): only the hard limit can.
const (
	bigFiles = 10
	bigLines = 220
)

// bigName is the i-th file the compaction script reads (from 1).
func bigName(i int) string { return fmt.Sprintf("big%d.txt", i) }

// writeBigFiles writes the compaction script's files into work and returns the
// o200k tokens of each (they are all the same size, give or take a token).
func writeBigFiles(t *testing.T, work string) int {
	t.Helper()
	tokens := 0
	for i := 1; i <= bigFiles; i++ {
		var b strings.Builder
		for l := 1; l <= bigLines; l++ {
			fmt.Fprintf(&b, "%s line %03d: sensor %d read %d.%02d volts at %02d:%02d, status %s\n",
				bigName(i), l, i*1000+l, (i*l)%17, (i*31+l*7)%100, l%24, (i*l)%60, []string{"ok", "warn", "fail", "idle"}[(i+l)%4])
		}
		writeFile(t, filepath.Join(work, bigName(i)), b.String())
		tokens = tokencount.Count(b.String())
	}
	return tokens
}

// compactionCase is one agent's part of the test.
type compactionCase struct {
	pin agentPin
	// point is the agent's compaction point in tokens as its settings put it:
	// it compacts when the context its usage reports passes it.
	point int
	// model returns a fresh fake model for one run, with the plan and the
	// agent's compaction phrase set.
	model func() *model
	// opts returns the run's options, direct or through wrap.
	opts func(direct bool) runOpts
	// config is the proxy's config: the same point as the agent's settings.
	config string
}

// compactionPlan is the script as actions: read each big file with read(name).
func compactionPlan(read func(name string) action) []func() action {
	var plan []func() action
	for i := 1; i <= bigFiles; i++ {
		name := bigName(i)
		plan = append(plan, func() action { return read(name) })
	}
	return plan
}

// compactionConfig is the proxy's config for the compaction tests: the window
// and points as given, and a budget as large as the window, so that what prunes
// is the hard limit (the budget is lowered to it), not the budget. Rules only,
// one protected step, candidates from 100 tokens as in e2eConfig.
func compactionConfig(window int, points string) string {
	cfg := fmt.Sprintf(`{"context_window": %d, "budget": %d, "price_forced": false, "protected_steps": 1, "min_candidate_tokens": 100, "rewrite_fraction": 0`, window, window)
	if points != "" {
		cfg += `, "compaction_points": ` + points
	}
	return cfg + "}"
}

// usageTotal is what the fake's answer to q reported as the context in total
// (input plus output), the figure the agents compare with their points.
func usageTotal(q recorded) int { return q.tokens + outputTokens }

// testCompaction runs c's agent twice on the same script: straight at the fake
// model, where it must compact, and through wrap, where it must not.
func testCompaction(t *testing.T, c compactionCase) {
	fileTokens := 0
	prepare := func(o runOpts) runOpts {
		inner := o.prepare
		o.prepare = func(home, work, upstream string) {
			fileTokens = writeBigFiles(t, work)
			if inner != nil {
				inner(home, work, upstream)
			}
		}
		return o
	}

	// (1) Straight at the model: the agent compacts.
	m1 := c.model()
	r1 := runAgentWith(t, c.pin, m1, prepare(c.opts(true)))
	t.Logf("each file read is %d tokens; the agent compacts at %d", fileTokens, c.point)
	if r1.exit != 0 {
		t.Errorf("direct: exit %d\nstdout:\n%s\nstderr:\n%s", r1.exit, tail(r1.stdout), tail(r1.stderr))
	}
	// largest is the largest context before the compaction, growth the step
	// that led to it: pi, Codex, Gemini CLI and opencode compact once the last
	// usage passed the point, Claude Code once that usage plus its estimate of
	// the output since would.
	compactAt, largest, growth, prev := -1, 0, 0, 0
	for i, q := range m1.requests {
		if q.compaction {
			compactAt = i
			break
		}
		if q.main {
			largest = max(largest, usageTotal(q))
			growth, prev = usageTotal(q)-prev, usageTotal(q)
		}
	}
	if compactAt < 0 {
		t.Errorf("direct: the agent never compacted (no request with its compaction prompt %q); largest context %d tokens, point %d; steps %v",
			c.model().compactMark, largest, c.point, m1.steps)
	} else {
		t.Logf("direct: the agent compacted at request %d of %d, after a context of %d tokens (point %d, the last step %d); its summarising request was %d tokens",
			compactAt, len(m1.requests), largest, c.point, growth, m1.requests[compactAt].tokens)
		if largest+growth < c.point {
			t.Errorf("direct: the agent compacted a step or more short of its point: largest context %d tokens, the last step %d, point %d", largest, growth, c.point)
		}
	}
	t.Logf("direct: contexts at the model %v", contexts(m1))
	if !planDone(m1) {
		t.Errorf("direct: the script did not reach its end: %v", m1.steps)
	}

	// (2) Through wrap, the proxy told the same point: no compaction, stubs.
	m2 := c.model()
	o2 := c.opts(false)
	o2.config = c.config
	r2 := runAgentWith(t, c.pin, m2, prepare(o2))
	if r2.exit != 0 {
		t.Errorf("wrap: exit %d\nstdout:\n%s\nstderr:\n%s", r2.exit, tail(r2.stdout), tail(r2.stderr))
	}
	largest = 0
	for i, q := range m2.requests {
		if q.compaction {
			t.Errorf("wrap: request %d is the agent compacting (%d tokens; the previous largest context %d, point %d)", i, q.tokens, largest, c.point)
		}
		largest = max(largest, usageTotal(q))
	}
	stubbed := checkSentBytes(t, r2)
	if largest >= c.point {
		t.Errorf("wrap: a context of %d tokens reached the model, at or past the agent's point %d", largest, c.point)
	}
	if stubbed == 0 {
		t.Errorf("wrap: no stub reached the model: nothing was pruned")
	}
	if !planDone(m2) {
		t.Errorf("wrap: the script did not reach its end: %v", m2.steps)
	}
	t.Logf("wrap: contexts at the model %v", contexts(m2))
	t.Logf("wrap: no compaction; largest context %d tokens (point %d); %d of %d requests carried stubs", largest, c.point, stubbed, len(m2.requests))
}

// planDone reports whether the model answered every planned step and then its
// last words.
func planDone(m *model) bool {
	for _, s := range m.steps {
		if s == "final" {
			return m.planned > len(m.plan)
		}
	}
	return false
}

// contexts lists the usage totals the fake reported, in order; a compaction
// request's is marked with a C.
func contexts(m *model) []string {
	var out []string
	for _, q := range m.requests {
		s := fmt.Sprint(usageTotal(q))
		if q.compaction {
			s = "C" + s
		}
		out = append(out, s)
	}
	return out
}

// checkSentBytes checks that every request at the model is the one the agent
// sent but for JSON string values holding stubs (as checkRun does), pairing them
// in order per path, and returns how many carried stubs the agent did not send.
func checkSentBytes(t *testing.T, r *run) int {
	t.Helper()
	byPath := map[string][][]byte{}
	for _, h := range r.hop.reqs {
		if strings.Contains(h.path, "/recall/") || strings.HasSuffix(h.path, "/healthz") {
			continue
		}
		byPath[h.path] = append(byPath[h.path], h.body)
	}
	seen := map[string]int{}
	rewritten := 0
	for i, got := range r.model.requests {
		k := seen[got.path]
		seen[got.path]++
		if k >= len(byPath[got.path]) {
			t.Errorf("request %d (%s) at the model has no counterpart the agent sent", i, got.path)
			continue
		}
		orig := byPath[got.path][k]
		checkOnlyStubs(t, i, orig, got.body)
		if !bytes.Equal(orig, got.body) {
			rewritten++
		}
	}
	return rewritten
}

// piCompactionWindow is the contextWindow pi's models.json gives the model in
// TestPiCompaction: pi compacts past it less reserveTokens (16,384, its default).
const piCompactionWindow = 48_000

// TestPiCompaction: pi with its model's contextWindow set low in its models.json.
// pi checks its point after the agent's run ends (and before the next prompt),
// against the last answer's usage.
func TestPiCompaction(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["pi"]
	testCompaction(t, compactionCase{
		pin:   p,
		point: piCompactionWindow - 16_384,
		model: func() *model {
			return &model{proto: "responses", agent: "pi", readTool: "read",
				plan:        compactionPlan(func(name string) action { return action{tool: "read", args: map[string]any{"path": name}} }),
				compactMark: "You are a context summarization assistant."}
		},
		opts: func(direct bool) runOpts {
			return runOpts{
				direct: direct,
				args: func(string) []string {
					return []string{"-p", "--no-session", "--provider", "openai", "--model", "gpt-4o", prompt}
				},
				prepare: func(home, _, upstream string) {
					openai := map[string]any{"modelOverrides": map[string]any{"gpt-4o": map[string]any{"contextWindow": piCompactionWindow}}}
					if upstream != "" {
						openai["baseUrl"] = upstream + "/v1"
					}
					b, _ := json.Marshal(map[string]any{"providers": map[string]any{"openai": openai}})
					writeFile(t, filepath.Join(home, ".pi", "agent", "models.json"), string(b))
				},
			}
		},
		config: compactionConfig(piCompactionWindow, ""),
	})
}

// codexCompactLimit is the model_auto_compact_token_limit TestCodexCompaction
// gives Codex: it compacts when a response's total tokens reach it.
const codexCompactLimit = 40_000

// TestCodexCompaction: Codex with model_auto_compact_token_limit set low (-c).
// Codex checks its point after every response, mid-turn included.
func TestCodexCompaction(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["codex"]
	testCompaction(t, compactionCase{
		pin:   p,
		point: codexCompactLimit,
		model: func() *model {
			return &model{proto: "responses", agent: "codex", readTool: "exec_command",
				plan: compactionPlan(func(name string) action {
					return action{tool: "exec_command", args: map[string]any{"cmd": "cat " + name}}
				}),
				compactMark: "You are performing a CONTEXT CHECKPOINT COMPACTION."}
		},
		opts: func(direct bool) runOpts {
			return runOpts{
				direct: direct,
				args: func(upstream string) []string {
					args := []string{"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5",
						"-c", fmt.Sprintf("model_auto_compact_token_limit=%d", codexCompactLimit)}
					if upstream != "" {
						// Codex's own provider mechanism, as wrap uses it, at the fake.
						args = append(args, "-c", `model_provider="fake"`,
							"-c", `model_providers.fake={name="fake",base_url="`+upstream+`/v1",env_key="OPENAI_API_KEY",wire_api="responses"}`)
					}
					return append(args, prompt)
				},
			}
		},
		config: compactionConfig(272_000, fmt.Sprintf(`{"codex": {"tokens": %d}}`, codexCompactLimit)),
	})
}

// claudeCompactWindow is the CLAUDE_CODE_AUTO_COMPACT_WINDOW TestClaudeCompaction
// gives Claude Code, the least it takes (100,000): it compacts at the window less
// min(max output, 20,000) less 13,000, 67,000 tokens, the proxy's claude row for
// a context_window of 100,000.
const claudeCompactWindow = 100_000

// TestClaudeCompaction: Claude Code with CLAUDE_CODE_AUTO_COMPACT_WINDOW at its
// least. Claude Code checks its point before every model call, against the last
// usage plus an estimate of what came after it.
func TestClaudeCompaction(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["claude"]
	var work string
	testCompaction(t, compactionCase{
		pin:   p,
		point: claudeCompactWindow - 20_000 - 13_000,
		model: func() *model {
			return &model{proto: "anthropic", agent: "claude", readTool: "Read",
				plan: compactionPlan(func(name string) action {
					return action{tool: "Read", args: map[string]any{"file_path": filepath.Join(work, name)}}
				}),
				compactMark: "Your task is to create a detailed summary of the conversation so far"}
		},
		opts: func(direct bool) runOpts {
			return runOpts{
				direct: direct,
				args: func(string) []string {
					return []string{"-p", prompt, "--model", "claude-sonnet-4-5", "--dangerously-skip-permissions", "--output-format", "text"}
				},
				env: func(upstream string) []string {
					env := []string{fmt.Sprintf("CLAUDE_CODE_AUTO_COMPACT_WINDOW=%d", claudeCompactWindow)}
					if upstream != "" {
						env = append(env, "ANTHROPIC_BASE_URL="+upstream) // as wrap points it at the proxy
					}
					return env
				},
				prepare: func(_, w, _ string) { work = w },
			}
		},
		config: compactionConfig(claudeCompactWindow, ""),
	})
}

// geminiCompressionThreshold is the model.compressionThreshold
// TestGeminiCompaction gives Gemini CLI: it compresses its history when the last
// prompt's tokens reach that fraction of the model's limit (1,048,576 for
// gemini-2.5-pro): 52,428 tokens.
const geminiCompressionThreshold = 0.05

// TestGeminiCompaction: Gemini CLI with compressionThreshold set low in its
// settings. Gemini CLI checks it before each request of a turn, tool results'
// included, against the last response's promptTokenCount; but it compresses only
// up to a user message that is not a tool result, or all of a history that ends
// in a model's answer, which a one-prompt run of tool calls never has. So the
// script answers in words after the eighth read, and Gemini CLI's next-speaker
// check (on in its settings here) is told the model goes on: Gemini CLI sends
// "Please continue." and checks its threshold first.
func TestGeminiCompaction(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["gemini"]
	const window = 1_048_576
	var work string
	testCompaction(t, compactionCase{
		pin:   p,
		point: 52_428, // 0.05 x 1,048,576, rounded down as the proxy does
		model: func() *model {
			return &model{proto: "gemini", agent: "gemini", readTool: "read_file",
				plan: geminiPlan(compactionPlan(func(name string) action {
					return action{tool: "read_file", args: map[string]any{"file_path": filepath.Join(work, name)}}
				})),
				compactMark: "distilling chat history into a structured XML <state_snapshot>"}
		},
		opts: func(direct bool) runOpts {
			return runOpts{
				direct: direct,
				args: func(string) []string {
					return []string{"-p", prompt, "--yolo", "-m", "gemini-2.5-pro", "--output-format", "text"}
				},
				env: func(upstream string) []string {
					if upstream != "" {
						return []string{"GOOGLE_GEMINI_BASE_URL=" + upstream} // as wrap points it at the proxy
					}
					return nil
				},
				prepare: func(home, w, _ string) {
					work = w
					// TestGemini's settings, and the threshold.
					writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{"security":{"auth":{"selectedType":"gemini-api-key"},"folderTrust":{"enabled":false}},`+
						`"telemetry":{"enabled":false},"privacy":{"usageStatisticsEnabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true},`+
						fmt.Sprintf(`"model":{"compressionThreshold":%g,"skipNextSpeakerCheck":false}}`, geminiCompressionThreshold))
				},
			}
		},
		config: compactionConfig(window, fmt.Sprintf(`{"gemini": {"fraction": %g}}`, geminiCompressionThreshold)),
	})
}

// geminiPlan is plan with an answer in words after its eighth step.
func geminiPlan(plan []func() action) []func() action {
	out := append([]func() action{}, plan[:8]...)
	out = append(out, func() action { return action{text: "Eight files read; two to go."} })
	return append(out, plan[8:]...)
}

// opencodeInputLimit is the input limit TestOpencodeCompaction gives the model in
// opencode's config (provider.anthropic.models[...].limit.input); opencode
// compacts when a step's tokens reach it less compaction.reserved (20,000, its
// default made explicit): 40,000, the proxy's opencode row for a context_window
// of 60,000.
const opencodeInputLimit = 60_000

// TestOpencodeCompaction: opencode with the model's input limit set low in its
// config (OPENCODE_CONFIG_CONTENT, which wrap merges its own over). opencode checks
// its point after every step, against the step's usage.
func TestOpencodeCompaction(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["opencode"]
	var work string
	testCompaction(t, compactionCase{
		pin:   p,
		point: opencodeInputLimit - 20_000,
		model: func() *model {
			return &model{proto: "anthropic", agent: "opencode", readTool: "read",
				plan: compactionPlan(func(name string) action {
					return action{tool: "read", args: map[string]any{"filePath": filepath.Join(work, name)}}
				}),
				compactMark: "You are a context summarization agent"}
		},
		opts: func(direct bool) runOpts {
			return runOpts{
				direct: direct,
				args: func(string) []string {
					return []string{"run", "--model", "anthropic/claude-sonnet-4-5", prompt}
				},
				env: func(upstream string) []string {
					anthropic := map[string]any{"models": map[string]any{"claude-sonnet-4-5": map[string]any{
						"limit": map[string]any{"context": opencodeInputLimit, "input": opencodeInputLimit, "output": 32_000}}}}
					if upstream != "" {
						anthropic["options"] = map[string]any{"baseURL": upstream + "/v1"} // as wrap points it at the proxy
					}
					b, _ := json.Marshal(map[string]any{"compaction": map[string]any{"reserved": 20_000}, "provider": map[string]any{"anthropic": anthropic}})
					return []string{"OPENCODE_CONFIG_CONTENT=" + string(b)}
				},
				prepare: func(_, w, _ string) { work = w },
			}
		},
		config: compactionConfig(opencodeInputLimit, ""),
	})
}
