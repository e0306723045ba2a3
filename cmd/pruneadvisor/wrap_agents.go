package main

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/wire"
)

// piExtension is the pi extension `wrap pi` loads: it points pi's built-in
// providers at the proxy and registers the recall tool.
//
//go:embed wrapdata/pruneadvisor-pi.ts
var piExtension []byte

// agent is one coding agent `wrap` knows how to start.
type agent struct {
	name    string // the AGENT argument
	bin     string // the executable looked up on PATH
	pkg     string // the npm package that installs it
	version string // the version the end-to-end tests run (e2e/agents.txt)
	// recallTool is the recall tool's name as this agent shows it to its model, the
	// name every stub of its sessions names.
	recallTool string
	// launch adds to l what points the agent at the proxy and gives it the tool.
	launch func(l *launch) error
	// calls are the wire APIs its model calls use through the proxy, each with the
	// credential it sends: the proxy routes them by the table of wire APIs (package
	// wire) and refuses a credential of another provider than the route's, so every
	// call here must be one the table sends to the API's own provider
	// (TestWrapCallsRouted).
	calls []modelCall
}

// modelCall is one wire API an agent speaks through the proxy: its client's base
// URL is the proxy's plus base, to which it appends path, with cred (docs/INTEGRATIONS.md,
// "What goes where").
type modelCall struct {
	api  wire.API
	base string // what wrap appends to the proxy's URL for the agent's client
	path string // what the agent's client appends to its base URL
	cred wire.Credential
}

// The model calls of the agents wrap knows.
var (
	messagesCall      = modelCall{api: wire.Messages, path: "/v1/messages", cred: wire.AnthropicKey}
	messagesOAuthCall = modelCall{api: wire.Messages, path: "/v1/messages", cred: wire.Authorization} // a Claude subscription
	responsesCall     = modelCall{api: wire.Responses, base: "/v1", path: "/responses", cred: wire.Authorization}
	geminiCall        = modelCall{api: wire.Gemini, path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent", cred: wire.GoogleKey}
	// the AI SDK's and pi's clients, whose base URL holds the version
	messagesV1Call   = modelCall{api: wire.Messages, base: "/v1", path: "/messages", cred: wire.AnthropicKey}
	geminiV1betaCall = modelCall{api: wire.Gemini, base: "/v1beta", path: "/models/gemini-2.5-pro:streamGenerateContent", cred: wire.GoogleKey}
)

// base returns the base URL wrap gives an agent's client for api: the proxy's URL
// plus the base of the agent's call of that API.
func (l *launch) base(api wire.API) string {
	for _, c := range l.calls {
		if c.api == api {
			return l.proxy + c.base
		}
	}
	panic(fmt.Sprintf("wrap: the agent makes no %s call", api)) // the agents table is wrong
}

// launch is what wrap runs: the agent's executable with its arguments and the
// environment changes, and the files it writes first.
type launch struct {
	proxy  string // the proxy's base URL, no trailing slash
	mcpCmd []string
	cache  string // folder for files wrap writes (the pi extension, Gemini CLI defaults)
	args   []string
	env    map[string]string
	files  map[string][]byte
	hdrs   map[string]string // headers the agent must send to the proxy
	calls  []modelCall       // the agent's (agent.calls)
	getenv func(string) string
}

// agents lists the agents wrap starts, by name.
var agents = []agent{
	{name: "claude", bin: "claude", pkg: "@anthropic-ai/claude-code", version: "2.1.332", recallTool: "mcp__pruneadvisor__recall", launch: launchClaude,
		calls: []modelCall{messagesCall, messagesOAuthCall}},
	{name: "codex", bin: "codex", pkg: "@openai/codex", version: "0.171.0", recallTool: "mcp__pruneadvisor__recall", launch: launchCodex,
		calls: []modelCall{responsesCall}},
	{name: "gemini", bin: "gemini", pkg: "@google/gemini-cli", version: "0.61.0", recallTool: "mcp_pruneadvisor_recall", launch: launchGemini,
		calls: []modelCall{geminiCall}},
	// pi's extension (wrapdata/pruneadvisor-pi.ts) sets the same base URLs.
	{name: "pi", bin: "pi", pkg: "@mariozechner/pi-coding-agent", version: "0.73.1", recallTool: "recall", launch: launchPi,
		calls: []modelCall{messagesCall, responsesCall, geminiV1betaCall}},
	{name: "opencode", bin: "opencode", pkg: "opencode-ai", version: "1.18.33", recallTool: "pruneadvisor_recall", launch: launchOpencode,
		calls: []modelCall{messagesV1Call, responsesCall, geminiV1betaCall}},
}

// errUnknownAgent is returned for an AGENT wrap does not know.
var errUnknownAgent = errors.New("unknown agent")

func findAgent(name string) (agent, error) {
	var names []string
	for _, a := range agents {
		if a.name == name {
			return a, nil
		}
		names = append(names, a.name)
	}
	return agent{}, fmt.Errorf("%w %q; known agents: %s", errUnknownAgent, name, strings.Join(names, ", "))
}

// headerLines renders headers as "Name: value" lines, sorted.
func headerLines(h map[string]string, sep string) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var lines []string
	for _, k := range keys {
		lines = append(lines, k+": "+h[k])
	}
	return strings.Join(lines, sep)
}

// appendLines joins an existing multi-line setting and new lines.
func appendLines(old, add, sep string) string {
	if strings.TrimSpace(old) == "" {
		return add
	}
	return old + sep + add
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return string(b)
}

// launchClaude: ANTHROPIC_BASE_URL, the headers in ANTHROPIC_CUSTOM_HEADERS (one
// "Name: value" per line, after any the user set), and the MCP server in
// --mcp-config, loaded always (alwaysLoad) so that Claude Code lists the tool to the
// model itself instead of behind its ToolSearch tool.
func launchClaude(l *launch) error {
	l.env["ANTHROPIC_BASE_URL"] = l.base(wire.Messages)
	l.env["ANTHROPIC_CUSTOM_HEADERS"] = appendLines(l.getenv("ANTHROPIC_CUSTOM_HEADERS"), headerLines(l.hdrs, "\n"), "\n")
	cfg := map[string]any{"mcpServers": map[string]any{"pruneadvisor": map[string]any{
		"type": "stdio", "command": l.mcpCmd[0], "args": l.mcpCmd[1:], "alwaysLoad": true,
	}}}
	l.args = append(l.args, "--mcp-config", mustJSON(cfg))
	return nil
}

// tomlString quotes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string { return mustJSON(s) }

// launchCodex: config overrides (-c) for a model provider "pruneadvisor" that
// speaks the Responses API to the proxy with OPENAI_API_KEY and the headers, made
// the model provider of the run, and the MCP server.
func launchCodex(l *launch) error {
	var hdrs []string
	for _, line := range strings.Split(headerLines(l.hdrs, "\n"), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		hdrs = append(hdrs, tomlString(k)+"="+tomlString(v))
	}
	args := make([]string, len(l.mcpCmd)-1)
	for i, a := range l.mcpCmd[1:] {
		args[i] = tomlString(a)
	}
	l.args = append(l.args,
		"-c", `model_provider="pruneadvisor"`,
		"-c", `model_providers.pruneadvisor={name="OpenAI through pruneadvisor",base_url=`+tomlString(l.base(wire.Responses))+
			`,env_key="OPENAI_API_KEY",wire_api="responses",http_headers={`+strings.Join(hdrs, ",")+`}}`,
		"-c", `mcp_servers.pruneadvisor={command=`+tomlString(l.mcpCmd[0])+`,args=[`+strings.Join(args, ",")+`]}`,
	)
	return nil
}

// geminiDefaultsPath is where Gemini CLI reads its system defaults when
// GEMINI_CLI_SYSTEM_DEFAULTS_PATH is not set (Linux).
const geminiDefaultsPath = "/etc/gemini-cli/system-defaults.json"

// launchGemini: GOOGLE_GEMINI_BASE_URL, the headers in GEMINI_CLI_CUSTOM_HEADERS
// (comma-separated "Name: value", after any the user set), and the MCP server in a
// system-defaults file of wrap's own (GEMINI_CLI_SYSTEM_DEFAULTS_PATH; the lowest
// layer of Gemini CLI's settings, so the user's settings keep precedence), made
// from the defaults file in force, if any, plus the server.
func launchGemini(l *launch) error {
	l.env["GOOGLE_GEMINI_BASE_URL"] = l.base(wire.Gemini)
	l.env["GEMINI_CLI_CUSTOM_HEADERS"] = appendLines(l.getenv("GEMINI_CLI_CUSTOM_HEADERS"), headerLines(l.hdrs, ","), ",")
	src := l.getenv("GEMINI_CLI_SYSTEM_DEFAULTS_PATH")
	if src == "" {
		src = geminiDefaultsPath
	}
	defaults := map[string]any{}
	if b, err := os.ReadFile(src); err == nil {
		if err := json.Unmarshal(b, &defaults); err != nil {
			return fmt.Errorf("gemini system defaults %s: %w", src, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("gemini system defaults: %w", err)
	}
	servers, _ := defaults["mcpServers"].(map[string]any)
	if servers == nil {
		servers = map[string]any{}
	}
	servers["pruneadvisor"] = map[string]any{"command": l.mcpCmd[0], "args": l.mcpCmd[1:], "trust": true}
	defaults["mcpServers"] = servers
	b, err := json.MarshalIndent(defaults, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(l.cache, "gemini-system-defaults.json")
	l.files[path] = b
	l.env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"] = path
	return nil
}

// launchPi: the extension (-e), written to wrap's cache folder, and the proxy's URL
// for it in PRUNEADVISOR_URL.
func launchPi(l *launch) error {
	path := filepath.Join(l.cache, "pruneadvisor-pi.ts")
	l.files[path] = piExtension
	l.env["PRUNEADVISOR_URL"] = l.proxy
	l.args = append(l.args, "-e", path)
	return nil
}

// launchOpencode: OPENCODE_CONFIG_CONTENT (merged over any the user set: opencode
// layers it over its config files) pointing the built-in anthropic, openai and
// google providers at the proxy with the headers, and the MCP server.
func launchOpencode(l *launch) error {
	cfg := map[string]any{}
	if old := l.getenv("OPENCODE_CONFIG_CONTENT"); strings.TrimSpace(old) != "" {
		if err := json.Unmarshal([]byte(old), &cfg); err != nil {
			return fmt.Errorf("OPENCODE_CONFIG_CONTENT is not JSON: %w", err)
		}
	}
	providers, _ := cfg["provider"].(map[string]any)
	if providers == nil {
		providers = map[string]any{}
	}
	for name, base := range map[string]string{"anthropic": l.base(wire.Messages), "openai": l.base(wire.Responses), "google": l.base(wire.Gemini)} {
		p, _ := providers[name].(map[string]any)
		if p == nil {
			p = map[string]any{}
		}
		opts, _ := p["options"].(map[string]any)
		if opts == nil {
			opts = map[string]any{}
		}
		opts["baseURL"] = base
		h, _ := opts["headers"].(map[string]any)
		if h == nil {
			h = map[string]any{}
		}
		for k, v := range l.hdrs {
			h[k] = v
		}
		opts["headers"] = h
		p["options"] = opts
		providers[name] = p
	}
	cfg["provider"] = providers
	mcp, _ := cfg["mcp"].(map[string]any)
	if mcp == nil {
		mcp = map[string]any{}
	}
	mcp["pruneadvisor"] = map[string]any{"type": "local", "command": l.mcpCmd, "enabled": true}
	cfg["mcp"] = mcp
	l.env["OPENCODE_CONFIG_CONTENT"] = mustJSON(cfg)
	return nil
}

// recallHeaders are the headers every agent sends to the proxy.
func recallHeaders(a agent, token string) map[string]string {
	// The agent's name is its row of the compaction points (advisor.CompactionPoints):
	// the proxy's hard limit for its sessions.
	h := map[string]string{server.HeaderRecallTool: a.recallTool, server.HeaderAgent: a.name}
	if token != "" {
		h[server.HeaderToken] = token
	}
	return h
}
