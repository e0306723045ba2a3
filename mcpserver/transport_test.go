package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/mcpserver"
	"github.com/pruneadvisor/pruneadvisor/recall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// rpcReply is one line the server writes.
type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// A bad line between two valid calls gets a JSON-RPC error with id null, and the
// server answers the next call: malformed JSON (the string escape \q, as a probe
// sent it), text, a bare number, a batch, an object that is no message, and a line
// over MaxLineBytes; blank and CRLF lines are fine.
func TestBadLinesKeepServing(t *testing.T) {
	store := advisor.NewMemoryStore()
	id := advisor.RecallID("s", "k")
	if err := store.SaveOriginal(context.Background(), advisor.Original{RecallID: id, SessionID: "s", OutputKey: "k",
		Text: original, Hash: transcript.TextHash(original), Tokens: 10, Step: 1}); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &log}, nil))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Run(ctx, recall.New(store), mcpserver.Options{Logger: logger}, mcpserver.Transport(inR, outW, logger))
		outW.Close()
	}()
	replies := bufio.NewScanner(outR)
	replies.Buffer(nil, 1<<20)
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	next := func() rpcReply {
		t.Helper()
		if !replies.Scan() {
			t.Fatalf("no reply: %v", replies.Err())
		}
		var r rpcReply
		if err := json.Unmarshal(replies.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", replies.Text(), err)
		}
		return r
	}
	call := func(n int) {
		t.Helper()
		send(`{"jsonrpc":"2.0","id":` + string(rune('0'+n)) + `,"method":"tools/call","params":{"name":"recall","arguments":{"id":"` + id + `"}}}`)
		r := next()
		if string(r.ID) != string(rune('0'+n)) || r.Result == nil || r.Result.IsError || r.Result.Content[0].Text != original {
			t.Fatalf("call %d: %+v", n, r)
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if r := next(); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("initialize: %+v", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call(2)
	bad := []struct {
		line string
		code int
		text string
	}{
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"recall","arguments":{"id":"o_\q"}}}`, -32700,
			`Parse error: line 4: not JSON: invalid character 'q' in string escape code at byte`},
		{`recall o_0123456789 please`, -32700, "Parse error: line 6: not JSON: invalid character 'r' looking for beginning of value"},
		{`42`, -32600, "Invalid Request: line 8: not a JSON-RPC 2.0 message"},
		{`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`, -32600, "Invalid Request: line 10: JSON-RPC batches are not supported"},
		{`{"hello":"world"}`, -32600, "Invalid Request: line 12: not a JSON-RPC 2.0 message"},
		{`{"jsonrpc":"2.0","id":10,"method":"ping","params":"` + strings.Repeat("x", mcpserver.MaxLineBytes) + `"}`, -32700,
			"Parse error: line 14: line longer than 16777216 bytes"},
	}
	for i, b := range bad {
		send(b.line)
		r := next()
		if r.Error == nil || r.Error.Code != b.code || string(r.ID) != "null" || !strings.Contains(r.Error.Message, b.text) {
			t.Errorf("bad line %d: %+v (id %s); want code %d with %q and id null", i+1, r.Error, r.ID, b.code, b.text)
		}
		call(4 + i%5)
	}
	send("")
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\r\n"); err != nil {
		t.Fatal(err)
	}
	if r := next(); string(r.ID) != "3" || r.Error != nil {
		t.Errorf("ping after a blank line, with CRLF: %+v", r)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	want := `level=WARN msg="mcp: bad line answered with an error; still serving" line=4 code=-32700 why="not JSON: invalid character 'q' in string escape code at byte 95"`
	if !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %s:\n%s", want, log.String())
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// slowStore answers Original after delay, so a call is still being handled when the
// client's input ends.
type slowStore struct {
	recall.Store
	delay time.Duration
}

func (s slowStore) Original(ctx context.Context, id string) (advisor.Original, error) {
	time.Sleep(s.delay)
	return s.Store.Original(ctx, id)
}

// A client that writes its calls and closes its input at once (a script piping
// requests into `pruneadvisor mcp`) gets every answer: the server answers the calls
// it read before it ends the session at the end of input.
func TestAnswersCallsReadBeforeEOF(t *testing.T) {
	store := advisor.NewMemoryStore()
	id := advisor.RecallID("s", "k")
	if err := store.SaveOriginal(context.Background(), advisor.Original{RecallID: id, SessionID: "s", OutputKey: "k",
		Text: original, Hash: transcript.TextHash(original), Tokens: 10, Step: 1}); err != nil {
		t.Fatal(err)
	}
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	for n := 2; n <= 4; n++ {
		in += `{"jsonrpc":"2.0","id":` + string(rune('0'+n)) + `,"method":"tools/call","params":{"name":"recall","arguments":{"id":"` + id + `"}}}` + "\n"
	}
	var out syncWriter
	var buf strings.Builder
	out.w = &buf
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	err := mcpserver.Run(ctx, recall.New(slowStore{store, 200 * time.Millisecond}), mcpserver.Options{Logger: logger},
		mcpserver.Transport(strings.NewReader(in), &out, logger))
	if err != nil {
		t.Fatal(err)
	}
	answered := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r rpcReply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("reply %q: %v", line, err)
		}
		if string(r.ID) != "1" && (r.Result == nil || r.Result.IsError || r.Result.Content[0].Text != original) {
			t.Errorf("reply %s: %+v; want the original", r.ID, r)
		}
		answered[string(r.ID)] = true
	}
	if diff := cmp.Diff(map[string]bool{"1": true, "2": true, "3": true, "4": true}, answered); diff != "" {
		t.Errorf("answered ids (-want +got):\n%s", diff)
	}
}
