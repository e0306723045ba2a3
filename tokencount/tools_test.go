package tokencount

import "testing"

// Tools counts each API's tool definitions as the JSON sent, and nothing else
// of the body.
func TestTools(t *testing.T) {
	anthropic := `[{"name":"Read","description":"Reads a file from the local filesystem.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}}}]`
	responses := `[{"type":"function","name":"exec_command","description":"Runs a command.","parameters":{"type":"object"}},{"type":"namespace","name":"mcp__pruneadvisor","tools":[{"name":"recall"}]}]`
	gemini := `[{"functionDeclarations":[{"name":"read_file","description":"Reads a file.","parameters":{"type":"OBJECT"}}]}]`
	functions := `[{"name":"get_weather","parameters":{"type":"object"}}]`
	for _, tt := range []struct {
		name, body string
		want       int
	}{
		{"anthropic", `{"model":"m","system":"be brief","messages":[{"role":"user","content":"hi"}],"tools":` + anthropic + `}`, Count(anthropic)},
		{"responses", `{"model":"m","instructions":"be brief","input":[],"tools":` + responses + `}`, Count(responses)},
		{"gemini", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":` + gemini + `}`, Count(gemini)},
		{"chat, tools and legacy functions", `{"messages":[],"tools":` + anthropic + `,"functions":` + functions + `}`, Count(anthropic) + Count(functions)},
		{"none", `{"model":"m","messages":[{"role":"user","content":"a long enough message"}]}`, 0},
		{"not an array", `{"tools":"none","functions":7}`, 0},
		{"not JSON", `not json`, 0},
	} {
		if got := Tools([]byte(tt.body)); got != tt.want || (tt.want > 0) != (got > 0) {
			t.Errorf("%s: Tools = %d; want %d", tt.name, got, tt.want)
		}
	}
}
