package transcript

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// geminiBody is a generateContent body in the shape Gemini CLI 0.61 sends: the
// injected session context, the prompt, model turns with thought signatures and
// function calls without ids (as the API returns them), and the CLI's answers with
// ids of its own making; an error response and an MCP-style content response.
const geminiBody = `{"contents":[` +
	`{"role":"user","parts":[{"text":"This is the Gemini CLI. We are setting up the context for our chat.\nToday's date is Tuesday."}]},` +
	`{"role":"user","parts":[{"text":"fix the port"}]},` +
	`{"role":"model","parts":[{"text":"Reading.","thoughtSignature":"c2ln"},{"functionCall":{"name":"read_file","args":{"file_path":"/w/main.go"}}}]},` +
	`{"role":"user","parts":[{"functionResponse":{"id":"read_file-1764590000000-a1","name":"read_file","response":{"output":"package main\n"}}}]},` +
	`{"role":"model","parts":[{"functionCall":{"name":"replace","args":{"file_path":"/w/main.go","old_string":"a","new_string":"b"}}},{"functionCall":{"name":"run_shell_command","args":{"command":"go test ./..."}}}]},` +
	`{"role":"user","parts":[{"functionResponse":{"id":"run_shell_command-2","name":"run_shell_command","response":{"error":"exit 1"}}},{"functionResponse":{"id":"replace-3","name":"replace","response":{"output":"Successfully modified file: /w/main.go (1 replacements)."}}}]},` +
	`{"role":"model","parts":[{"functionCall":{"name":"mcp_pruneadvisor_recall","args":{"id":"o_0123456789"}}}]},` +
	`{"role":"user","parts":[{"functionResponse":{"id":"r-4","name":"mcp_pruneadvisor_recall","response":{"content":[{"type":"text","text":"original"}]}}}]}` +
	`],"systemInstruction":{"role":"user","parts":[{"text":"You are an interactive CLI agent."}]},"tools":[{"functionDeclarations":[]}],"generationConfig":{"temperature":0}}`

func TestReadGeminiAPI(t *testing.T) {
	f, err := Detect("body", []byte(geminiBody))
	if err != nil || f != FormatGeminiAPI {
		t.Fatalf("Detect = %q, %v; want %q", f, err, FormatGeminiAPI)
	}
	s, err := Read("body", []byte(geminiBody), Options{Format: FormatGeminiAPI})
	if err != nil {
		t.Fatal(err)
	}
	type msgView struct {
		Role  Role
		Meta  bool
		Step  int
		Text  string
		Calls []string
		Outs  []string
	}
	var got []msgView
	for _, m := range s.Messages {
		v := msgView{Role: m.Role, Meta: m.Meta, Step: m.Step, Text: m.Text}
		if len(v.Text) > 20 {
			v.Text = v.Text[:20]
		}
		for _, c := range m.Calls {
			v.Calls = append(v.Calls, c.ID+" "+c.Name+" "+string(c.Action)+" "+c.Path)
		}
		for _, o := range m.Outputs {
			e := ""
			if o.IsError {
				e = " error"
			}
			v.Outs = append(v.Outs, o.Key+" "+o.Text+e)
		}
		got = append(got, v)
	}
	want := []msgView{
		{Role: RoleSystem, Text: "You are an interacti"},
		{Role: RoleUser, Meta: true, Text: "This is the Gemini C"},
		{Role: RoleUser, Text: "fix the port"},
		{Role: RoleAssistant, Step: 1, Text: "Reading.", Calls: []string{"call-1 read_file read /w/main.go"}},
		{Role: RoleTool, Step: 1, Outs: []string{"call-1 package main\n"}},
		{Role: RoleAssistant, Step: 2, Calls: []string{"call-2 replace edit /w/main.go", "call-3 run_shell_command shell "}},
		{Role: RoleTool, Step: 2, Outs: []string{"call-3 exit 1 error", "call-2 Successfully modified file: /w/main.go (1 replacements)."}},
		{Role: RoleAssistant, Step: 3, Calls: []string{"call-4 mcp_pruneadvisor_recall other "}},
		{Role: RoleTool, Step: 3, Outs: []string{"call-4 original"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("messages (-want +got):\n%s", d)
	}
	if s.Task != "fix the port" {
		t.Errorf("Task %q", s.Task)
	}
	out, err := s.Rewrite(map[string]string{"call-1": "S1", "call-3": "S3", "call-4": "S4"})
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Replace(geminiBody, `"output":"package main\n"`, `"output":"S1"`, 1)
	w = strings.Replace(w, `"error":"exit 1"`, `"error":"S3"`, 1)
	w = strings.Replace(w, `"text":"original"`, `"text":"S4"`, 1)
	if string(out) != w {
		t.Fatalf("rewrite:\n got %s\nwant %s", out, w)
	}
}

func TestReadGeminiAPIShapes(t *testing.T) {
	tests := []struct {
		name, body string
		msgs       int
		err        string
	}{
		{"system string", `{"systemInstruction":"be brief","contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, 2, ""},
		{"ids on both sides", `{"contents":[{"role":"model","parts":[{"functionCall":{"id":"x","name":"f","args":{}}},{"functionCall":{"id":"y","name":"f","args":{}}}]},` +
			`{"role":"user","parts":[{"functionResponse":{"id":"y","name":"f","response":{"output":"Y"}}},{"functionResponse":{"id":"x","name":"f","response":{"output":"X"}}}]}]}`, 2, ""},
		{"contents missing", `{"generationConfig":{}}`, 0, "field contents: missing"},
		{"contents object", `{"contents":{}}`, 0, "field contents: not a list"},
		{"parts missing", `{"contents":[{"role":"user"}]}`, 0, "field contents.0.parts: missing or not a list"},
		{"part not object", `{"contents":[{"role":"user","parts":[3]}]}`, 0, "field contents.0.parts.0: part is not a JSON object"},
		{"call without name", `{"contents":[{"role":"model","parts":[{"functionCall":{"args":{}}}]}]}`, 0, "field contents.0.parts.0.functionCall.name: missing or not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Read("b", []byte(tt.body), Options{Format: FormatGeminiAPI})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v; want ErrMalformed with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Messages) != tt.msgs {
				t.Errorf("%d messages; want %d", len(s.Messages), tt.msgs)
			}
			for _, c := range s.Calls {
				if c.Output == nil {
					t.Errorf("call %s unanswered", c.ID)
				} else if c.ID == "x" && c.Output.Text != "X" || c.ID == "y" && c.Output.Text != "Y" {
					t.Errorf("call %s paired with %q", c.ID, c.Output.Text)
				}
			}
		})
	}
}

func FuzzGeminiAPI(f *testing.F) {
	f.Add([]byte(geminiBody))
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lenient := range []bool{false, true} {
			s, err := Read("fuzz", data, Options{Format: FormatGeminiAPI, Lenient: lenient})
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrEmpty) {
					t.Fatalf("lenient=%v: error is neither ErrMalformed nor ErrEmpty: %v", lenient, err)
				}
				continue
			}
			checkRewrite(t, s, FormatGeminiAPI, lenient, ^uint64(0), "[pruned]")
		}
	})
}
