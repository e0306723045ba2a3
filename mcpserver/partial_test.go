package mcpserver_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
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

// logOriginal is a 300-line log (line k: "k ok", every 50th "k Timeout after 30s"),
// so the expected answers below can be written out by hand.
func logOriginal() string {
	var b strings.Builder
	for k := 1; k <= 300; k++ {
		if k%50 == 0 {
			b.WriteString(strconv.Itoa(k) + " Timeout after 30s\n")
		} else {
			b.WriteString(strconv.Itoa(k) + " ok\n")
		}
	}
	return b.String()
}

// TestPartialRecallInMemory: the go-sdk client, over the SDK's in-memory transport,
// calls the recall tool on a real SQLite store with lines, grep and context, a bad
// range and a bad pattern: the parts come back numbered, the bad ones are tool
// errors (isError) naming the argument, and the session serves on; the partial
// recalls are recorded as recall events, the refused ones not.
func TestPartialRecallInMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	db, err := storage.Open(ctx, filepath.Join(t.TempDir(), "pa.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	text := logOriginal()
	id := advisor.RecallID("sess-p", "toolu_log")
	if err := db.SaveOriginal(ctx, advisor.Original{RecallID: id, SessionID: "sess-p", OutputKey: "toolu_log", Tool: "Bash",
		Summary: "make test", Text: text, Hash: transcript.TextHash(text), Tokens: tokencount.Count(text), Step: 1}); err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(recall.New(db), mcpserver.Options{ToolName: "mcp__pruneadvisor__recall"})
	if err != nil {
		t.Fatal(err)
	}
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(tools.Tools[0].InputSchema)
	for _, want := range []string{`"lines":{`, `"grep":{`, `"context":{`, `"required":["id"]`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("listed schema lacks %s: %s", want, raw)
		}
	}

	tests := []struct {
		name    string
		args    map[string]any
		isError bool
		want    string // the whole text, or for errors its start
	}{
		{"lines", map[string]any{"id": id, "lines": "99-101"}, false, "99:99 ok\n100:100 Timeout after 30s\n101:101 ok\n[lines 99-101 of 300]\n"},
		{"grep", map[string]any{"id": id, "grep": "Timeout"}, false,
			"50:50 Timeout after 30s\n100:100 Timeout after 30s\n150:150 Timeout after 30s\n200:200 Timeout after 30s\n250:250 Timeout after 30s\n300:300 Timeout after 30s\n[6 lines match \"Timeout\" in all 300 lines]\n"},
		{"grep in lines with context", map[string]any{"id": id, "lines": "140-", "grep": "^150 ", "context": 1}, false,
			"149-149 ok\n150:150 Timeout after 30s\n151-151 ok\n[1 line matches \"^150 \" in lines 140-300 of 300]\n"},
		{"grep no match", map[string]any{"id": id, "grep": "panic"}, false, "[no line matches \"panic\" in all 300 lines]\n"},
		{"bad range", map[string]any{"id": id, "lines": "250-200"}, true,
			`recall "` + id + `": bad line range: lines "250-200": the end 200 is before the start 250; want "N", "N-M" or "N-"`},
		{"range past the end", map[string]any{"id": id, "lines": "301"}, true,
			`recall "` + id + `": bad line range: lines "301": the original has 300 lines`},
		{"bad pattern", map[string]any{"id": id, "grep": "Timeout("}, true,
			`recall "` + id + `": bad pattern: grep "Timeout(": missing closing ): "Timeout("; want a Go (RE2) regular expression`},
		{"bad context", map[string]any{"id": id, "grep": "x", "context": 500}, true,
			`recall "` + id + `": bad context: context 500: want 0 to 20 lines`},
		{"lines not a string", map[string]any{"id": id, "lines": 200}, true, `arguments: want {"id": "o_..."}, optionally with "lines"`},
		{"whole, after them all", map[string]any{"id": id}, false, text},
	}
	for _, tt := range tests {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__pruneadvisor__recall", Arguments: tt.args})
		if err != nil {
			t.Fatalf("%s: protocol error %v; want a result", tt.name, err)
		}
		if res.IsError != tt.isError || len(res.Content) != 1 {
			t.Errorf("%s: isError %v, %d contents; want %v and 1", tt.name, res.IsError, len(res.Content), tt.isError)
			continue
		}
		got := res.Content[0].(*mcp.TextContent).Text
		if tt.isError {
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("%s: error %q; want it to start %q", tt.name, got, tt.want)
			}
		} else if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}
	evs, err := db.SessionRecalls(ctx, "sess-p")
	if err != nil || len(evs) != 5 {
		t.Errorf("recall events: %d, %v; want 5 (4 partial, 1 whole; none for the refused)", len(evs), err)
	}
}
