package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// serve refuses to listen beyond loopback without a token, before opening anything.
func TestServeRefusesExposedAddr(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "--addr", "0.0.0.0:8377"}, exitUsage, "refusing to listen beyond loopback without a token"},
		{[]string{"serve", "--addr", ":8377"}, exitUsage, "is not a loopback address"},
		{[]string{"serve", "--max-body", "0"}, exitUsage, "--max-body 0"},
		{[]string{"serve", "--openai-upstream", "ftp://x"}, exitUsage, "want an absolute http or https URL"},
		// issue 31: an agent with no compaction point, or one that compacts under the
		// margin for the window, is refused naming the flag.
		{[]string{"serve", "--agent", "aider"}, exitUsage, `--agent: unknown agent "aider"; known agents: claude, codex, gemini, opencode, pi`},
		{[]string{"serve", "--agent", "claude", "--window", "40000"}, exitUsage, "--agent claude: invalid config: agent: claude compacts at 7000 tokens"},
		{[]string{"mcp", "--tool-name", "bad name"}, exitUsage, "--tool-name: invalid MCP tool name"}, // a bad flag value
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		args := append(tt.args, "--db", filepath.Join(t.TempDir(), "pa.db"))
		if tt.args[0] == "serve" {
			args = append(args, "--scorer", "none")
		}
		code := run(args, strings.NewReader(""), &stdout, &stderr)
		if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
}
