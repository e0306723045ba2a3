package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// prompt is the task every agent is given.
const prompt = "The server ignores $PORT. Fix main.go."

// TestClaude runs Claude Code through wrap against the Anthropic Messages fake.
func TestClaude(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["claude"]
	var work string
	m := &model{proto: "anthropic", agent: "claude", readTool: "Read"}
	file := func(n string) string { return filepath.Join(work, n) }
	m.script = script{
		read: func() action { return action{tool: "Read", args: map[string]any{"file_path": file("main.go")}} },
		edit: func() action {
			return action{tool: "Edit", args: map[string]any{"file_path": file("main.go"), "old_string": "FROM_FLAG_ONLY", "new_string": "FROM_ENV"}}
		},
		reread: func() action { return action{tool: "Read", args: map[string]any{"file_path": file("main.go")}} },
		shell1: func() action {
			return action{tool: "Bash", args: map[string]any{"command": "seq 1 300", "description": "Count"}}
		},
		shell2: func() action {
			return action{tool: "Bash", args: map[string]any{"command": "seq 1 300", "description": "Count"}}
		},
		large: func() action { return action{tool: "Read", args: map[string]any{"file_path": file("large.txt")}} },
		recall: func(id string) action {
			return action{tool: "mcp__pruneadvisor__recall", args: map[string]any{"id": id}}
		},
	}
	r := runAgent(t, p, m, []string{"-p", prompt, "--model", "claude-sonnet-4-5", "--dangerously-skip-permissions", "--output-format", "text"},
		nil, func(home, w string) { work = w })
	checkRun(t, r, "mcp__pruneadvisor__recall")
}

// TestCodex runs Codex CLI through wrap against the Responses fake.
func TestCodex(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["codex"]
	m := &model{proto: "responses", agent: "codex", readTool: "exec_command"}
	sh := func(cmd string) func() action {
		return func() action { return action{tool: "exec_command", args: map[string]any{"cmd": cmd}} }
	}
	m.script = script{
		read:   sh("cat main.go"),
		edit:   sh("sed -i 's/FROM_FLAG_ONLY/FROM_ENV/' main.go"),
		reread: sh("cat main.go"),
		shell1: sh("seq 1 300"),
		shell2: sh("seq 1 300"),
		large:  sh("cat large.txt"),
		recall: func(id string) action {
			return action{tool: "recall", namespace: "mcp__pruneadvisor", args: map[string]any{"id": id}}
		},
	}
	r := runAgent(t, p, m, []string{"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5", prompt}, nil, nil)
	checkRun(t, r, "mcp__pruneadvisor__recall")
}

// TestGemini runs Gemini CLI through wrap against the Gemini API fake.
func TestGemini(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["gemini"]
	var work string
	m := &model{proto: "gemini", agent: "gemini", readTool: "read_file"}
	file := func(n string) string { return filepath.Join(work, n) }
	sh := func(cmd string) func() action {
		return func() action {
			return action{tool: "run_shell_command", args: map[string]any{"command": cmd, "description": "count"}}
		}
	}
	m.script = script{
		read: func() action { return action{tool: "read_file", args: map[string]any{"file_path": file("main.go")}} },
		edit: func() action {
			return action{tool: "replace", args: map[string]any{"file_path": file("main.go"), "old_string": "FROM_FLAG_ONLY", "new_string": "FROM_ENV", "instruction": "Read the port from the environment."}}
		},
		reread: func() action { return action{tool: "read_file", args: map[string]any{"file_path": file("main.go")}} },
		shell1: sh("seq 1 300"),
		shell2: sh("seq 1 300"),
		large:  func() action { return action{tool: "read_file", args: map[string]any{"file_path": file("large.txt")}} },
		recall: func(id string) action { return action{tool: "mcp_pruneadvisor_recall", args: map[string]any{"id": id}} },
	}
	r := runAgent(t, p, m, []string{"-p", prompt, "--yolo", "-m", "gemini-2.5-pro", "--output-format", "text"}, nil,
		func(home, w string) {
			work = w
			// The test's own HOME: API-key auth, no folder-trust prompt, no telemetry.
			writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{"security":{"auth":{"selectedType":"gemini-api-key"},"folderTrust":{"enabled":false}},`+
				`"telemetry":{"enabled":false},"privacy":{"usageStatisticsEnabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true}}`)
		})
	checkRun(t, r, "mcp_pruneadvisor_recall")
}

// TestPi runs pi through wrap (its extension points the openai provider at the
// proxy) against the Responses fake.
func TestPi(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["pi"]
	m := &model{proto: "responses", agent: "pi", readTool: "read"}
	sh := func(cmd string) func() action {
		return func() action { return action{tool: "bash", args: map[string]any{"command": cmd}} }
	}
	m.script = script{
		read: func() action { return action{tool: "read", args: map[string]any{"path": "main.go"}} },
		edit: func() action {
			return action{tool: "edit", args: map[string]any{"path": "main.go", "edits": []any{map[string]any{"oldText": "FROM_FLAG_ONLY", "newText": "FROM_ENV"}}}}
		},
		reread: func() action { return action{tool: "read", args: map[string]any{"path": "main.go"}} },
		shell1: sh("seq 1 300"),
		shell2: sh("seq 1 300"),
		large:  func() action { return action{tool: "read", args: map[string]any{"path": "large.txt"}} },
		recall: func(id string) action { return action{tool: "recall", args: map[string]any{"id": id}} },
	}
	r := runAgent(t, p, m, []string{"-p", "--no-session", "--provider", "openai", "--model", "gpt-4o", prompt}, nil, nil)
	checkRun(t, r, "recall")
}

// TestOpencode runs opencode through wrap (OPENCODE_CONFIG_CONTENT points the
// anthropic provider at the proxy) against the Anthropic Messages fake.
func TestOpencode(t *testing.T) {
	requireIsolated(t)
	p := pins(t)["opencode"]
	var work string
	m := &model{proto: "anthropic", agent: "opencode", readTool: "read"}
	file := func(n string) string { return filepath.Join(work, n) }
	sh := func(cmd string) func() action {
		return func() action {
			return action{tool: "bash", args: map[string]any{"command": cmd, "description": "Count"}}
		}
	}
	m.script = script{
		read: func() action { return action{tool: "read", args: map[string]any{"filePath": file("main.go")}} },
		edit: func() action {
			return action{tool: "edit", args: map[string]any{"filePath": file("main.go"), "oldString": "FROM_FLAG_ONLY", "newString": "FROM_ENV"}}
		},
		reread: func() action { return action{tool: "read", args: map[string]any{"filePath": file("main.go")}} },
		shell1: sh("seq 1 300"),
		shell2: sh("seq 1 300"),
		large:  func() action { return action{tool: "read", args: map[string]any{"filePath": file("large.txt")}} },
		recall: func(id string) action { return action{tool: "pruneadvisor_recall", args: map[string]any{"id": id}} },
	}
	r := runAgent(t, p, m, []string{"run", "--model", "anthropic/claude-sonnet-4-5", prompt}, nil, func(home, w string) { work = w })
	checkRun(t, r, "pruneadvisor_recall")
}
