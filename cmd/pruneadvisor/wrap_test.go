package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func runWrapCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"wrap"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestWrapBadArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"unknown agent", []string{"nope"}, exitUsage, `unknown agent "nope"; known agents: claude, codex, gemini, pi, opencode`},
		{"agent args without --", []string{"claude", "-p"}, exitUsage, "unknown shorthand flag: 'p'"},
		{"two words before --", []string{"claude", "extra", "--", "-p"}, exitUsage, `one AGENT before --, got 2 arguments`},
		{"no agent", nil, exitUsage, "requires at least 1 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runWrapCmd(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.err) {
				t.Errorf("exit %d, stderr %q; want %d with %q", code, stderr, tt.code, tt.err)
			}
		})
	}
}

// An agent that is not on PATH: exit 1, the message names the npm package.
func TestWrapNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, a := range agents {
		code, _, stderr := runWrapCmd(t, "--scorer", "none", "--db", filepath.Join(t.TempDir(), "pa.db"), a.name, "--", "x")
		want := `"` + a.bin + `" is not installed (not on PATH); install it with: npm install -g ` + a.pkg
		if code != exitError || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 with %q", a.name, code, stderr, want)
		}
	}
}

// wrap starts a proxy, runs the agent with its environment and arguments, passes
// its exit code through, and stops the proxy.
func TestWrapRunsAgent(t *testing.T) {
	bin := t.TempDir()
	rec := filepath.Join(t.TempDir(), "rec.txt")
	script := "#!/bin/sh\n{ echo \"base=$ANTHROPIC_BASE_URL\"; echo \"headers=$ANTHROPIC_CUSTOM_HEADERS\"; for a in \"$@\"; do echo \"arg=$a\"; done; } > " + rec + "\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Team: blue")
	db := filepath.Join(t.TempDir(), "pa.db")
	code, _, stderr := runWrapCmd(t, "--scorer", "none", "--db", db, "--proxy", "", "claude", "--", "-p", "fix it")
	if code != 3 {
		t.Fatalf("exit %d; want the agent's 3 (stderr %q)", code, stderr)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	m := regexp.MustCompile(`base=http://(127\.0\.0\.1:\d+)\n`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no proxy URL in the agent's environment:\n%s", got)
	}
	if !strings.Contains(got, "headers=X-Team: blue\nX-Pruneadvisor-Agent: claude\nX-Pruneadvisor-Recall-Tool: mcp__pruneadvisor__recall\n") {
		t.Errorf("headers: the user's first, then the agent's name and the recall tool's:\n%s", got)
	}
	args := regexp.MustCompile(`arg=(.*)`).FindAllStringSubmatch(got, -1)
	if len(args) != 4 || args[0][1] != "--mcp-config" || args[2][1] != "-p" || args[3][1] != "fix it" {
		t.Fatalf("args %q", args)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command    string   `json:"command"`
			Args       []string `json:"args"`
			AlwaysLoad bool     `json:"alwaysLoad"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(args[1][1]), &cfg); err != nil {
		t.Fatal(err)
	}
	srv := cfg.MCPServers["pruneadvisor"]
	if !srv.AlwaysLoad || strings.Join(srv.Args, " ") != "mcp --db "+db || srv.Command == "" {
		t.Errorf("mcp config %+v", srv)
	}
	// The proxy wrap started is gone.
	if c, err := net.Dial("tcp", m[1]); err == nil {
		c.Close()
		t.Errorf("the proxy at %s still answers after wrap returned", m[1])
	}
}

// --dry-run prints, for each agent, what points it at the proxy.
func TestWrapDryRun(t *testing.T) {
	t.Setenv("GEMINI_CLI_SYSTEM_DEFAULTS_PATH", "")
	t.Setenv("OPENCODE_CONFIG_CONTENT", `{"theme":"dark"}`)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	want := map[string][]string{
		"claude": {"ANTHROPIC_BASE_URL=http://127.0.0.1:9 ", "ANTHROPIC_CUSTOM_HEADERS='X-Pruneadvisor-Agent: claude\nX-Pruneadvisor-Recall-Tool: mcp__pruneadvisor__recall'", `"alwaysLoad":true`},
		"codex": {`-c 'model_provider="pruneadvisor"'`, `base_url="http://127.0.0.1:9/v1",env_key="OPENAI_API_KEY",wire_api="responses",http_headers={"X-Pruneadvisor-Agent"="codex","X-Pruneadvisor-Recall-Tool"="mcp__pruneadvisor__recall"}`,
			`-c 'mcp_servers.pruneadvisor={command=`},
		"gemini":   {"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9 ", "GEMINI_CLI_CUSTOM_HEADERS='X-Pruneadvisor-Agent: gemini,X-Pruneadvisor-Recall-Tool: mcp_pruneadvisor_recall'", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH=", "# writes "},
		"pi":       {"PRUNEADVISOR_URL=http://127.0.0.1:9 ", "pruneadvisor-pi.ts -p hi"},
		"opencode": {`"theme":"dark"`, `"anthropic":{"options":{"baseURL":"http://127.0.0.1:9/v1","headers":{"X-Pruneadvisor-Agent":"opencode","X-Pruneadvisor-Recall-Tool":"pruneadvisor_recall"}}}`, `"mcp":{"pruneadvisor":{"command":[`},
	}
	for name, parts := range want {
		code, stdout, stderr := runWrapCmd(t, "--dry-run", "--proxy", "http://127.0.0.1:9", name, "--", "-p", "hi")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		for _, p := range parts {
			if !strings.Contains(stdout, p) {
				t.Errorf("%s: output lacks %q:\n%s", name, p, stdout)
			}
		}
		if !strings.HasSuffix(strings.TrimSpace(stdout), "-p hi") {
			t.Errorf("%s: the agent's arguments do not come last:\n%s", name, stdout)
		}
	}
}

// A bad --config is a usage error (exit 2, naming the file and the field) on a dry
// run and with a proxy already running too, where the config is not used: it is
// checked before anything else, as the proxy wrap starts would check it.
func TestWrapChecksConfig(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(bad, []byte(`{"cutof": 0.1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--dry-run", "--config", bad, "claude"},
		{"--dry-run", "--proxy", "http://127.0.0.1:9", "--config", bad, "codex"},
	} {
		code, stdout, stderr := runWrapCmd(t, args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, bad) || !strings.Contains(stderr, `unknown field "cutof"`) {
			t.Errorf("wrap %v: exit %d, stdout %q, stderr %q; want %d naming %s and the field", args, code, stdout, stderr, exitUsage, bad)
		}
	}
}

// fakeAgentName is the name under which the test binary runs as a fake agent
// (TestMain): fakeAgentMain.
const fakeAgentName = "pruneadvisor-fake-agent"

// fakeAgentMain is a fake Claude Code: it sends one Anthropic Messages request to
// $ANTHROPIC_BASE_URL with the headers of $ANTHROPIC_CUSTOM_HEADERS and the session
// header X-Pruneadvisor-Session: wrapped, and exits 0 when the answer is 200, else 9.
func fakeAgentMain() {
	base := os.Getenv("ANTHROPIC_BASE_URL")
	body := `{"model":"claude-test","max_tokens":10,"messages":[{"role":"user","content":"fix the test"}]}`
	req, err := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake agent:", err)
		os.Exit(9)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-test")
	req.Header.Set("X-Pruneadvisor-Session", "wrapped")
	for _, line := range strings.Split(os.Getenv("ANTHROPIC_CUSTOM_HEADERS"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake agent:", err)
		os.Exit(9)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "fake agent:", resp.Status)
		os.Exit(9)
	}
}

// The proxy wrap starts records the ledger like serve's: `ledger` on wrap's --db
// shows the wrapped agent's request with the usage the upstream reported.
func TestWrapRecordsLedger(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",`+
			`"content":[{"type":"text","text":"done"}],"stop_reason":"end_turn",`+
			`"usage":{"input_tokens":1234,"output_tokens":56,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}`)
	}))
	defer upstream.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(self, filepath.Join(bin, fakeAgentName)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\nexec "+fakeAgentName+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	t.Setenv("ANTHROPIC_BASE_URL", upstream.URL) // the upstream of the proxy wrap starts
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "")
	db := filepath.Join(t.TempDir(), "pa.db")
	code, _, stderr := runWrapCmd(t, "--scorer", "none", "--db", db, "claude", "--", "-p", "fix the test")
	if code != 0 {
		t.Fatalf("exit %d; want the agent's 0 (stderr %q)", code, stderr)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"ledger", "--db", db, "--json"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("ledger: exit %d: %s", code, errb.String())
	}
	var rep struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
			Requests  int    `json:"requests"`
			WithUsage int    `json:"with_usage"`
			Usage     struct {
				Input  int `json:"input_tokens"`
				Output int `json:"output_tokens"`
			} `json:"usage"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("ledger --json: %v\n%s", err, out.String())
	}
	if len(rep.Sessions) != 1 {
		t.Fatalf("ledger sessions %+v; want the wrapped agent's one", rep.Sessions)
	}
	s := rep.Sessions[0]
	if s.SessionID != "wrapped" || s.Requests != 1 || s.WithUsage != 1 || s.Usage.Input != 1234 || s.Usage.Output != 56 {
		t.Errorf("ledger session %+v; want wrapped, 1 request with usage 1234 in, 56 out", s)
	}
}
