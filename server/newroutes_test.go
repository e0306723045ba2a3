package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/server"
)

// fileText is a file of about 400 tokens, so that a read of it is a candidate.
func fileText(tag string) string {
	var b strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "func %s%02d(x int) int { return x*%d + %d }\n", tag, i, i, i*7)
	}
	return b.String()
}

func jstr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// responsesTurns builds the Responses API bodies of a Codex-like conversation: read
// main.go, patch it, read it again, then further steps; body n holds every item up
// to turn n.
func responsesTurns() [][]byte {
	head := `{"model":"gpt-5-codex","instructions":"You are Codex.","input":[` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"fix main.go"}]}`
	tail := `],"tools":[],"store":false,"stream":true,"prompt_cache_key":"conv-1"}`
	items := []string{
		`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cat main.go\",\"workdir\":\"/w\"}","call_id":"call_1"},` +
			`{"type":"function_call_output","call_id":"call_1","output":` + jstr("Chunk ID: aa11\nWall time: 0.0010 seconds\nProcess exited with code 0\nOutput:\n"+fileText("old")) + `}`,
		`{"type":"reasoning","summary":[],"encrypted_content":"gAAA=="},{"type":"custom_tool_call","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** Update File: main.go\n@@\n-a\n+b\n*** End Patch\n"},` +
			`{"type":"custom_tool_call_output","call_id":"call_2","output":"Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM main.go\n"}`,
		`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cat main.go\",\"workdir\":\"/w\"}","call_id":"call_3"},` +
			`{"type":"function_call_output","call_id":"call_3","output":` + jstr("Chunk ID: bb22\nWall time: 0.0011 seconds\nProcess exited with code 0\nOutput:\n"+fileText("new")) + `}`,
		`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"call_4"},{"type":"function_call_output","call_id":"call_4","output":"main.go\n"}`,
		`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"pwd\"}","call_id":"call_5"},{"type":"function_call_output","call_id":"call_5","output":"/w\n"}`,
		`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"date\"}","call_id":"call_6"},{"type":"function_call_output","call_id":"call_6","output":"today\n"}`,
	}
	var out [][]byte
	for n := 0; n <= len(items); n++ {
		body := head
		for _, it := range items[:n] {
			body += "," + it
		}
		out = append(out, []byte(body+tail))
	}
	return out
}

// geminiTurns builds Gemini CLI-like generateContent bodies: read_file, replace,
// read_file again, then further steps. Calls carry no id (as the API returns them);
// responses carry ids of the CLI's making.
func geminiTurns() [][]byte {
	head := `{"contents":[{"role":"user","parts":[{"text":"This is the Gemini CLI. We are setting up the context for our chat."}]},{"role":"user","parts":[{"text":"fix main.go"}]}`
	tail := `],"systemInstruction":{"role":"user","parts":[{"text":"You are an interactive CLI agent."}]},"generationConfig":{"temperature":0}}`
	call := func(name, args string) string {
		return `{"role":"model","parts":[{"functionCall":{"name":"` + name + `","args":` + args + `},"thoughtSignature":"c2ln"}]}`
	}
	resp := func(id, name, out string) string {
		return `{"role":"user","parts":[{"functionResponse":{"id":"` + id + `","name":"` + name + `","response":{"output":` + jstr(out) + `}}}]}`
	}
	items := []string{
		call("read_file", `{"file_path":"/w/main.go"}`) + "," + resp("read_file-1-a", "read_file", fileText("old")),
		call("replace", `{"file_path":"/w/main.go","old_string":"a","new_string":"b","instruction":"x"}`) + "," + resp("replace-2-b", "replace", "Successfully modified file: /w/main.go (1 replacements)."),
		call("read_file", `{"file_path":"/w/main.go"}`) + "," + resp("read_file-3-c", "read_file", fileText("new")),
		call("run_shell_command", `{"command":"ls"}`) + "," + resp("run_shell_command-4-d", "run_shell_command", "main.go"),
		call("run_shell_command", `{"command":"pwd"}`) + "," + resp("run_shell_command-5-e", "run_shell_command", "/w"),
		call("run_shell_command", `{"command":"date"}`) + "," + resp("run_shell_command-6-f", "run_shell_command", "today"),
	}
	var out [][]byte
	for n := 0; n <= len(items); n++ {
		body := head
		for _, it := range items[:n] {
			body += "," + it
		}
		out = append(out, []byte(body+tail))
	}
	return out
}

// The Responses and Gemini routes prune a superseded read like the other routes:
// the stub names the recall tool the request's X-Pruneadvisor-Recall-Tool header
// names, stays byte-identical on later requests, and every other byte is what the
// client sent.
func TestNewRoutesPrune(t *testing.T) {
	sse := func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {}\n\n"))
	}
	up := newRecorder(t, sse)
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL, GeminiUpstream: up.URL})
	tests := []struct {
		name, path, tool, stubPath string
		keyHeader, key             string
		bodies                     [][]byte
	}{
		{"responses", "/v1/responses", "mcp__pruneadvisor__recall", "input.3.output", "Authorization", "Bearer sk-secret-1", responsesTurns()},
		{"gemini", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "mcp_pruneadvisor_recall", "contents.3.parts.0.functionResponse.response.output", "x-goog-api-key", "AIza-secret-1", geminiTurns()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := up.count()
			var stub string
			for i, body := range tt.bodies {
				resp, got := post(t, env.http.URL+tt.path, body, map[string]string{server.HeaderRecallTool: tt.tool, tt.keyHeader: tt.key})
				if resp.StatusCode != 200 || string(got) != "data: {}\n\n" {
					t.Fatalf("request %d: %d %q", i, resp.StatusCode, got)
				}
				sent := up.body(first + i)
				if up.paths[first+i] != tt.path {
					t.Errorf("upstream path %s; want %s", up.paths[first+i], tt.path)
				}
				if up.headers[first+i].Get(server.HeaderRecallTool) != "" || up.headers[first+i].Get(tt.keyHeader) != tt.key {
					t.Errorf("headers upstream: %v", up.headers[first+i])
				}
				if bytes.Equal(sent, body) {
					if stub != "" {
						t.Fatalf("request %d: stub gone", i)
					}
					continue
				}
				raws := checkOnlyChanged(t, body, sent, []string{tt.stubPath})
				if stub == "" {
					stub = raws[0]
					if !strings.Contains(stub, "superseded by call") || !strings.Contains(stub, tt.tool+`(\"o_`) {
						t.Errorf("stub %s", stub)
					}
				} else if raws[0] != stub {
					t.Errorf("request %d: stub changed:\n%s\n%s", i, stub, raws[0])
				}
			}
			if stub == "" {
				t.Fatal("no stub reached the upstream")
			}
		})
	}
	if strings.Contains(env.log.String(), "secret-1") {
		t.Errorf("a key reached the log:\n%s", env.log.String())
	}
}

// Requests the Responses and Gemini routes do not advise go on untouched and
// counted: previous_response_id, a body the reader cannot read; other /v1beta/
// paths pass through; a Gemini key in ?key= never reaches the log or an error body.
func TestNewRoutesUntouched(t *testing.T) {
	up := newRecorder(t, okJSON)
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL, GeminiUpstream: up.URL})
	cont := []byte(`{"model":"m","previous_response_id":"resp_9","input":[{"type":"function_call_output","call_id":"c1","output":"` + strings.Repeat("x ", 400) + `"}]}`)
	unreadable := []byte(`{"model":"m","input":[{"type":"function_call_output","output":"no call id"}]}`)
	geminiBad := []byte(`{"contents":{"role":"user"}}`)
	cases := []struct {
		method, path string
		body         []byte
	}{
		{http.MethodPost, "/v1/responses", cont},
		{http.MethodPost, "/v1/responses", unreadable},
		{http.MethodPost, "/v1beta/models/gemini-2.5-pro:generateContent?key=AIza-secret-2", geminiBad},
		{http.MethodPost, "/v1beta/models/gemini-2.5-pro:countTokens?key=AIza-secret-2", []byte(`{"contents":[]}`)},
		{http.MethodGet, "/v1beta/models?key=AIza-secret-2", nil},
	}
	for i, c := range cases {
		req, _ := http.NewRequest(c.method, env.http.URL+c.path, bytes.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != `{"ok":true}` {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
		if got := up.body(i); !bytes.Equal(got, c.body) && !(len(got) == 0 && c.body == nil) {
			t.Errorf("%s: upstream got %q", c.path, got)
		}
		if up.paths[i] != c.path {
			t.Errorf("upstream path %s; want %s", up.paths[i], c.path)
		}
	}
	metrics := scrape(t, env.http.URL)
	for _, want := range []string{
		`pruneadvisor_requests_untouched_total{reason="previous_response_id",route="responses"} 1`,
		`pruneadvisor_advise_failures_total{route="responses",stage="read"} 1`,
		`pruneadvisor_advise_failures_total{route="gemini",stage="read"} 1`,
		`pruneadvisor_requests_total{code="200",route="gemini"} 1`,
		`pruneadvisor_requests_total{code="200",route="passthrough"} 2`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}

	// An unreachable Gemini upstream: 502 in Google's error shape, without the key.
	dead := newProxy(t, server.Options{GeminiUpstream: "http://127.0.0.1:1"})
	resp, b := post(t, dead.http.URL+"/v1beta/models/g:generateContent?key=AIza-secret-3", []byte(`{"contents":[]}`), nil)
	if resp.StatusCode != http.StatusBadGateway || gjson.GetBytes(b, "error.status").String() != "UNAVAILABLE" || strings.Contains(string(b), "AIza") {
		t.Errorf("unreachable: %d %s", resp.StatusCode, b)
	}
	for _, e := range []*proxyEnv{env, dead} {
		if strings.Contains(e.log.String(), "AIza") {
			t.Errorf("a key reached the log:\n%s", e.log.String())
		}
		for _, suffix := range []string{"", "-wal"} {
			if data, err := os.ReadFile(e.dbPth + suffix); err == nil && bytes.Contains(data, []byte("AIza")) {
				t.Errorf("a key reached %s", filepath.Base(e.dbPth+suffix))
			}
		}
	}
	// A recall tool header that is no tool name is the client's error.
	resp, b = post(t, env.http.URL+"/v1/responses", responsesTurns()[1], map[string]string{server.HeaderRecallTool: "recall(\"x\")"})
	if resp.StatusCode != 400 || !strings.Contains(string(b), server.HeaderRecallTool) {
		t.Errorf("bad recall tool header: %d %s", resp.StatusCode, b)
	}
}
