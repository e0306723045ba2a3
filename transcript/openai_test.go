package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/tidwall/gjson"
)

// ---- test helpers shared by the whole-document and Codex reader tests ----

type readFunc func(name string, data []byte, opts Options) (*Session, error)

// docReal is the path of a real session under ../shared/sessions (from the package
// directory, ../../shared/sessions).
func docReal(rel string) string { return filepath.Join("..", "..", "shared", "sessions", rel) }

// docOwn is the path of one of the project's own sessions under testdata/.
func docOwn(rel string) string { return filepath.Join("..", "testdata", rel) }

func docReadFile(t testing.TB, read readFunc, path string) (*Session, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := read(path, data, Options{})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return s, data
}

// docFigures are the counts every reader test asserts.
type docFigures struct {
	ID, Cwd    string
	Task       string // compared as a prefix: the want's length cuts the got
	Messages   int
	Steps      int
	Calls      int
	Outputs    int
	Unanswered int
	Errors     int // outputs with IsError
	Meta       int // Meta messages
	Skipped    int
}

func docFiguresOf(s *Session, want docFigures) docFigures {
	f := docFigures{ID: s.ID, Cwd: s.Cwd, Task: s.Task, Messages: len(s.Messages), Steps: s.Steps(),
		Calls: len(s.Calls), Outputs: len(s.Outputs()), Unanswered: len(s.Unanswered()), Skipped: s.Skipped}
	if len(f.Task) > len(want.Task) {
		f.Task = f.Task[:len(want.Task)]
	}
	for _, o := range s.Outputs() {
		if o.IsError {
			f.Errors++
		}
	}
	for _, m := range s.Messages {
		if m.Meta {
			f.Meta++
		}
	}
	return f
}

// docInvariants checks the cross-links every session must satisfy.
func docInvariants(t testing.TB, s *Session) {
	t.Helper()
	step := 0
	keys := map[string]bool{}
	for i, m := range s.Messages {
		if m.Index != i {
			t.Fatalf("message %d has Index %d", i, m.Index)
		}
		if m.Role == RoleAssistant {
			step++
		}
		if m.Step != step {
			t.Fatalf("message %d has Step %d, want %d", i, m.Step, step)
		}
		for _, c := range m.Calls {
			if c.Message != i || c.Step != step {
				t.Fatalf("call %s points at message %d step %d", c.ID, c.Message, c.Step)
			}
			if c.Output != nil && c.Output.Call != c {
				t.Fatalf("call %s: output does not point back", c.ID)
			}
		}
		for _, o := range m.Outputs {
			if o.Message != i {
				t.Fatalf("output %s points at message %d, is in %d", o.Key, o.Message, i)
			}
			if keys[o.Key] {
				t.Fatalf("output key %s repeats", o.Key)
			}
			keys[o.Key] = true
			if o.Hash != TextHash(o.Text) {
				t.Fatalf("output %s: hash mismatch", o.Key)
			}
			if o.Call != nil && o.Call.Output != o {
				t.Fatalf("output %s: call does not point back", o.Key)
			}
			if o.Call == nil && !slices.Contains(s.Orphans, o) {
				t.Fatalf("output %s has no call and is no orphan", o.Key)
			}
		}
	}
	n := 0
	for _, m := range s.Messages {
		n += len(m.Calls)
	}
	if n != len(s.Calls) {
		t.Fatalf("%d calls in messages, %d in Session.Calls", n, len(s.Calls))
	}
}

// docSpans returns the absolute byte spans, in raw, of the text pieces of the
// outputs named in keys, in document order.
func docSpans(t testing.TB, s *Session, raw []byte, keys map[string]bool) [][2]int {
	t.Helper()
	var spans [][2]int
	for _, o := range s.Outputs() {
		if !keys[o.Key] {
			continue
		}
		u := s.units[o.unit-1]
		for _, p := range o.paths {
			r := gjson.GetBytes(raw[u.start:u.end], p)
			if !r.Exists() {
				t.Fatalf("output %s: path %s not found", o.Key, p)
			}
			spans = append(spans, [2]int{u.start + r.Index, u.start + r.Index + len(r.Raw)})
		}
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	return spans
}

// docCut returns raw with each span replaced by a NUL byte.
func docCut(raw []byte, spans [][2]int) []byte {
	var out []byte
	pos := 0
	for _, sp := range spans {
		out = append(out, raw[pos:sp[0]]...)
		out = append(out, 0)
		pos = sp[1]
	}
	return append(out, raw[pos:]...)
}

// docShape is the structure of a session a rewrite must keep.
type docShape struct {
	Roles   []Role
	Calls   []string // id, name, args
	Outputs []string // key, call id, is-error
}

func docShapeOf(s *Session) docShape {
	var sh docShape
	for _, m := range s.Messages {
		sh.Roles = append(sh.Roles, m.Role)
	}
	for _, c := range s.Calls {
		sh.Calls = append(sh.Calls, c.ID+" "+c.Name+" "+string(c.Args))
	}
	for _, o := range s.Outputs() {
		sh.Outputs = append(sh.Outputs, fmt.Sprintf("%s %s", o.Key, o.CallID))
	}
	return sh
}

// docRoundTrip stubs the outputs picked by pick (which must all be locatable),
// re-reads the rewritten bytes with the same reader and checks that the structure is
// unchanged, the stubbed outputs read back as their stubs, the others as before, and
// every byte outside the replaced values is identical.
func docRoundTrip(t *testing.T, s *Session, raw []byte, read readFunc, pick func(i int, o *ToolOutput) bool) {
	t.Helper()
	stubs := map[string]string{}
	keys := map[string]bool{}
	for i, o := range s.Outputs() {
		if pick(i, o) {
			stubs[o.Key] = fmt.Sprintf("[pruned: %s, %d tokens; recall(%q) restores it]", o.Key, o.Tokens, "o_"+o.Hash[:6])
			keys[o.Key] = true
		}
	}
	if len(stubs) == 0 {
		t.Fatal("no output picked")
	}
	out, err := s.Rewrite(stubs)
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	s2, err := read(s.Name, out, Options{})
	if err != nil {
		t.Fatalf("re-read: %v", err)
	}
	if diff := cmp.Diff(docShapeOf(s), docShapeOf(s2)); diff != "" {
		t.Fatalf("structure changed (-before +after):\n%s", diff)
	}
	before, after := s.Outputs(), s2.Outputs()
	for i, o := range before {
		want := o.Text
		if st, ok := stubs[o.Key]; ok {
			want = st + strings.Repeat("\n", len(o.paths)-1)
		}
		if after[i].Text != want {
			t.Fatalf("output %s reads back as %.80q, want %.80q", o.Key, after[i].Text, want)
		}
	}
	if !bytes.Equal(docCut(raw, docSpans(t, s, raw, keys)), docCut(out, docSpans(t, s2, out, keys))) {
		t.Fatal("bytes outside the replaced values changed")
	}
	if got, err := s.Rewrite(nil); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Rewrite(nil) is not the original bytes (err %v)", err)
	}
}

// docFuzz is the property every reader fuzz test checks: no panic; failures are
// ErrMalformed or ErrEmpty; a session satisfies the invariants, and stubbing every
// locatable output rewrites without error.
func docFuzz(t *testing.T, read readFunc, data []byte) {
	for _, lenient := range []bool{false, true} {
		s, err := read("fuzz", data, Options{Lenient: lenient})
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("lenient=%v: error is neither ErrMalformed nor ErrEmpty: %v", lenient, err)
			}
			continue
		}
		docInvariants(t, s)
		stubs := map[string]string{}
		for _, o := range s.Outputs() {
			if o.unit > 0 && len(o.paths) > 0 {
				stubs[o.Key] = "[pruned]"
			}
		}
		if _, err := s.Rewrite(stubs); err != nil {
			t.Fatalf("lenient=%v: Rewrite: %v", lenient, err)
		}
	}
}

// docSeeds adds the files as fuzz seeds.
func docSeeds(f *testing.F, paths ...string) {
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// docErr asserts err is a *ParseError with the given line and field, whose message
// contains msg.
func docErr(t *testing.T, err error, line int, field, msg string) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *ParseError", err)
	}
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("error %v does not wrap ErrMalformed", err)
	}
	if pe.Line != line || pe.Field != field || !strings.Contains(pe.Msg, msg) {
		t.Fatalf("got line %d field %q msg %q; want line %d field %q msg containing %q", pe.Line, pe.Field, pe.Msg, line, field, msg)
	}
}

// ---- mini-swe-agent ----

func TestMiniSWEAgentRealSessions(t *testing.T) {
	type read struct {
		call int
		cmd  string // the block's command, checked with python
		path string
		rng  toolcall.Range
	}
	tests := []struct {
		file  string
		want  docFigures
		first string // the first call's command
		read  read   // a read: Path and Range come from Classify on the command
	}{
		{"django__django-16560.traj.json", docFigures{ID: "django__django-16560", Cwd: "/testbed", Task: "<pr_description>\nConsider the following PR description:\nAllow to customize the code",
			Messages: 292, Steps: 145, Calls: 145, Outputs: 145, Errors: 9}, `ls -R | grep ":$" | head -n 20 && grep -r "class BaseConstraint" .`,
			read{4, "sed -n '18,50p' django/db/models/constraints.py", "/testbed/django/db/models/constraints.py", toolcall.Range{Start: 18, End: 50}}},
		{"matplotlib__matplotlib-25775.traj.json", docFigures{ID: "matplotlib__matplotlib-25775", Cwd: "/testbed", Task: "<pr_description>\nConsider the following PR description:\n[ENH]: Add get/set_antialiased",
			Messages: 192, Steps: 95, Calls: 95, Outputs: 95, Errors: 8}, `ls -R | grep ":$" | head -n 20`,
			read{6, "nl -ba lib/matplotlib/text.py | sed -n '700,750p'", "/testbed/lib/matplotlib/text.py", toolcall.Range{Start: 700, End: 750}}},
		{"pytest-dev__pytest-5787.traj.json", docFigures{ID: "pytest-dev__pytest-5787", Cwd: "/testbed", Task: "<pr_description>\nConsider the following PR description:\nexception serialization",
			Messages: 174, Steps: 86, Calls: 86, Outputs: 86, Errors: 16}, "ls -la",
			read{12, "sed -n '901,950p' src/_pytest/_code/code.py", "/testbed/src/_pytest/_code/code.py", toolcall.Range{Start: 901, End: 950}}},
		{"sympy__sympy-20438.traj.json", docFigures{ID: "sympy__sympy-20438", Cwd: "/testbed", Task: "<pr_description>\nConsider the following PR description:\n`is_subset` gives wrong results",
			Messages: 122, Steps: 60, Calls: 60, Outputs: 60, Errors: 5}, `ls -R sympy | grep -E "sets.py|productset.py|finiteset.py"`,
			read{10, "sed -n '349,385p' sympy/sets/sets.py", "/testbed/sympy/sets/sets.py", toolcall.Range{Start: 349, End: 385}}},
		{"github_issue.traj.json", docFigures{Task: "Please solve this issue: GitHub Issue: SyntaxError: invalid syntax",
			Messages: 22, Steps: 10, Calls: 10, Outputs: 10, Errors: 2}, "cat /Users/fuchur/Documents/24/git_sync/swe-agent-test-repo/tests/./missing_colon.py",
			read{3, "cat tests/missing_colon.py", "tests/missing_colon.py", toolcall.Range{}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s, raw := docReadFile(t, readMiniSWEAgent, docReal("mini-swe-agent/"+tt.file))
			docInvariants(t, s)
			if diff := cmp.Diff(tt.want, docFiguresOf(s, tt.want)); diff != "" {
				t.Errorf("figures (-want +got):\n%s", diff)
			}
			c := s.Calls[0]
			var args struct{ Command string }
			if err := json.Unmarshal(c.Args, &args); err != nil {
				t.Fatal(err)
			}
			if c.Name != "bash" || args.Command != tt.first || c.ID != "call-1" {
				t.Errorf("first call: id %q name %q command %q", c.ID, c.Name, args.Command)
			}
			prefix := "messages"
			if tt.file == "github_issue.traj.json" {
				prefix = ""
			}
			if got, want := c.Output.paths, []string{jsonscan.Path(prefix, 3, "content")}; !cmp.Equal(got, want) {
				t.Errorf("first output paths %v, want %v", got, want)
			}
			r := s.Calls[tt.read.call]
			got := read{tt.read.call, r.Command, r.Path, r.Range}
			if diff := cmp.Diff(tt.read, got, cmp.AllowUnexported(read{})); diff != "" || r.Action != toolcall.ActionRead {
				t.Errorf("read call (%s; -want +got):\n%s", r.Action, diff)
			}
			docRoundTrip(t, s, raw, readMiniSWEAgent, func(i int, o *ToolOutput) bool { return i%3 == 0 })
		})
	}
}

func TestMiniSWEAgentSpotValues(t *testing.T) {
	s, _ := docReadFile(t, readMiniSWEAgent, docReal("mini-swe-agent/matplotlib__matplotlib-25775.traj.json"))
	// messages[56] holds two bash blocks: one call (the first block), answered by a
	// format error, IsError. Verified with python: the next message starts "Please
	// always provide EXACTLY ONE action".
	m := s.Messages[56]
	if m.Role != RoleAssistant || len(m.Calls) != 1 {
		t.Fatalf("message 56: role %s, %d calls", m.Role, len(m.Calls))
	}
	o := m.Calls[0].Output
	if o == nil || !o.IsError || !strings.HasPrefix(o.Text, "Please always provide EXACTLY ONE action") {
		t.Fatalf("two-block message: output %+v", o)
	}
	var args struct{ Command string }
	_ = json.Unmarshal(m.Calls[0].Args, &args)
	if !strings.HasPrefix(args.Command, "sed -i") {
		t.Errorf("two-block message: command %.60q, want the first block (sed -i …)", args.Command)
	}
	// The timed-out pytest run is an error though it has no return code.
	var timedOut *ToolOutput
	for _, o := range s.Outputs() {
		if strings.HasPrefix(o.Text, "The last command <command>pytest") {
			timedOut = o
		}
	}
	if timedOut == nil || !timedOut.IsError {
		t.Fatalf("timed-out observation: %+v", timedOut)
	}
	// The system prompt and the task are not observations.
	if s.Messages[0].Role != RoleSystem || s.Messages[1].Role != RoleUser || s.Messages[2].Role != RoleAssistant || s.Messages[3].Role != RoleTool {
		t.Errorf("roles of the first messages: %s %s %s %s", s.Messages[0].Role, s.Messages[1].Role, s.Messages[2].Role, s.Messages[3].Role)
	}
}

// ---- SWE-agent ----

func TestSWEAgentRealSessions(t *testing.T) {
	type spot struct {
		call   int
		name   string
		action toolcall.Action
		path   string
		rng    toolcall.Range
		isErr  bool
	}
	tests := []struct {
		file  string
		want  docFigures
		spots []spot
	}{
		{"marshmallow-1867.default.traj", docFigures{Cwd: "/marshmallow-code__marshmallow", Task: "We're currently solving the following issue within our repository.",
			Messages: 29, Steps: 14, Calls: 14, Outputs: 13, Unanswered: 1, Errors: 1}, []spot{
			{1, "open", toolcall.ActionRead, "/marshmallow-code__marshmallow/setup.py", toolcall.Range{}, false},
			{3, "create", toolcall.ActionWrite, "/marshmallow-code__marshmallow/reproduce.py", toolcall.Range{}, false},
			{4, "edit", toolcall.ActionEdit, "/marshmallow-code__marshmallow/reproduce.py", toolcall.Range{}, false},
			{7, "find_file", toolcall.ActionSearch, "", toolcall.Range{}, false},
			{8, "open", toolcall.ActionRead, "/marshmallow-code__marshmallow/src/marshmallow/fields.py", toolcall.Range{Start: 1459, End: 1558}, false},
			{9, "edit", toolcall.ActionEdit, "/marshmallow-code__marshmallow/src/marshmallow/fields.py", toolcall.Range{}, true},
			{10, "edit", toolcall.ActionEdit, "/marshmallow-code__marshmallow/src/marshmallow/fields.py", toolcall.Range{}, false},
			{13, "submit", toolcall.ActionOther, "", toolcall.Range{}, false},
		}},
		{"marshmallow-1867.function-calling.traj", docFigures{Cwd: "/testbed", Task: "We're currently solving the following issue within our repository.",
			Messages: 28, Steps: 13, Calls: 13, Outputs: 13, Unanswered: 0, Errors: 0}, []spot{
			{1, "open", toolcall.ActionRead, "/testbed/setup.py", toolcall.Range{}, false},
			{3, "create", toolcall.ActionWrite, "/testbed/reproduce.py", toolcall.Range{}, false},
			{4, "insert", toolcall.ActionEdit, "/testbed/reproduce.py", toolcall.Range{}, false},
			{8, "open", toolcall.ActionRead, "/testbed/src/marshmallow/fields.py", toolcall.Range{Start: 1457, End: 1556}, false},
			{9, "edit", toolcall.ActionEdit, "/testbed/src/marshmallow/fields.py", toolcall.Range{}, false},
		}},
		{"pydicom__pydicom-1458.traj", docFigures{Cwd: "/pydicom__pydicom", Task: "We're currently solving the following issue within our repository.",
			Messages: 26, Steps: 12, Calls: 12, Outputs: 11, Unanswered: 1, Errors: 3, Meta: 1}, []spot{
			{0, "create", toolcall.ActionWrite, "/pydicom__pydicom/reproduce_bug.py", toolcall.Range{}, false},
			{4, "open", toolcall.ActionRead, "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py", toolcall.Range{Start: 273, End: 372}, false},
			{5, "edit", toolcall.ActionEdit, "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py", toolcall.Range{}, true},
			{8, "edit", toolcall.ActionEdit, "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py", toolcall.Range{}, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s, raw := docReadFile(t, readSWEAgent, docReal("swe-agent/"+tt.file))
			docInvariants(t, s)
			if diff := cmp.Diff(tt.want, docFiguresOf(s, tt.want)); diff != "" {
				t.Errorf("figures (-want +got):\n%s", diff)
			}
			for _, sp := range tt.spots {
				c := s.Calls[sp.call]
				got := spot{sp.call, c.Name, c.Action, c.Path, c.Range, c.Output != nil && c.Output.IsError}
				if diff := cmp.Diff(sp, got, cmp.AllowUnexported(spot{})); diff != "" {
					t.Errorf("call %d (-want +got):\n%s", sp.call, diff)
				}
			}
			docRoundTrip(t, s, raw, readSWEAgent, func(i int, o *ToolOutput) bool { return i%2 == 1 })
		})
	}
}

func TestSWEAgentDetails(t *testing.T) {
	s, _ := docReadFile(t, readSWEAgent, docReal("swe-agent/marshmallow-1867.function-calling.traj"))
	// history[3] is role "tool" naming its call in tool_call_ids.
	o := s.Messages[3].Outputs[0]
	if o.CallID != "call_9diWc1DYm4RLmPfHgIaP2wd" || o.Call != s.Calls[0] || o.paths[0] != "history.3.content" {
		t.Errorf("first tool result: call id %q, paired %v, paths %v", o.CallID, o.Call == s.Calls[0], o.paths)
	}
	// call_5iDdbOYybq7L19vqXmR0DPaU is used by four calls (verified with jq); each
	// result pairs with the call just before it, and the repeats get keys #2…#4.
	var keys []string
	for _, o := range s.Outputs() {
		if o.CallID == "call_5iDdbOYybq7L19vqXmR0DPaU" {
			keys = append(keys, o.Key)
			if o.Call == nil || o.Call.Message != o.Message-1 {
				t.Errorf("output %s not paired with the call before it", o.Key)
			}
		}
	}
	want := []string{"call_5iDdbOYybq7L19vqXmR0DPaU", "call_5iDdbOYybq7L19vqXmR0DPaU#2", "call_5iDdbOYybq7L19vqXmR0DPaU#3", "call_5iDdbOYybq7L19vqXmR0DPaU#4"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("repeated id keys (-want +got):\n%s", diff)
	}
	// The demonstration in pydicom is Meta and makes no step.
	p, _ := docReadFile(t, readSWEAgent, docReal("swe-agent/pydicom__pydicom-1458.traj"))
	if m := p.Messages[1]; !m.Meta || m.Role != RoleUser || len(m.Calls) != 0 || !strings.HasPrefix(m.Text, "Here is a demonstration") {
		t.Errorf("demonstration message: meta %v role %s calls %d", m.Meta, m.Role, len(m.Calls))
	}
	var args struct{ Command string }
	_ = json.Unmarshal(p.Calls[1].Args, &args)
	if !strings.HasPrefix(args.Command, "edit 1:1\nimport numpy as np\n") {
		t.Errorf("text-only edit args: %.40q", args.Command)
	}
}

// ---- OpenAI chat completions ----

func TestOpenAIChatCompletions(t *testing.T) {
	s, raw := docReadFile(t, readOpenAI, docOwn("openai/chat-completions.json"))
	docInvariants(t, s)
	want := docFigures{Task: "hello.py greets with \"Helo\". Fix the typo", Messages: 10, Steps: 4, Calls: 4, Outputs: 4}
	if diff := cmp.Diff(want, docFiguresOf(s, want)); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	type call struct {
		ID, Name string
		Action   toolcall.Action
		Path     string
		Command  string
		Step     int
		Paths    []string
		Text     string
	}
	var got []call
	for _, c := range s.Calls {
		action := c.Action
		if c.Name == "bash" {
			action = "" // what a command line does is Classify's business, not the reader's
		}
		got = append(got, call{c.ID, c.Name, action, c.Path, c.Command, c.Step, c.Output.paths, c.Output.Text})
	}
	wantCalls := []call{
		{"call_Rf3kQ9", "read_file", toolcall.ActionRead, "hello.py", "", 1, []string{"messages.3.content"}, "def main():\n    print(\"Helo, world\")\n\n\nif __name__ == \"__main__\":\n    main()\n"},
		{"call_Tb7nW2", "bash", "", "", "grep -rn Helo .", 1, []string{"messages.4.content.0.text", "messages.4.content.1.text"}, "./hello.py:2:    print(\"Helo, world\")\n./README.md:3:Prints Helo, world."},
		{"call_Xm4pL8", "edit", toolcall.ActionEdit, "hello.py", "", 2, []string{"messages.6.content"}, "Edited hello.py: 1 replacement."},
		{"call_Jd2sV6", "bash", "", "", "python hello.py", 3, []string{"messages.8.content"}, "Hello, world\n"},
	}
	if diff := cmp.Diff(wantCalls, got); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	docRoundTrip(t, s, raw, readOpenAI, func(i int, o *ToolOutput) bool { return i != 2 })
}

// TestOpenAIOnSWEAgentHistory reads the function-calling SWE-agent history as a
// plain chat-completions body: the same calls and results must come out.
func TestOpenAIOnSWEAgentHistory(t *testing.T) {
	data, err := os.ReadFile(docReal("swe-agent/marshmallow-1867.function-calling.traj"))
	if err != nil {
		t.Fatal(err)
	}
	var traj struct{ History json.RawMessage }
	if err := json.Unmarshal(data, &traj); err != nil {
		t.Fatal(err)
	}
	for _, body := range [][]byte{traj.History, []byte(`{"messages":` + string(traj.History) + `}`)} {
		if f, err := Detect("history", body); err != nil || f != FormatOpenAI {
			t.Errorf("Detect: %q, %v", f, err)
		}
		s, err := readOpenAI("history", body, Options{})
		if err != nil {
			t.Fatal(err)
		}
		docInvariants(t, s)
		want := docFigures{Task: "We're currently solving", Messages: 28, Steps: 13, Calls: 13, Outputs: 13}
		if diff := cmp.Diff(want, docFiguresOf(s, want)); diff != "" {
			t.Errorf("figures (-want +got):\n%s", diff)
		}
		docRoundTrip(t, s, body, readOpenAI, func(i int, o *ToolOutput) bool { return i%4 == 0 })
	}
}

func TestOpenAIShapes(t *testing.T) {
	// A legacy function_call answered by role "function", a tool message naming an
	// unknown call, numbers as ids, null content and an unknown role.
	doc := `[
 {"role":"user","content":"list files"},
 {"role":"assistant","content":null,"function_call":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},
 {"role":"function","name":"bash","content":"a.go\nb.go"},
 {"role":"assistant","content":null,"tool_calls":[{"id":7,"type":"function","function":{"name":"read","arguments":{"path":"a.go"}}}]},
 {"role":"tool","tool_call_id":7,"content":null},
 {"role":"tool","tool_call_id":"nope","content":"stray"},
 {"role":"critic","content":"?"}
]`
	s, err := readOpenAI("shapes", []byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	docInvariants(t, s)
	want := docFigures{Task: "list files", Messages: 6, Steps: 2, Calls: 2, Outputs: 3}
	if diff := cmp.Diff(want, docFiguresOf(s, want)); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	if o := s.Calls[0].Output; o == nil || o.Text != "a.go\nb.go" {
		t.Errorf("function_call result: %+v", o)
	}
	if c := s.Calls[1]; c.ID != "7" || string(c.Args) != `{"path":"a.go"}` || c.Output == nil || c.Output.Text != "" || c.Path != "a.go" {
		t.Errorf("numeric id call: id %q args %s path %q output %+v", c.ID, c.Args, c.Path, c.Output)
	}
	if len(s.Orphans) != 1 || s.Orphans[0].CallID != "nope" {
		t.Errorf("orphans: %+v", s.Orphans)
	}
	if len(s.Warnings) != 2 {
		t.Errorf("warnings: %q", s.Warnings)
	}
}

func TestChatMalformed(t *testing.T) {
	tests := []struct {
		name  string
		read  readFunc
		doc   string
		line  int
		field string
		msg   string
	}{
		{"truncated", readOpenAI, "[\n {\"role\":\"user\",\n  \"content\":\"hi", 3, "", "truncated"},
		{"syntax", readOpenAI, "[\n {\"role\":\"user\"}}\n]", 2, "", "invalid JSON"},
		{"invalid utf8", readOpenAI, "[\n{\"role\":\"user\",\"content\":\"a\xffb\"}]", 2, "", "invalid UTF-8"},
		{"role not string", readOpenAI, `[{"role":1,"content":"x"}]`, 0, "0.role", "not a string"},
		{"entry not object", readOpenAI, `[{"role":"user","content":"x"}, 5]`, 0, "1", "not a JSON object"},
		{"tool_calls not list", readOpenAI, `{"messages":[{"role":"assistant","tool_calls":{}}]}`, 0, "messages.0.tool_calls", "not a list"},
		{"call without name", readOpenAI, `[{"role":"assistant","tool_calls":[{"id":"a","function":{}}]}]`, 0, "0.tool_calls.0.function.name", "missing"},
		{"tool without id", readOpenAI, `[{"role":"tool","content":"x"}]`, 0, "0.tool_call_id", "names no call"},
		{"content object", readMiniSWEAgent, `{"info":{},"messages":[{"role":"user","content":{"a":1}}]}`, 0, "messages.0.content", "neither"},
		{"messages not list", readMiniSWEAgent, `{"info":{},"messages":"x"}`, 0, "messages", "not a list"},
		{"no history", readSWEAgent, `{"trajectory":[]}`, 0, "history", "missing"},
		{"scalar root", readOpenAI, `"text"`, 0, "", "expected a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.read(tt.name, []byte(tt.doc), Options{})
			docErr(t, err, tt.line, tt.field, tt.msg)
		})
	}
}

func TestChatLenient(t *testing.T) {
	doc := `[{"role":"user","content":"go"}, 5, {"role":"assistant","tool_calls":[{"id":"a","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}, {"role":"tool","content":"x"}, {"role":"tool","tool_call_id":"a","content":"ok"}]`
	s, err := readOpenAI("lenient", []byte(doc), Options{Lenient: true})
	if err != nil {
		t.Fatal(err)
	}
	want := docFigures{Task: "go", Messages: 3, Steps: 1, Calls: 1, Outputs: 1, Skipped: 2}
	if diff := cmp.Diff(want, docFiguresOf(s, want)); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	if len(s.Warnings) != 2 || !strings.Contains(s.Warnings[0], "field 1") {
		t.Errorf("warnings: %q", s.Warnings)
	}
	// Empty input and a list without messages.
	if _, err := Read("empty", []byte(" \n"), Options{Format: FormatOpenAI}); !errors.Is(err, ErrEmpty) {
		t.Errorf("blank input: %v", err)
	}
	if _, err := readOpenAI("none", []byte(`[]`), Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty list: %v", err)
	}
}

// TestDetectExclusive runs every detector of this family over every real session,
// our own sessions and small samples of the other formats: exactly the expected
// one (or none, for formats other readers own) must claim each.
func TestDetectExclusive(t *testing.T) {
	mine := map[Format]func([]byte) bool{
		FormatGemini: detectGemini, FormatOpenAI: detectOpenAI, FormatMiniSWEAgent: detectMiniSWEAgent,
		FormatSWEAgent: detectSWEAgent, FormatOpenHands: detectOpenHands, FormatCodex: detectCodex,
	}
	byDir := map[string]Format{"gemini-cli": FormatGemini, "mini-swe-agent": FormatMiniSWEAgent, "swe-agent": FormatSWEAgent,
		"openhands": FormatOpenHands, "claude-code": "", "pi": "", "codex": FormatCodex, "openai": FormatOpenAI}
	type sample struct {
		name string
		data []byte
		want Format
	}
	var samples []sample
	for _, root := range []string{docReal(""), docOwn("")} {
		for dir, want := range byDir {
			files, _ := filepath.Glob(filepath.Join(root, dir, "*"))
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				samples = append(samples, sample{f, data, want})
			}
		}
	}
	if len(samples) < 26 {
		t.Fatalf("only %d sample files found", len(samples))
	}
	samples = append(samples,
		sample{"claude line", []byte(`{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/x","sessionId":"s","version":"1.0","type":"user","message":{"role":"user","content":"hi"},"uuid":"u","timestamp":"t"}`), ""},
		sample{"pi header", []byte(`{"type":"session","id":"x","timestamp":"t","cwd":"/x"}` + "\n" + `{"type":"message","timestamp":"t","message":{"role":"user","content":"hi"}}`), ""},
		sample{"anthropic body", []byte(`{"model":"claude-sonnet-4-5","system":"be brief","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"a"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}`), ""},
		sample{"openai bare list", []byte(`[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`), FormatOpenAI},
		sample{"mini bare list", []byte(`[{"role":"system","content":"Reply with one ` + "```bash" + ` block."},{"role":"user","content":"fix it"}]`), FormatMiniSWEAgent},
		sample{"mini head cut in info", []byte(`{"info":{"mini_version":"1.15.0","config":{"x":"` + strings.Repeat("y", 100) + `"`), FormatMiniSWEAgent},
		sample{"swe head cut in trajectory", []byte(`{"trajectory":[{"action":"ls","observation":"a","response":"r"},{"action":"open`), FormatSWEAgent},
		sample{"codex legacy bare item", []byte(`{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}`), FormatCodex},
		sample{"codex cut session_meta", []byte(`{"timestamp":"t","type":"session_meta","payload":{"id":"x","base_instructions":{"text":"` + strings.Repeat("z", 200)), FormatCodex},
	)
	for _, sm := range samples {
		head := bytes.TrimLeft(sm.data, " \t\r\n")
		if len(head) > DetectBytes {
			head = head[:DetectBytes]
		}
		var got []Format
		for f, d := range mine {
			if d(head) {
				got = append(got, f)
			}
		}
		var want []Format
		if sm.want != "" {
			want = []Format{sm.want}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: claimed by (-want +got):\n%s", sm.name, diff)
		}
		if sm.want != "" && len(sm.data) > 1000 {
			if f, err := Detect(sm.name, sm.data); err != nil || f != sm.want {
				t.Errorf("%s: Detect gives %q, %v; want %q", sm.name, f, err, sm.want)
			}
		}
	}
}

func FuzzOpenAI(f *testing.F) {
	docSeeds(f, docOwn("openai/chat-completions.json"), docReal("mini-swe-agent/github_issue.traj.json"), docReal("swe-agent/pydicom__pydicom-1458.traj"))
	f.Add([]byte(`[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"bash","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":[{"type":"text","text":"y"}]}]`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":"` + "```bash\\nls\\n```" + `"},{"role":"user","content":"<returncode>1</returncode>"}]}`))
	f.Add([]byte(`{"history":[{"role":"assistant","action":"open a.py"},{"role":"user","content":"[File: a.py (3 lines total)]\n1:a"}],"trajectory":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		docFuzz(t, readOpenAI, data)
		docFuzz(t, readMiniSWEAgent, data)
		docFuzz(t, readSWEAgent, data)
	})
}
