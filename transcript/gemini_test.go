package transcript

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

var geminiFiles = []string{
	"gemini-cli/session-2025-12-24T06-40-c330aea9.json",
	"gemini-cli/session-2025-12-30T01-31-271ace30.json",
	"gemini-cli/session-2026-01-10T01-55-ac6d3016.json",
}

// The figures were counted with python over messages[] (gemini messages = steps,
// toolCalls entries = calls, all of which hold a result; status error/cancelled =
// errors; one synthesised tool message per gemini message with results).
func TestGeminiRealSessions(t *testing.T) {
	tests := []struct {
		file string
		want docFigures
	}{
		{geminiFiles[0], docFigures{ID: "c330aea9-39d8-4bf1-ac29-5fdb4baaad16", Task: "give it a darkmode toggle button: Implem",
			Messages: 42, Steps: 21, Calls: 24, Outputs: 24}},
		{geminiFiles[1], docFigures{ID: "271ace30-fcc6-4e83-913a-78e95b331e67", Task: "list all of the apps installed on my sys",
			Messages: 154, Steps: 77, Calls: 68, Outputs: 68}},
		{geminiFiles[2], docFigures{ID: "ac6d3016-4a15-45b4-b48b-3a714b1ffa43", Task: "open M-Gemini repo",
			Messages: 151, Steps: 75, Calls: 72, Outputs: 72, Errors: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s, raw := docReadFile(t, readGemini, docReal(tt.file))
			docInvariants(t, s)
			if diff := cmp.Diff(tt.want, docFiguresOf(s, tt.want)); diff != "" {
				t.Errorf("figures (-want +got):\n%s", diff)
			}
			if s.Format != FormatGemini || len(s.Orphans) != 0 {
				t.Errorf("format %q, %d orphans", s.Format, len(s.Orphans))
			}
			docRoundTrip(t, s, raw, readGemini, func(i int, o *ToolOutput) bool { return i%3 == 1 })
		})
	}
}

func TestGeminiSpotValues(t *testing.T) {
	s, _ := docReadFile(t, readGemini, docReal(geminiFiles[0]))
	// messages[1] is a gemini message with three read_file calls; their results go
	// into one synthesised tool message right after it.
	asst, tool := s.Messages[1], s.Messages[2]
	if asst.Role != RoleAssistant || len(asst.Calls) != 3 || tool.Role != RoleTool || len(tool.Outputs) != 3 {
		t.Fatalf("messages 1-2: %s with %d calls, %s with %d outputs", asst.Role, len(asst.Calls), tool.Role, len(tool.Outputs))
	}
	c := asst.Calls[0]
	got := []string{c.ID, c.Name, string(c.Action), c.Path, c.Output.CallID, c.Output.paths[0]}
	want := []string{"read_file-1766558616405-5733fe31192e28", "read_file", "read", "Gemini-Playground/index.html",
		"read_file-1766558616405-5733fe31192e28", "messages.1.toolCalls.0.result.0.functionResponse.response.output"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first call (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(c.Output.Text, "<!DOCTYPE html>\n<html>\n<head>\n    <title>Gemini Playground</title>") || c.Output.Block != 0 || tool.Outputs[2].Block != 2 {
		t.Errorf("first output text %.40q, blocks %d %d", c.Output.Text, c.Output.Block, tool.Outputs[2].Block)
	}
	// write_file at calls[10] (messages[11].toolCalls[1]) is a write with its content.
	w := s.Calls[10]
	if w.Name != "write_file" || w.Action != toolcall.ActionWrite || w.Path != "Gemini-Playground/README.md" || !strings.HasPrefix(w.Content, "# Gemini Playground\n\nA minimal") {
		t.Errorf("write call: %s %s %s %.30q", w.Name, w.Action, w.Path, w.Content)
	}
	if w.Output.paths[0] != "messages.11.toolCalls.1.result.0.functionResponse.response.output" {
		t.Errorf("write output path %q", w.Output.paths[0])
	}

	e, _ := docReadFile(t, readGemini, docReal(geminiFiles[2]))
	// calls[7]: read_file of a missing file, status "error", response.error.
	rc := e.Calls[7]
	if rc.Output == nil || !rc.Output.IsError || rc.Output.Text != "File not found: /home/mischa/M-Gemini/scripts/pre_commit_check.py" ||
		rc.Output.paths[0] != "messages.6.toolCalls.4.result.0.functionResponse.response.error" {
		t.Errorf("error result: %+v", rc.Output)
	}
	// calls[5]: read_file with limit 50 (Gemini's offset is 0-based): lines 1-50.
	if r := e.Calls[5]; r.Action != toolcall.ActionRead || r.Path != "M-Gemini/scripts/sync_raw_logs.py" || r.Range != (toolcall.Range{Start: 1, End: 50}) || string(r.Args) != `{"file_path":"M-Gemini/scripts/sync_raw_logs.py","limit":50}` {
		t.Errorf("partial read: %s %s %v %s", r.Action, r.Path, r.Range, r.Args)
	}
	// calls[71]: a run_shell_command the user cancelled.
	cc := e.Calls[71]
	if cc.Name != "run_shell_command" || !cc.Output.IsError || !strings.HasPrefix(cc.Output.Text, "[Operation Cancelled]") {
		t.Errorf("cancelled call: %s %+v", cc.Name, cc.Output)
	}
	// The info entry ("Request cancelled.") is not a message.
	for _, m := range e.Messages {
		if m.Text == "Request cancelled." {
			t.Error("info entry became a message")
		}
	}
}

func TestGeminiShapes(t *testing.T) {
	doc := `{"sessionId":"s1","projectHash":"h","messages":[
 {"id":"1","type":"user","content":[{"text":"read "},{"text":"a.txt"}]},
 {"id":"2","type":"gemini","content":"","toolCalls":[
   {"id":"read_file-1","name":"read_file","args":{"file_path":"/p/a.txt"},"status":"success",
    "result":[{"functionResponse":{"id":"read_file-1","name":"read_file","response":{"output":"alpha"}}},{"text":"beta"},{"inlineData":{"mimeType":"image/png","data":"AA=="}}]},
   {"name":"run_shell_command","args":{"command":"ls"},"status":"executing"},
   {"id":"glob-1","name":"glob","args":{"pattern":"*"},"status":"success","result":[{"functionResponse":{"response":{"files":["a","b"]}}}]}
 ]},
 {"id":"3","type":"warning","content":"x"},
 {"id":"4","type":"summary","content":"x"}
]}`
	s, err := readGemini("shapes", []byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	docInvariants(t, s)
	want := docFigures{ID: "s1", Task: "read \na.txt", Messages: 3, Steps: 1, Calls: 3, Outputs: 2, Unanswered: 1}
	if diff := cmp.Diff(want, docFiguresOf(s, want)); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	o := s.Calls[0].Output
	if o.Text != "alpha\nbeta" || !o.HasImage || len(o.paths) != 2 || o.paths[1] != "messages.1.toolCalls.0.result.1.text" {
		t.Errorf("multi-part result: %q image %v paths %v", o.Text, o.HasImage, o.paths)
	}
	if s.Calls[1].ID != "call-2" || s.Calls[1].Output != nil {
		t.Errorf("id-less pending call: %q %+v", s.Calls[1].ID, s.Calls[1].Output)
	}
	if g := s.Calls[2].Output; g.Text != `{"files":["a","b"]}` || g.paths[0] != "messages.1.toolCalls.2.result.0.functionResponse.response" {
		t.Errorf("structured response: %q %v", g.Text, g.paths)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], `"summary"`) {
		t.Errorf("warnings %q", s.Warnings)
	}
	docRoundTrip(t, s, []byte(doc), readGemini, func(i int, o *ToolOutput) bool { return true })
}

func TestGeminiMalformed(t *testing.T) {
	tests := []struct {
		name, doc   string
		line        int
		field, msg  string
		lenientSkip int // -1: fails even when lenient
	}{
		{"truncated", "{\"sessionId\":\"s\",\n\"projectHash\":\"h\",\n\"messages\":[{\"type\":\"user\",", 3, "", "truncated", -1},
		{"not an object", `[1]`, 0, "", "JSON object", -1},
		{"messages missing", `{"sessionId":"s","projectHash":"h"}`, 0, "messages", "missing", -1},
		{"message not object", `{"sessionId":"s","projectHash":"h","messages":[{"type":"user","content":"a"},"x"]}`, 0, "messages.1", "not a JSON object", 1},
		{"type missing", `{"sessionId":"s","projectHash":"h","messages":[{"type":"user","content":"a"},{"content":"b"}]}`, 0, "messages.1.type", "missing", 1},
		{"toolCalls not list", `{"sessionId":"s","projectHash":"h","messages":[{"type":"user","content":"a"},{"type":"gemini","toolCalls":3}]}`, 0, "messages.1.toolCalls", "not a list", 1},
		{"call name missing", `{"sessionId":"s","projectHash":"h","messages":[{"type":"user","content":"a"},{"type":"gemini","toolCalls":[{"id":"x"}]}]}`, 0, "messages.1.toolCalls.0.name", "missing", 1},
		{"result not list", `{"sessionId":"s","projectHash":"h","messages":[{"type":"user","content":"a"},{"type":"gemini","toolCalls":[{"id":"x","name":"n","result":"r"}]}]}`, 0, "messages.1.toolCalls.0.result", "not a list", 1},
		{"bad utf8", "{\"sessionId\":\"s\",\"projectHash\":\"h\",\n\"messages\":[{\"type\":\"user\",\"content\":\"\xc3\x28\"}]}", 2, "", "invalid UTF-8", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readGemini(tt.name, []byte(tt.doc), Options{})
			docErr(t, err, tt.line, tt.field, tt.msg)
			s, err := readGemini(tt.name, []byte(tt.doc), Options{Lenient: true})
			if tt.lenientSkip < 0 {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("lenient: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("lenient: %v", err)
			}
			if s.Skipped != tt.lenientSkip || len(s.Warnings) == 0 || s.Messages[0].Role != RoleUser {
				t.Errorf("lenient: skipped %d, warnings %q", s.Skipped, s.Warnings)
			}
		})
	}
	if _, err := readGemini("empty", []byte(`{"sessionId":"s","projectHash":"h","messages":[]}`), Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("no messages: %v", err)
	}
}

func FuzzGemini(f *testing.F) {
	docSeeds(f, docReal(geminiFiles[0]), docReal(geminiFiles[1]), docReal(geminiFiles[2]))
	f.Add([]byte(`{"sessionId":"s","projectHash":"h","messages":[{"type":"user","content":"x"},{"type":"gemini","content":"y","toolCalls":[{"id":"a","name":"read_file","args":{"file_path":"f"},"status":"success","result":[{"functionResponse":{"id":"a","response":{"output":"z"}}}]}]}]}`))
	f.Add([]byte(`{"sessionId":1,"projectHash":null,"messages":[{"type":"gemini","toolCalls":[{"id":2,"name":"x","result":[{"functionResponse":{"response":{"error":"e"}}},{"text":"t"}]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { docFuzz(t, readGemini, data) })
}
