package server_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/server"
)

// withTools is chatBody(s, r) with tools (a JSON array; "" for no tools list).
func withTools(s, r int, tools string) []byte {
	b := chatBody(s, r)
	if tools == "" {
		return b
	}
	return append(b[:len(b)-1:len(b)-1], []byte(`,"tools":`+tools+`}`)...)
}

// fnTool is a Chat Completions function tool named name.
func fnTool(name string) string {
	return fmt.Sprintf(`{"type":"function","function":{"name":%q,"parameters":{"type":"object"}}}`, name)
}

var stubRecall = regexp.MustCompile(`; ([A-Za-z0-9_.:/-]+)\("(o_[0-9]{12})"\) restores it\]$`)

// A stub names the recall tool the request offers the model: the header's (wrap),
// else the one in the request's tools list by its name there; a request whose tools
// list holds none gets stubs that name no tool and say how the original can be had
// otherwise, and serve logs that once per session; a request without a tools list
// names the configured tool, as before.
func TestStubsNameTheOfferedRecallTool(t *testing.T) {
	tests := []struct {
		name   string
		tools  string
		header string
		want   string // the tool the stubs name; "" for none
	}{
		{"header wins", "[" + fnTool("run_command") + "]", "mcp__pruneadvisor__recall", "mcp__pruneadvisor__recall"},
		{"the tools list's recall tool", "[" + fnTool("run_command") + "," + fnTool("mcp__pa__recall") + "]", "", "mcp__pa__recall"},
		{"the configured name in the list", "[" + fnTool("recall") + "]", "", "recall"},
		{"no tools list: the configured name", "", "", "recall"},
		{"no recall tool", "[" + fnTool("run_command") + "]", "", ""},
		{"an empty tools list", "[]", "", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newRecorder(t, okJSON)
			env := newProxy(t, server.Options{OpenAIUpstream: up.URL})
			hdr := map[string]string{}
			if tt.header != "" {
				hdr[server.HeaderRecallTool] = tt.header
			}
			const requests = 8
			for r := 1; r <= requests; r++ {
				if resp, b := post(t, env.http.URL+"/v1/chat/completions", withTools(i, r, tt.tools), hdr); resp.StatusCode != 200 {
					t.Fatalf("request %d: %d %s", r, resp.StatusCode, b)
				}
			}
			var stubs []string
			gjson.GetBytes(up.body(requests-1), "messages").ForEach(func(_, m gjson.Result) bool {
				if c := m.Get("content").Str; m.Get("role").Str == "tool" && strings.HasPrefix(c, "[pruned:") {
					stubs = append(stubs, c)
				}
				return true
			})
			if len(stubs) == 0 {
				t.Fatal("nothing was pruned")
			}
			for _, stub := range stubs {
				m := stubRecall.FindStringSubmatch(stub)
				switch {
				case tt.want != "" && (m == nil || m[1] != tt.want):
					t.Errorf("stub %q; want it to name %s", stub, tt.want)
				case tt.want == "" && (strings.Contains(stub, `("o_`) || !strings.Contains(stub, "no recall tool: run the call again, or \"pruneadvisor recall o_")):
					t.Errorf("stub %q; want no tool named, and the command and the route", stub)
				}
				if tt.want == "" && !strings.Contains(stub, "GET /v1/recall/o_") {
					t.Errorf("stub %q does not give the recall route", stub)
				}
			}
			warned := strings.Count(env.log.String(), "the agent has no recall tool")
			if want := map[bool]int{true: 1, false: 0}[tt.want == ""]; warned != want {
				t.Errorf("%d log lines say the agent has no recall tool; want %d:\n%s", warned, want, env.log.String())
			}
			for _, line := range strings.Split(env.log.String(), "\n") {
				if strings.Contains(line, "no recall tool") {
					t.Log(line)
				}
			}
			if tt.want == "" && !strings.Contains(env.log.String(), "pruneadvisor wrap") {
				t.Errorf("the log line gives no fix:\n%s", env.log.String())
			}
		})
	}
}

// The recall tool is found in every API's tools list by the name the model sees.
func TestOfferedRecallToolShapes(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"anthropic", `{"messages":[],"tools":[{"name":"Bash","input_schema":{}},{"name":"mcp__pruneadvisor__recall","input_schema":{}}]}`, "mcp__pruneadvisor__recall"},
		{"responses function", `{"input":[],"tools":[{"type":"function","name":"pruneadvisor_recall","parameters":{}}]}`, "pruneadvisor_recall"},
		{"responses namespace (Codex)", `{"input":[],"tools":[{"type":"namespace","name":"mcp__pruneadvisor","tools":[{"type":"function","name":"recall"}]}]}`, "mcp__pruneadvisor__recall"},
		{"gemini", `{"contents":[],"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"mcp_pruneadvisor_recall"}]}]}`, "mcp_pruneadvisor_recall"},
		{"gemini snake case", `{"contents":[],"tools":[{"function_declarations":[{"name":"recall"}]}]}`, "recall"},
		{"chat custom tool", `{"messages":[],"tools":[{"type":"custom","custom":{"name":"my_recall"}}]}`, "my_recall"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, listed := server.OfferedRecallTool([]byte(tt.body), "recall")
			if got != tt.want || !listed {
				t.Errorf("offered %q (listed %v); want %q", got, listed, tt.want)
			}
		})
	}
	if got, listed := server.OfferedRecallTool([]byte(`{"messages":[]}`), "recall"); got != "" || listed {
		t.Errorf("no tools list: %q, listed %v; want none", got, listed)
	}
}
