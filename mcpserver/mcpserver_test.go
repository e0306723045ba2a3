package mcpserver_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/mcpserver"
	"github.com/pruneadvisor/pruneadvisor/recall"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// original is the text stored under the recall id: multi-line, non-ASCII, with
// characters JSON escapes, so "byte for byte" means something.
const original = "func main() {\n\tfmt.Println(\"héllo <wörld> & \\u0041\")\n}\n\x1b[0m trailing spaces   \n"

// The built binary, driven by the go-sdk client over stdio: the tool is listed with
// the schema generated from recall.Args, a call returns the original byte for byte,
// and a malformed or unknown id is a tool error, not a crash (the session still works).
func TestMCPBinaryOverStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pruneadvisor")
	build := exec.Command("go", "build", "-o", bin, "../cmd/pruneadvisor")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dbPath := filepath.Join(dir, "pa.db")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := storage.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	id := advisor.RecallID("sess-1", "toolu_01")
	if err := db.SaveOriginal(ctx, advisor.Original{
		RecallID: id, SessionID: "sess-1", OutputKey: "toolu_01", Tool: "Read", Summary: "main.go",
		Text: original, Hash: transcript.TextHash(original), Tokens: tokencount.Count(original), Step: 1,
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	cmd := exec.Command(bin, "mcp", "--db", dbPath, "--tool-name", "recall")
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "recall" || tools.Tools[0].Description != recall.ToolDescription {
		t.Fatalf("tools: %+v", tools.Tools)
	}
	var gotSchema, wantSchema any
	raw, _ := json.Marshal(tools.Tools[0].InputSchema)
	_ = json.Unmarshal(raw, &gotSchema)
	_ = json.Unmarshal(recall.ToolSchema(), &wantSchema)
	if d := cmp.Diff(wantSchema, gotSchema); d != "" {
		t.Errorf("input schema (-recall.ToolSchema +listed):\n%s", d)
	}
	if !strings.Contains(string(raw), `"pattern":"`+advisor.RecallIDPattern+`"`) {
		t.Errorf("schema lacks the id pattern: %s", raw)
	}

	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "recall", Arguments: map[string]any{"id": id}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("recall: %+v", res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != original {
		t.Errorf("recalled %q; want %q", got, original)
	}

	for _, tt := range []struct{ id, want string }{
		{"o_0000000000", "no pruned output with this id"},
		{"../etc/passwd", "invalid recall id"},
	} {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "recall", Arguments: map[string]any{"id": tt.id}})
		if err != nil {
			t.Fatalf("id %q: protocol error %v; want a tool error", tt.id, err)
		}
		if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, tt.want) {
			t.Errorf("id %q: %+v; want a tool error with %q", tt.id, res.Content[0], tt.want)
		}
	}
	// Still alive after the errors.
	if res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "recall", Arguments: map[string]any{"id": id}}); err != nil || res.IsError {
		t.Errorf("recall after errors: %v %+v", err, res)
	}

	// The recall was recorded as evidence in the same database.
	db, err = storage.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	evs, err := db.SessionRecalls(ctx, "sess-1")
	if err != nil || len(evs) != 2 || evs[0].OutputKey != "toolu_01" {
		t.Errorf("recall events %+v, %v; want 2 for toolu_01", evs, err)
	}
}

func TestToolNames(t *testing.T) {
	svc := recall.New(advisor.NewMemoryStore())
	for name, ok := range map[string]bool{"recall": true, "mcp__pruneadvisor__recall": true, "pa.recall-2": true, "": true, "re call": false, strings.Repeat("x", 129): false} {
		_, err := mcpserver.New(svc, mcpserver.Options{ToolName: name})
		if (err == nil) != ok {
			t.Errorf("New(tool name %q) = %v; want ok %v", name, err, ok)
		}
	}
}
