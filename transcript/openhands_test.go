package transcript

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

// The figures were checked with python over the event lists: basic.json has a user
// message, an edit action with its observation (cause 3) and a finish action that
// gets no observation; basic_gui_mode.json has a user message, four tool actions
// (run, edit, edit, run), each answered (the last run has success false), and a
// closing agent message.
func TestOpenHandsRealSessions(t *testing.T) {
	type call struct {
		ID, Name string
		Action   toolcall.Action
		Path     string
		Command  string
		Out      string // output path
		IsError  bool
	}
	tests := []struct {
		file  string
		want  docFigures
		calls []call
	}{
		{"basic.json", docFigures{Task: "Please create a simple 2048 game. No need to run it.",
			Messages: 4, Steps: 2, Calls: 2, Outputs: 1, Unanswered: 1}, []call{
			{"toolu_017nBp7UfiGqyrA7j77HgtFP", "edit", toolcall.ActionWrite, "/workspace/game_2048.py", "", "2.content", false},
			{"toolu_01BUKu3B7nY574atNECkBiFk", "finish", toolcall.ActionOther, "", "", "", false},
		}},
		{"basic_gui_mode.json", docFigures{Cwd: "/workspace", Task: "I want to create a VueJS app that allows me to:",
			Messages: 10, Steps: 5, Calls: 4, Outputs: 4, Errors: 1}, []call{
			{"toolu_01W9Z8jBctr8X2frZV9p1RYs", "run", toolcall.ActionShell, "", "mkdir -p /workspace/todo-app", "8.content", false},
			{"toolu_01YYLXwwdBLwtMmjr5Sfsieg", "edit", toolcall.ActionWrite, "/workspace/todo-app/index.html", "", "10.content", false},
			{"toolu_01GpJj2ShdFjb9ZTY4CVxi9C", "edit", toolcall.ActionWrite, "/workspace/todo-app/app.js", "", "12.content", false},
			{"toolu_01DwihWr4ooPZS1CGTLAWrFP", "run", toolcall.ActionShell, "", "cd /workspace/todo-app && python3 -m http.server 8000", "14.content", true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s, raw := docReadFile(t, readOpenHands, docReal("openhands/"+tt.file))
			docInvariants(t, s)
			if diff := cmp.Diff(tt.want, docFiguresOf(s, tt.want)); diff != "" {
				t.Errorf("figures (-want +got):\n%s", diff)
			}
			var got []call
			for _, c := range s.Calls {
				cl := call{ID: c.ID, Name: c.Name, Action: c.Action, Path: c.Path, Command: c.Command}
				if c.Output != nil {
					cl.Out, cl.IsError = c.Output.paths[0], c.Output.IsError
				}
				got = append(got, cl)
			}
			if diff := cmp.Diff(tt.calls, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			docRoundTrip(t, s, raw, readOpenHands, func(i int, o *ToolOutput) bool { return i%2 == 0 })
		})
	}
}

func TestOpenHandsSpotValues(t *testing.T) {
	s, _ := docReadFile(t, readOpenHands, docReal("openhands/basic_gui_mode.json"))
	// The create's content comes from the model's own tool call (the event's args
	// hold no file_text), and the thought is the assistant text.
	c := s.Calls[1]
	if !strings.HasPrefix(c.Content, "<!DOCTYPE html>\n<html lang=\"en\">") || s.Messages[3].Text != "Let's create the main HTML file:" {
		t.Errorf("create: content %.30q, text %q", c.Content, s.Messages[3].Text)
	}
	if o := c.Output; !strings.HasPrefix(o.Text, "--- /workspace/todo-app/index.html\n+++ /workspace/todo-app/index.html\n@@ -0,0 +1,43 @@") {
		t.Errorf("edit observation text %.60q", o.Text)
	}
	last := s.Messages[len(s.Messages)-1]
	if last.Role != RoleAssistant || len(last.Calls) != 0 || !strings.HasPrefix(last.Text, "I've created a complete Vue.js todo application") {
		t.Errorf("closing message: %s %d calls %.40q", last.Role, len(last.Calls), last.Text)
	}
	if s.Messages[0].Role != RoleUser || s.Messages[0].Line != 0 {
		t.Errorf("first message %s line %d", s.Messages[0].Role, s.Messages[0].Line)
	}
}

func TestOpenHandsShapes(t *testing.T) {
	// Two actions of one model response make one step; a read with a view range; an
	// error observation; string ids; an observation of a message; an action without
	// tool_call_metadata.
	doc := `[
 {"id":"1","source":"user","action":"message","args":{"content":"look at a.py"}},
 {"id":2,"source":"agent","action":"read","args":{"path":"a.py","view_range":[10,20],"thought":"Reading."},"tool_call_metadata":{"tool_call_id":"t1","model_response":{"id":"r1"}}},
 {"id":3,"source":"agent","action":"run","args":{"command":"cat b.py","thought":""},"tool_call_metadata":{"tool_call_id":"t2","model_response":{"id":"r1"}}},
 {"id":4,"source":"agent","observation":"read","cause":2,"content":"line10"},
 {"id":5,"source":"agent","observation":"error","cause":"3","content":"boom"},
 {"id":6,"source":"agent","action":"think","args":{"thought":"hmm"}},
 {"id":7,"source":"agent","observation":"think","cause":6,"content":"Your thought has been logged."},
 {"id":8,"source":"agent","action":"message","args":{"content":"done"}},
 {"id":9,"source":"user","observation":"null","cause":8,"content":""},
 {"id":10,"source":"agent","observation":"run","cause":99,"content":"?"}
]`
	s, err := readOpenHands("shapes", []byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	docInvariants(t, s)
	want := docFigures{Task: "look at a.py", Messages: 7, Steps: 3, Calls: 3, Outputs: 3, Errors: 1}
	if diff := cmp.Diff(want, docFiguresOf(s, want)); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	if m := s.Messages[1]; len(m.Calls) != 2 || m.Text != "Reading." {
		t.Errorf("grouped step: %d calls, text %q", len(m.Calls), m.Text)
	}
	if r := s.Calls[0]; r.Action != toolcall.ActionRead || r.Path != "a.py" || r.Range != (toolcall.Range{Start: 10, End: 20}) {
		t.Errorf("read: %s %s %v", r.Action, r.Path, r.Range)
	}
	if th := s.Calls[2]; th.ID != "event-6" || th.Output == nil || th.Output.paths[0] != "6.content" {
		t.Errorf("think call: %q %+v", th.ID, th.Output)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "event 99") {
		t.Errorf("warnings %q", s.Warnings)
	}
	docRoundTrip(t, s, []byte(doc), readOpenHands, func(i int, o *ToolOutput) bool { return true })
}

func TestOpenHandsMalformed(t *testing.T) {
	tests := []struct {
		name, doc  string
		line       int
		field, msg string
	}{
		{"truncated", "[\n{\"id\":0,\"source\":\"user\",\n", 3, "", "truncated"},
		{"object root", `{"id":0}`, 0, "", "JSON array"},
		{"event not object", `[{"id":0,"source":"user","action":"message","args":{"content":"x"}},7]`, 0, "1", "not a JSON object"},
		{"args not object", `[{"id":0,"source":"user","action":"message","args":{"content":"x"}},{"id":1,"source":"agent","action":"run","args":"ls"}]`, 0, "1.args", "not an object"},
		{"content not string", `[{"id":0,"source":"user","action":"message","args":{"content":"x"}},{"id":1,"source":"agent","action":"run","args":{"command":"ls"}},{"id":2,"source":"agent","observation":"run","cause":1,"content":[1]}]`, 0, "2.content", "not a string"},
		{"neither", `[{"id":0,"source":"user","action":"message","args":{"content":"x"}},{"id":1,"source":"agent"}]`, 0, "1", "neither action nor observation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readOpenHands(tt.name, []byte(tt.doc), Options{})
			docErr(t, err, tt.line, tt.field, tt.msg)
			if tt.line == 0 && tt.field != "" {
				s, err := readOpenHands(tt.name, []byte(tt.doc), Options{Lenient: true})
				if err != nil || s.Skipped != 1 || s.Messages[0].Text != "x" {
					t.Errorf("lenient: %v", err)
				}
			}
		})
	}
}

func FuzzOpenHands(f *testing.F) {
	docSeeds(f, docReal("openhands/basic.json"), docReal("openhands/basic_gui_mode.json"))
	f.Add([]byte(`[{"id":1,"source":"agent","action":"edit","args":{"path":"a","command":"view"}},{"id":2,"source":"agent","observation":"edit","cause":1,"content":"x","extras":{"metadata":{"exit_code":"2"}}}]`))
	f.Fuzz(func(t *testing.T, data []byte) { docFuzz(t, readOpenHands, data) })
}
