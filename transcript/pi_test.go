package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
)

const piCwd = "/Users/badlogic/workspaces/pi-mono"

var piWants = []rdrWant{
	{
		// 454 call ids, 448 answered: the other 6 never got a result (aborted turns).
		// meta: 2 compaction summaries and 3 user !commands.
		file:     "pi/before-compaction.jsonl",
		messages: 992, steps: 484, calls: 454, ids: 454, answered: 448, outputs: 448, unanswered: 6, meta: 5,
		taskPrefix: "alright, read @packages/coding-agent/src/main.ts", id: "ffae836b-9420-4060-ac13-7745215f90ff", cwd: piCwd,
		reads: map[string]rdrRead{
			"toolu_012yuiPP1VAfh196GXaAmT8D": {toolcall.ActionRead, piCwd + "/packages/coding-agent/src/main.ts", toolcall.Range{}},
			// No offset/limit, but pi cut the output at 50 KB: details.truncation.outputLines 1603.
			"toolu_018AGG1WjGWVfUR2Sibzkh2Q": {toolcall.ActionRead, piCwd + "/packages/coding-agent/src/tui/tui-renderer.ts", toolcall.Range{Start: 1, End: 1603}},
			"toolu_01KgRZiUs86jzrwZs41sAvEs": {toolcall.ActionRead, piCwd + "/packages/coding-agent/src/tui/tui-renderer.ts", toolcall.Range{Start: 1604, End: 0}},
			"toolu_01JnkJWQNesKqTZKpr9dLGAK": {toolcall.ActionRead, piCwd + "/packages/coding-agent/docs/refactor.md", toolcall.Range{Start: 1, End: 120}},
			"toolu_01EhazkZZAo27iRfeBhQMWey": {toolcall.ActionRead, piCwd + "/packages/coding-agent/docs/refactor.md", toolcall.Range{Start: 568, End: 647}},
		},
		errs: []string{"toolu_01Kae6sJBexjQUHEpDA9f5Uh", "toolu_01HgmTjFWJJt6P9bvygNxeKM"},
	},
	{
		// 391 ids, 373 answered; meta: the bare slash commands /mode, /them, /them, /the.
		file:     "pi/large-session.jsonl",
		messages: 914, steps: 453, calls: 391, ids: 391, answered: 373, outputs: 373, unanswered: 18, meta: 4,
		taskPrefix: "read packages/coding-agent/docs/theme.md in full", id: "d703a1a9-1b7b-4fb1-b512-c9738b1fe617", cwd: piCwd,
		reads: map[string]rdrRead{
			// A relative path, joined to the header's cwd.
			"toolu_01RKXPwxvd3CV7bnL2z9vuD1": {toolcall.ActionRead, piCwd + "/packages/coding-agent/src/tui/tui-renderer.ts", toolcall.Range{Start: 720, End: 769}},
		},
	},
	{
		// Line 440 holds two objects (an assistant message and a user message).
		file:     "pi/session.jsonl",
		messages: 455, steps: 220, calls: 189, ids: 189, answered: 189, outputs: 189, unanswered: 0, meta: 2,
		taskPrefix: "do you know how to create a custom tool?", id: "5fd1e58c-9635-410e-a644-133a96057c90", cwd: piCwd,
		reads: map[string]rdrRead{
			"toolu_01Eiija7gxqTyYUmbwqxVfUJ": {toolcall.ActionRead, "/opt/homebrew/lib/node_modules/@mariozechner/pi-coding-agent/README.md", toolcall.Range{}},
			"toolu_011GBFpRgJQYS5nAkRDmYTtH": {toolcall.ActionRead, piCwd + "/packages/coding-agent/docs/theme.md", toolcall.Range{Start: 1, End: 100}},
		},
		errs: []string{"toolu_01J62Lar5L2QjBjVrCz9TjCW"},
	},
}

// piResultIDs decodes each line of a pi file as a stream of objects and returns the
// toolCallId of every toolResult message.
func piResultIDs(data []byte) map[string]bool {
	out := map[string]bool{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		dec := json.NewDecoder(bytes.NewReader(line))
		for {
			var v struct {
				Message struct {
					Role       string `json:"role"`
					ToolCallID string `json:"toolCallId"`
				} `json:"message"`
			}
			if dec.Decode(&v) != nil {
				break
			}
			if v.Message.Role == "toolResult" {
				out[v.Message.ToolCallID] = true
			}
		}
	}
	return out
}

func TestPiRealSessions(t *testing.T) {
	for _, w := range piWants {
		t.Run(filepath.Base(w.file), func(t *testing.T) {
			s := rdrCheckReal(t, FormatPi, w, piResultIDs)
			if w.file != "pi/session.jsonl" {
				return
			}
			var at440 []Role
			for _, m := range s.Messages {
				if m.Line == 440 {
					at440 = append(at440, m.Role)
				}
			}
			if d := cmp.Diff([]Role{RoleAssistant, RoleUser}, at440); d != "" {
				t.Errorf("messages of line 440 (-want +got):\n%s", d)
			}
		})
	}
}

func TestPiRewriteRoundTrip(t *testing.T) {
	for _, f := range []string{"session.jsonl", "large-session.jsonl"} {
		t.Run(f, func(t *testing.T) {
			s, err := ReadFile(filepath.Join(rdrSessions, "pi", f), Options{})
			if err != nil {
				t.Fatal(err)
			}
			rdrRoundTrip(t, s, Options{}, true)
		})
	}
}

// ---- hand-made pi entries ----

const piHeader = `{"type":"session","version":3,"id":"sess-1","timestamp":"2026-01-01T00:00:00Z","cwd":"/w"}`

// piE builds a v3 entry; parent "" is null.
func piE(id, parent, body string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%s,"timestamp":"2026-01-01T00:00:00Z",%s}`, id, p, body)
}

func piUser(id, parent, text string) string {
	b, _ := json.Marshal(text)
	return piE(id, parent, `"message":{"role":"user","content":[{"type":"text","text":`+string(b)+`}]}`)
}

func piCall(id, parent string, calls ...string) string {
	var blocks []string
	for _, c := range calls {
		name, args, _ := strings.Cut(c, " ")
		callID, name, _ := strings.Cut(name, ":")
		blocks = append(blocks, fmt.Sprintf(`{"type":"toolCall","id":%q,"name":%q,"arguments":%s}`, callID, name, args))
	}
	return piE(id, parent, `"message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},`+strings.Join(blocks, ",")+`],"stopReason":"toolUse"}`)
}

func piSay(id, parent, text string) string {
	return piE(id, parent, `"message":{"role":"assistant","content":[{"type":"text","text":"`+text+`"}],"stopReason":"stop"}`)
}

func piRes(id, parent, callID, text string) string {
	b, _ := json.Marshal(text)
	return piE(id, parent, `"message":{"role":"toolResult","toolCallId":"`+callID+`","toolName":"bash","content":[{"type":"text","text":`+string(b)+`}],"isError":false}`)
}

// Branching with /tree: the entries after the branch point that the session left are
// dropped, whichever side is later in the file; the path's parallel results all stay.
func TestPiTree(t *testing.T) {
	prefix := []string{
		piHeader,
		piUser("e1", "", "write a parser"),
		piCall("e2", "e1", `c1:read {"path":"p.go"}`),
		piRes("e3", "e2", "c1", "package p"),
		piSay("e4", "e3", "read it"),
		piUser("e5", "e4", "edit it"), // branch A
		piCall("e6", "e5", `c2:edit {"path":"p.go","oldText":"a","newText":"b"}`),
		piRes("e7", "e6", "c2", "ok"),
		`{"type":"branch_summary","id":"e8","parentId":"e4","timestamp":"2026-01-01T00:00:00Z","fromId":"e7","summary":"tried an edit"}`, // branch B
		piUser("e9", "e8", "write a test instead"),
		piCall("e10", "e9", `c3:bash {"command":"go test"}`, `c4:bash {"command":"go vet"}`),
		piRes("e11", "e10", "c3", "ok"),
		piRes("e12", "e11", "c4", "clean"),
		`{"type":"label","id":"e13","parentId":"e12","timestamp":"2026-01-01T00:00:00Z","targetId":"e9","label":"tests"}`,
	}
	t.Run("later branch is the leaf", func(t *testing.T) {
		s, err := readPi("tree.jsonl", ccFile(append(prefix, piSay("e14", "e13", "done"))...), Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := []rdrShape{
			{Role: RoleUser, Line: 2, Text: "write a parser"},
			{Role: RoleAssistant, Line: 3, Calls: []string{"c1"}},
			{Role: RoleTool, Line: 4, Outs: []string{"c1=package p"}},
			{Role: RoleAssistant, Line: 5, Text: "read it"},
			{Role: RoleUser, Line: 9, Text: "tried an edit", Meta: true},
			{Role: RoleUser, Line: 10, Text: "write a test instead"},
			{Role: RoleAssistant, Line: 11, Calls: []string{"c3", "c4"}},
			{Role: RoleTool, Line: 12, Outs: []string{"c3=ok"}},
			{Role: RoleTool, Line: 13, Outs: []string{"c4=clean"}},
			{Role: RoleAssistant, Line: 15, Text: "done"},
		}
		if d := cmp.Diff(want, rdrShapes(s)); d != "" {
			t.Errorf("messages (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"3 entries on abandoned branches were left out"}, s.Warnings); d != "" {
			t.Errorf("warnings (-want +got):\n%s", d)
		}
		if s.ID != "sess-1" || s.Cwd != "/w" || s.Calls[0].Path != "/w/p.go" {
			t.Errorf("id %q cwd %q path %q", s.ID, s.Cwd, s.Calls[0].Path)
		}
	})
	t.Run("session went back to the earlier branch", func(t *testing.T) {
		s, err := readPi("tree.jsonl", ccFile(append(prefix, piUser("e14", "e7", "no, keep the edit"))...), Options{})
		if err != nil {
			t.Fatal(err)
		}
		var lines []int
		for _, m := range s.Messages {
			lines = append(lines, m.Line)
		}
		if d := cmp.Diff([]int{2, 3, 4, 5, 6, 7, 8, 15}, lines); d != "" {
			t.Errorf("kept lines (-want +got):\n%s", d)
		}
	})
	t.Run("reset before the first entry", func(t *testing.T) {
		data := ccFile(piHeader, piUser("e1", "", "first try"), piSay("e2", "e1", "ok"), piUser("e3", "", "second try"), piSay("e4", "e3", "sure"))
		s, err := readPi("reset.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"second try", "sure"}, []string{s.Messages[0].Text, s.Messages[1].Text}); d != "" || len(s.Messages) != 2 {
			t.Errorf("messages (-want +got):\n%s", d)
		}
	})
	t.Run("cycle", func(t *testing.T) {
		data := ccFile(piHeader, piUser("e1", "e2", "a"), piSay("e2", "e1", "b"))
		s, err := readPi("cycle.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Messages) != 2 || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "cycle") {
			t.Errorf("messages %d, warnings %q", len(s.Messages), s.Warnings)
		}
	})
}

// Other message kinds: a user !command is a Meta user message (excluded ones are
// skipped), extension and summary messages are Meta, a compaction entry adds its
// summary; a bare slash command is not the task.
func TestPiMessageKinds(t *testing.T) {
	data := ccFile(
		`{"type":"session","id":"s","timestamp":"2026-01-01T00:00:00Z","cwd":"/w"}`,
		`{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":[{"type":"text","text":"/model"}]}}`,
		`{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":{"role":"bashExecution","command":"ls","output":"a\nb\n","exitCode":0,"cancelled":false,"truncated":false}}`,
		`{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":{"role":"bashExecution","command":"make","output":"","exitCode":2,"cancelled":false,"truncated":false}}`,
		`{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":{"role":"bashExecution","command":"secret","output":"x","exitCode":0,"excludeFromContext":true}}`,
		`{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"fix the build"}}`,
		`{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":{"role":"custom","customType":"ext","content":"injected","display":true}}`,
		`{"type":"compaction","timestamp":"2026-01-01T00:00:00Z","summary":"## Goal\nfix the build","firstKeptEntryIndex":3,"tokensBefore":1000}`,
		`{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":{"role":"compactionSummary","summary":"earlier work","tokensBefore":5}}`,
		`{"type":"custom_message","timestamp":"2026-01-01T00:00:00Z","customType":"ext","content":[{"type":"text","text":"note"}],"display":false}`,
		`{"type":"model_change","timestamp":"2026-01-01T00:00:00Z","provider":"anthropic","modelId":"x"}`,
		`{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":[],"stopReason":"aborted"}}`,
	)
	s, err := readPi("kinds.jsonl", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rdrShape{
		{Role: RoleUser, Line: 2, Text: "/model", Meta: true},
		{Role: RoleUser, Line: 3, Text: "Ran `ls`\n```\na\nb\n```", Meta: true},
		{Role: RoleUser, Line: 4, Text: "Ran `make`\n(no output)\n\nCommand exited with code 2", Meta: true},
		{Role: RoleUser, Line: 6, Text: "fix the build"},
		{Role: RoleUser, Line: 7, Text: "injected", Meta: true},
		{Role: RoleUser, Line: 8, Text: "## Goal\nfix the build", Meta: true},
		{Role: RoleUser, Line: 9, Text: "earlier work", Meta: true},
		{Role: RoleUser, Line: 10, Text: "note", Meta: true},
		{Role: RoleAssistant, Line: 12},
	}
	if d := cmp.Diff(want, rdrShapes(s)); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	if s.Task != "fix the build" || s.Steps() != 1 {
		t.Errorf("task %q, steps %d", s.Task, s.Steps())
	}
}

// Two objects on one line are two units: a stub in the second leaves the first and
// every other byte alone.
func TestPiTwoObjectsOnALine(t *testing.T) {
	data := []byte(piHeader + "\n" +
		piUser("e1", "", "check") + "\n" +
		piCall("e2", "e1", `c1:bash {"command":"a"}`, `c2:bash {"command":"b"}`) + "\n" +
		piRes("e3", "e2", "c1", "out-a") + "  " + piRes("e4", "e3", "c2", "out-b") + "\n" +
		piSay("e5", "e4", "ok") + "\n")
	s, err := readPi("two.jsonl", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"c1=out-a", "c2=out-b"}, append(rdrShapes(s)[2].Outs, rdrShapes(s)[3].Outs...)); d != "" {
		t.Fatalf("outputs (-want +got):\n%s", d)
	}
	if s.Messages[2].Line != 4 || s.Messages[3].Line != 4 || len(s.units) != 2 {
		t.Errorf("lines %d,%d, units %d", s.Messages[2].Line, s.Messages[3].Line, len(s.units))
	}
	out, err := s.Rewrite(map[string]string{"c2": "[pruned]"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(data), `"text":"out-b"`, `"text":"[pruned]"`, 1)
	if string(out) != want {
		t.Errorf("rewritten:\n%s\nwant:\n%s", out, want)
	}
	rdrRoundTrip(t, s, Options{}, true)
}

func TestPiBadInput(t *testing.T) {
	good := []string{
		piHeader,
		piUser("e1", "", "list"),
		piCall("e2", "e1", `c1:bash {"command":"ls"}`),
		piRes("e3", "e2", "c1", "a.go"),
	}
	tests := []struct {
		name     string
		data     []byte
		line     int
		field    string
		msgPart  string
		skipped  int
		messages int
		warn     string // "" means "line N: skipped"
	}{
		{"truncated last line", []byte(strings.Join(good, "\n") + "\n" + piSay("e4", "e3", "done")[:50]), 5, "", "unexpected end", 1, 3, ""},
		{"line is a JSON array", ccFile(good[0], good[1], `[{"type":"message"}]`, good[2], good[3]), 3, "", "found a JSON array", 1, 3, ""},
		{"garbage after an object", ccFile(good[0], good[1], good[2]+` }`, good[3]), 3, "", "after the first object", 1, 3, ""},
		{"no header", ccFile(good[1], good[2], good[3]), 1, "type", "session header", 0, 3, "line 1: the first entry is not a session header"},
		{"message without role", ccFile(good[0], good[1], piE("e2", "e1", `"message":{"content":[]}`), good[3]), 3, "message.role", "without a role", 1, 2, ""},
		{"toolResult without toolCallId", ccFile(good[0], good[1], good[2], piE("e3", "e2", `"message":{"role":"toolResult","content":[]}`)), 4, "message.toolCallId", "without a toolCallId", 1, 2, ""},
		{"toolCall without id", ccFile(good[0], good[1], piE("e2", "e1", `"message":{"role":"assistant","content":[{"type":"toolCall","name":"x"}]}`), good[3]), 3, "message.content.0.id", "without an id", 1, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readPi("bad.jsonl", tt.data, Options{})
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("strict error = %v; want *ParseError", err)
			}
			if pe.Line != tt.line || pe.Field != tt.field || !strings.Contains(pe.Msg, tt.msgPart) {
				t.Errorf("error = %+v; want line %d field %q msg ~%q", *pe, tt.line, tt.field, tt.msgPart)
			}
			s, err := readPi("bad.jsonl", tt.data, Options{Lenient: true})
			if err != nil {
				t.Fatal(err)
			}
			if s.Skipped != tt.skipped || len(s.Messages) != tt.messages {
				t.Errorf("lenient: skipped %d, messages %d; want %d, %d (warnings %q)", s.Skipped, len(s.Messages), tt.skipped, tt.messages, s.Warnings)
			}
			warn := tt.warn
			if warn == "" {
				warn = fmt.Sprintf("line %d: skipped", tt.line)
			}
			if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, warn) }) {
				t.Errorf("warnings %q lack %q", s.Warnings, warn)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		for _, data := range [][]byte{nil, []byte(" \n\n"), []byte(piHeader + "\n")} {
			if _, err := readPi("e.jsonl", data, Options{}); !errors.Is(err, ErrEmpty) {
				t.Errorf("%q: err = %v; want ErrEmpty", data, err)
			}
		}
	})
	t.Run("invalid UTF-8, duplicate ids, result before call", func(t *testing.T) {
		data := ccFile(
			piHeader,
			piUser("e1", "", "go"),
			piRes("e2", "e1", "c0", "early"),
			piCall("e3", "e2", `c0:bash {"command":"x"}`, `c1:bash {"command":"y"}`),
			piE("e4", "e3", "\"message\":{\"role\":\"toolResult\",\"toolCallId\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"bin \xff\"}],\"isError\":true}"),
			piCall("e5", "e4", `c1:bash {"command":"y"}`),
			piRes("e6", "e5", "c1", "again"),
		)
		s, err := readPi("mix.jsonl", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var pairs []string
		for _, c := range s.Calls {
			k := "-"
			if c.Output != nil {
				k = fmt.Sprintf("%s:%q:%v", c.Output.Key, c.Output.Text, c.Output.IsError)
			}
			pairs = append(pairs, c.ID+"->"+k)
		}
		want := []string{`c0->-`, "c1->c1:\"bin \uFFFD\":true", `c1->c1#2:"again":false`}
		if d := cmp.Diff(want, pairs); d != "" {
			t.Errorf("pairs (-want +got):\n%s", d)
		}
		wantWarn := []string{`line 3: tool result for call id "c0" has no earlier call`, `line 6: call id "c1" used again`}
		if d := cmp.Diff(wantWarn, s.Warnings); d != "" {
			t.Errorf("warnings (-want +got):\n%s", d)
		}
		if len(s.Orphans) != 1 || s.Orphans[0].Key != "c0" {
			t.Errorf("orphans %v", s.Orphans)
		}
	})
}

// FuzzPi: see FuzzClaude.
func FuzzPi(f *testing.F) {
	rdrSeedFromFiles(f, filepath.Join(rdrSessions, "pi", "*.jsonl"), 12)
	f.Add(ccFile(piHeader, piUser("e1", "", "x"), piCall("e2", "e1", `c1:read {"path":"a","offset":2,"limit":3}`), piRes("e3", "e2", "c1", "y")+piRes("e4", "e3", "c1", "z")))
	f.Add(ccFile(piHeader, piUser("e1", "e2", "a"), piSay("e2", "e1", "b"), piUser("e3", "", "c")))
	f.Add([]byte(`{"type":"session","id":"x"}{"type":"message","message":{"role":"toolResult","toolCallId":"q","content":"\xff"}}` + "\n[1]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rdrFuzzOne(t, data, readPi)
	})
}
