package main

// A bad line sent to `pruneadvisor mcp` (docs/RELIABILITY.md "Hostile requests"):
// the agent must keep its recall tool.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
)

// adviseRecallID advises testdata/sessions/fix-port.jsonl into db and returns the
// recall id of output key (toolu_05cEnv is `go env`, pruned on its score).
func adviseRecallID(t *testing.T, env []string, db, key string) string {
	t.Helper()
	session, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "sessions", "fix-port.jsonl"))
	p := startPA(t, "", env, "advise", session, "--db", db, "--scorer", "lexical", "--json")
	if code := p.wait(lightBound); code != 0 {
		t.Fatalf("advise: %d %s", code, cutOut(p.output(), 1000))
	}
	var adv struct {
		Plan struct {
			Items []struct {
				Key      string `json:"key"`
				Decision string `json:"decision"`
				RecallID string `json:"recall_id"`
			} `json:"items"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(p.stdout.String()), &adv); err != nil {
		t.Fatalf("advise --json: %v", err)
	}
	for _, it := range adv.Plan.Items {
		if it.Decision == "pruned" && it.Key == key {
			return it.RecallID
		}
	}
	t.Fatalf("%s not pruned: %+v", key, adv.Plan.Items)
	return ""
}

// TestMCPBadLine sends `pruneadvisor mcp` a recall, a line that is not JSON (the
// string escape \q an outside probe sent), and the recall again: the bad line gets a
// JSON-RPC parse error (-32700, id null), both recalls return the original, and the
// server exits 0 when stdin closes.
func TestMCPBadLine(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	env := testEnv(t)
	id := adviseRecallID(t, env, db, "toolu_05cEnv")

	cmd := exec.Command(paBin(t), "mcp", "--db", db)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testkit.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: mcp closed its output; stderr:\n%s", what, stderr.String())
			}
			return l
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no answer within 20 s; stderr:\n%s", what, stderr.String())
		}
		return ""
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatalf("write %q: %v; stderr:\n%s", s, err, stderr.String())
		}
	}
	recallCall := func(n int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"recall","arguments":{"id":%q}}}`, n, id)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}`)
	next("initialize")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, step := range []struct{ send, want string }{
		{recallCall(2), `"id":2,"result":{"content":[{"type":"text","text":"AR='ar'`},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"recall","arguments":{"id":"o_\q"}}}`,
			`{"error":{"code":-32700,"message":"Parse error: line 4: not JSON: invalid character 'q' in string escape code at byte 95"},"id":null,"jsonrpc":"2.0"}`},
		{recallCall(4), `"id":4,"result":{"content":[{"type":"text","text":"AR='ar'`},
	} {
		send(step.send)
		if got := next(step.send[:30]); !strings.Contains(got, step.want) {
			t.Errorf("sent %.60s…\ngot  %.300s\nwant %s", step.send, got, step.want)
		}
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("mcp exit: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("mcp did not exit after stdin closed")
	}
	if want := `level=WARN msg="mcp: bad line answered with an error; still serving" line=4 code=-32700`; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %s:\n%s", want, stderr.String())
	}
}
