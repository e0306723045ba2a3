package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// sup and dup build expected decisions; in the hand-made sessions an output's key is
// its call id.
func sup(key, by string, step int, path string) Death {
	return Death{OutputKey: key, Rule: RuleSuperseded, By: by, ByOutput: by, Step: step, Path: path}
}

func dup(key, by string, step int) Death {
	return Death{OutputKey: key, Rule: RuleDuplicate, By: by, ByOutput: by, Step: step}
}

func sortDeaths(ds []Death) []Death {
	out := append([]Death(nil), ds...)
	sort.Slice(out, func(i, j int) bool { return out[i].OutputKey < out[j].OutputKey })
	return out
}

// TestTestdata runs Analyze over the hand-made sessions in testdata/rules, one per
// clause of docs/DESIGN.md step 3 (each file's comment-free scenario is described here).
func TestTestdata(t *testing.T) {
	tests := []struct {
		file string
		want []Death
	}{
		// Read, successful Edit, full Read: the first read is dead.
		{"superseded_full_reread.json", []Death{sup("r1", "r2", 3, "/w/a.py")}},
		// Full read r1, edit, read of 200-250 (r2): r1 stays alive; edit, read of
		// 190-260 (r3) covers r2, not r1.
		{"partial_ranges.json", []Death{sup("r2", "r3", 5, "/w/long.txt")}},
		// Four failed edits (Claude "String to replace not found", "old_string not
		// found", sed with exit code 1, pi "Could not find the exact text"), then a
		// re-read: nothing is superseded.
		{"failed_edits.json", nil},
		// A Write with the whole content supersedes the full and the partial read of
		// the same file, not the read of another file.
		{"write_supersedes.json", []Death{sup("r1", "w1", 4, "/w/a.py"), sup("r2", "w1", 4, "/w/a.py")}},
		// Shell reads (cat, sed -n, head, tail, nl -ba | sed -n) and shell edits
		// (sed -i, heredoc write, >>, apply_patch, sed -i && cat in one line).
		{"shell_ops.json", []Death{
			sup("h1", "w1", 7, "/w/b.txt"), sup("n1", "w1", 7, "/w/b.txt"), sup("s1", "s3", 12, "/w/a.py"),
			sup("s2", "s3", 12, "/w/a.py"), sup("s3", "s4", 13, "/w/a.py"), sup("t1", "w1", 7, "/w/b.txt"),
			sup("t2", "t3", 10, "/w/b.txt"),
		}},
		// C:\w\a.py, /c/w/a.py and `cd C:/w && cat ./sub/../a.py` are one file;
		// src/x.py, ./src/x.py and src/../src/x.py are one file.
		{"paths.json", []Death{sup("r1", "r2", 3, "/c/w/a.py"), sup("r3", "r4", 6, "src/x.py")}},
		// A re-read answered with an "unchanged since last read" stub after an edit
		// is no content in context: the first read stays alive.
		{"unchanged_stub.json", nil},
		// ls twice with the same output; Grep with the same arguments in another key
		// order; git status A-B-A; ls -a with the same output but other arguments.
		{"duplicates.json", []Death{dup("d1", "d2", 4), dup("g1", "g2", 5), dup("s1", "s3", 7)}},
		// Read and Edit in one step are simultaneous (r2 does not kill r1); a cat of
		// two files dies only when both are superseded, and a head -n 20 re-read does
		// not cover a whole-file read.
		{"parallel_and_multi.json", []Death{sup("m1", "r5", 8, "/w/b.txt"), sup("r1", "r3", 5, "/w/a.py"), sup("r2", "r3", 5, "/w/a.py")}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s, err := transcript.ReadFile(filepath.Join("..", "testdata", "rules", tt.file), transcript.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := sortDeaths(Analyze(s))
			if diff := cmp.Diff(sortDeaths(tt.want), got); diff != "" {
				t.Errorf("deaths (-want +got):\n%s", diff)
			}
			checkInvariants(t, s, Analyze(s))
		})
	}
}

// TestIncremental checks that Add reports each death once, at the message that
// caused it, that re-adding a message does nothing, and that the result equals
// Analyze.
func TestIncremental(t *testing.T) {
	s, err := transcript.ReadFile(filepath.Join("..", "testdata", "rules", "shell_ops.json"), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := NewIndex()
	var got []Death
	for _, m := range s.Messages {
		ds := x.Add(m)
		for _, d := range ds {
			// the output that decided it is in this very message
			found := false
			for _, o := range m.Outputs {
				found = found || o.Key == d.ByOutput
			}
			if !found {
				t.Errorf("death %+v reported by message %d, which does not hold %s", d, m.Index, d.ByOutput)
			}
		}
		got = append(got, ds...)
		if again := x.Add(m); again != nil {
			t.Errorf("message %d added twice reported %v", m.Index, again)
		}
		cp := *m // a rebuilt copy of the same message (a re-sent history)
		if again := x.Add(&cp); again != nil {
			t.Errorf("copy of message %d reported %v", m.Index, again)
		}
	}
	if diff := cmp.Diff(Analyze(s), got); diff != "" {
		t.Errorf("incremental vs Analyze (-want +got):\n%s", diff)
	}
	dead := map[string]Death{}
	for _, d := range got {
		dead[d.OutputKey] = d
	}
	if d, ok := dead["t2"]; !ok || d.By != "t3" {
		t.Errorf("t2's death = %+v, %v; want by t3", d, ok)
	}
	if _, ok := dead["t3"]; ok {
		t.Errorf("t3 reported dead, want alive")
	}
}

// ev is one tool call and its result in a session built in Go.
type ev struct {
	id, name string
	args     map[string]any
	out      string
	isErr    bool
	parallel bool // same assistant message (step) as the previous call
}

// build assembles a session with the given cwd the way the readers do: one assistant
// message per step, one tool message per result, calls classified against cwd.
func build(t *testing.T, cwd string, evs ...ev) *transcript.Session {
	t.Helper()
	s := &transcript.Session{Cwd: cwd}
	step := 0
	var last *transcript.Message
	for _, e := range evs {
		raw, err := json.Marshal(e.args)
		if err != nil {
			t.Fatal(err)
		}
		if !e.parallel || last == nil {
			step++
			last = &transcript.Message{Index: len(s.Messages), Step: step, Role: transcript.RoleAssistant}
			s.Messages = append(s.Messages, last)
		}
		c := &transcript.ToolCall{ID: e.id, Name: e.name, Args: raw, Message: last.Index, Step: step}
		c.Classify(cwd)
		last.Calls = append(last.Calls, c)
		s.Calls = append(s.Calls, c)
		m := &transcript.Message{Index: len(s.Messages), Step: step, Role: transcript.RoleTool}
		o := &transcript.ToolOutput{Key: e.id, CallID: e.id, Call: c, Text: e.out, IsError: e.isErr,
			Message: m.Index, Step: step, Hash: transcript.TextHash(e.out)}
		c.Output = o
		m.Outputs = []*transcript.ToolOutput{o}
		s.Messages = append(s.Messages, m)
	}
	return s
}

// TestBuiltSessions covers clauses that need a session cwd or structured flags the
// chat format cannot carry: relative paths against cwd, Codex workdir, Gemini
// dir_path, the reader's IsError, orphan outputs, pi and Gemini tool names.
func TestBuiltSessions(t *testing.T) {
	src := "package a\n\nfunc A() {}\n"
	tests := []struct {
		name string
		cwd  string
		evs  []ev
		want []Death
	}{
		{"relative vs cwd and cd", "/repo", []ev{
			{id: "r1", name: "Read", args: map[string]any{"file_path": "src/a.go"}, out: src},
			{id: "e1", name: "Edit", args: map[string]any{"file_path": "/repo/src/a.go", "old_string": "A", "new_string": "B"}, out: "ok"},
			{id: "r2", name: "Bash", args: map[string]any{"command": "cd src && cat a.go"}, out: src},
		}, []Death{sup("r1", "r2", 3, "/repo/src/a.go")}},
		{"codex workdir and apply_patch", "/repo", []ev{
			{id: "r1", name: "exec_command", args: map[string]any{"cmd": "nl -ba a.go", "workdir": "/repo/src"}, out: src},
			{id: "p1", name: "apply_patch", args: map[string]any{"input": "*** Begin Patch\n*** Update File: src/a.go\n@@\n-x\n+y\n*** End Patch"}, out: "Success."},
			{id: "r2", name: "shell", args: map[string]any{"command": []any{"bash", "-lc", "sed -n '1,400p' src/a.go"}, "workdir": "/repo"}, out: src},
			{id: "r3", name: "shell", args: map[string]any{"command": []any{"bash", "-lc", "cat a.go"}, "workdir": "/repo/src"}, out: src},
		}, []Death{sup("r1", "r3", 4, "/repo/src/a.go")}},
		{"gemini dir_path and 0-based offset", "/home/u", []ev{
			{id: "r1", name: "read_file", args: map[string]any{"file_path": "proj/a.go", "offset": 0, "limit": 10}, out: src},
			{id: "e1", name: "replace", args: map[string]any{"file_path": "/home/u/proj/a.go", "old_string": "A", "new_string": "B"}, out: "Successfully modified file: /home/u/proj/a.go (1 replacements)."},
			{id: "r2", name: "run_shell_command", args: map[string]any{"command": "head -n 10 a.go", "dir_path": "proj"}, out: src},
		}, []Death{sup("r1", "r2", 3, "/home/u/proj/a.go")}},
		{"error flag on the edit", "/repo", []ev{
			{id: "r1", name: "read", args: map[string]any{"path": "a.go"}, out: src},
			{id: "e1", name: "edit", args: map[string]any{"path": "a.go", "oldText": "A", "newText": "B"}, out: "Replaced.", isErr: true},
			{id: "r2", name: "read", args: map[string]any{"path": "a.go", "offset": 1}, out: src},
		}, nil},
		{"error flag on the re-read", "/repo", []ev{
			{id: "r1", name: "read", args: map[string]any{"path": "a.go"}, out: src},
			{id: "e1", name: "edit", args: map[string]any{"path": "a.go", "oldText": "A", "newText": "B"}, out: "Successfully replaced text in a.go."},
			{id: "r2", name: "read", args: map[string]any{"path": "a.go"}, out: "ENOENT: no such file or directory", isErr: true},
		}, nil},
		{"truncated re-read covers only what it shows", "/repo", []ev{
			{id: "r1", name: "read", args: map[string]any{"path": "big.ts"}, out: "x\n"},
			{id: "e1", name: "edit", args: map[string]any{"path": "big.ts", "oldText": "x", "newText": "y"}, out: "Successfully replaced text in big.ts."},
			{id: "r2", name: "read", args: map[string]any{"path": "big.ts"}, out: "y\n\n[Showing lines 1-1603 of 2377 (50.0KB limit). Use offset=1604 to continue]"},
			{id: "r3", name: "read", args: map[string]any{"path": "big.ts", "offset": 1700, "limit": 10}, out: "z\n"},
			{id: "e2", name: "edit", args: map[string]any{"path": "big.ts", "oldText": "y", "newText": "w"}, out: "Successfully replaced text in big.ts."},
			{id: "r4", name: "read", args: map[string]any{"path": "big.ts", "offset": 1}, out: "w\n\n[Showing lines 1-1603 of 2377 (50.0KB limit). Use offset=1604 to continue]"},
		}, []Death{sup("r2", "r4", 6, "/repo/big.ts")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, tt.cwd, tt.evs...)
			got := sortDeaths(Analyze(s))
			if diff := cmp.Diff(sortDeaths(tt.want), got); diff != "" {
				t.Errorf("deaths (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOrphansAndNil checks that outputs without a call and nil messages are skipped.
func TestOrphansAndNil(t *testing.T) {
	x := NewIndex()
	if got := x.Add(nil); got != nil {
		t.Errorf("Add(nil) = %v", got)
	}
	o := &transcript.ToolOutput{Key: "x", CallID: "x", Text: "a", Hash: transcript.TextHash("a")}
	m := &transcript.Message{Role: transcript.RoleTool, Outputs: []*transcript.ToolOutput{o}}
	if got := x.Add(m); got != nil {
		t.Errorf("orphan produced %v", got)
	}
	m2 := &transcript.Message{Index: 1, Role: transcript.RoleTool, Outputs: []*transcript.ToolOutput{{Key: "x#2", CallID: "x", Text: "a", Hash: o.Hash}}}
	if got := x.Add(m2); got != nil {
		t.Errorf("second orphan produced %v", got)
	}
}

// checkInvariants asserts what must hold for any session: every dead output and
// every deciding call exist, the deciding output comes after the dead one (a later
// message, or a later block of the same message), a superseding call is at a later
// step, and no output dies twice.
func checkInvariants(t *testing.T, s *transcript.Session, ds []Death) {
	t.Helper()
	outs := map[string]*transcript.ToolOutput{}
	for _, o := range s.Outputs() {
		outs[o.Key] = o
	}
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.OutputKey] {
			t.Errorf("%s dead twice", d.OutputKey)
		}
		seen[d.OutputKey] = true
		dead, by := outs[d.OutputKey], outs[d.ByOutput]
		if dead == nil || by == nil || by.Call == nil || by.Call.ID != d.By {
			t.Errorf("death %+v names unknown outputs or calls", d)
			continue
		}
		if by.Message < dead.Message || by.Message == dead.Message && by.Block <= dead.Block {
			t.Errorf("death %+v: deciding output (message %d block %d) is not after the dead one (message %d block %d)",
				d, by.Message, by.Block, dead.Message, dead.Block)
		}
		if d.Step != by.Call.Step {
			t.Errorf("death %+v: step %d, deciding call at step %d", d, d.Step, by.Call.Step)
		}
		if d.Rule == RuleSuperseded && by.Call.Step <= dead.Step {
			t.Errorf("death %+v: superseded by a call at step %d, not after step %d", d, by.Call.Step, dead.Step)
		}
		if d.Rule == RuleDuplicate && (StripAnnotations(by.Text) != StripAnnotations(dead.Text) || by.Call.Name != dead.Call.Name) {
			t.Errorf("death %+v: duplicate of a different output or tool", d)
		}
	}
}

const sessionsDir = "../../shared/sessions"

// TestRealSessions runs Analyze over every real session and checks the invariants.
func TestRealSessions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(sessionsDir, "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skipf("no sessions under %s", sessionsDir)
	}
	for _, f := range files {
		if strings.Contains(f, "LICENSES") {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
			if errors.Is(err, transcript.ErrUnknownFormat) {
				t.Skipf("no registered reader recognises %s yet: %v", f, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, s, Analyze(s))
		})
	}
}

// TestRealCounts pins the decisions on real sessions, as (dead output's step,
// deciding step) pairs. The figures were computed independently by Python models of
// the two rules: for mini-swe-agent, regexes over the bash blocks of the trajectory
// JSON (sed -n 'a,bp', cat f, head/tail -n N, cat -A f | sed -n, sed -i chains,
// cat X >> f, cat <<'EOF' > f, rm; returncode 0 = success; duplicates = identical
// command and observation text); for pi, the read/edit/write tool arguments (1-based
// offset, limit, "Showing lines" notes), isError, and bash sed -n/head/cat, with
// duplicates = same tool, same sorted-key arguments, same text. Both agreed exactly
// with these lists.
func TestRealCounts(t *testing.T) {
	type pair struct{ Dead, By int }
	tests := []struct {
		file string
		sup  []pair
		dup  []pair
	}{
		{"mini-swe-agent/github_issue.traj.json", []pair{{4, 6}, {6, 9}}, nil},
		{"mini-swe-agent/sympy__sympy-20438.traj.json", []pair{{18, 39}, {34, 40}, {39, 44}, {40, 58}}, nil},
		{"mini-swe-agent/django__django-16560.traj.json",
			[]pair{{11, 99}, {14, 96}, {16, 51}, {17, 51}, {44, 77}, {48, 51}, {51, 55}, {52, 55}, {53, 55}, {56, 61},
				{57, 61}, {85, 87}, {89, 100}, {91, 100}, {92, 100}, {107, 109}, {109, 112}, {112, 114}, {119, 122},
				{122, 129}, {123, 129}, {127, 129}, {136, 138}},
			[]pair{{7, 90}, {25, 137}, {31, 60}, {98, 115}, {102, 106}, {103, 107}, {118, 119}}},
		{"pi/session.jsonl", []pair{{46, 47}, {165, 175}}, []pair{{9, 46}, {9, 67}, {9, 153}, {68, 171}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f := filepath.Join(sessionsDir, tt.file)
			if _, err := os.Stat(f); err != nil {
				t.Skipf("session not available: %v", err)
			}
			s, err := transcript.ReadFile(f, transcript.Options{})
			if err != nil {
				t.Fatal(err)
			}
			outs := map[string]*transcript.ToolOutput{}
			for _, o := range s.Outputs() {
				outs[o.Key] = o
			}
			var gotSup, gotDup []pair
			for _, d := range Analyze(s) {
				p := pair{outs[d.OutputKey].Step, d.Step}
				if d.Rule == RuleSuperseded {
					gotSup = append(gotSup, p)
				} else {
					gotDup = append(gotDup, p)
				}
			}
			less := func(ps []pair) func(i, j int) bool {
				return func(i, j int) bool { return ps[i].Dead < ps[j].Dead }
			}
			sort.Slice(gotSup, less(gotSup))
			sort.Slice(gotDup, less(gotDup))
			if diff := cmp.Diff(tt.sup, gotSup); diff != "" {
				t.Errorf("superseded (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.dup, gotDup); diff != "" {
				t.Errorf("duplicates (-want +got):\n%s", diff)
			}
		})
	}
}

// synthetic returns n steps of a session cycling over 50 files: read, edit, re-read.
func synthetic(n int) []*transcript.Message {
	var msgs []*transcript.Message
	for i := 1; i <= n; i++ {
		p := fmt.Sprintf("/w/f%d.go", i%50)
		var name string
		var args map[string]any
		switch i % 3 {
		case 0:
			name, args = "Read", map[string]any{"file_path": p}
		case 1:
			name, args = "Edit", map[string]any{"file_path": p, "old_string": "a", "new_string": "b"}
		default:
			name, args = "Bash", map[string]any{"command": "sed -n '1,40p' " + p}
		}
		raw, _ := json.Marshal(args)
		id := fmt.Sprintf("c%d", i)
		c := &transcript.ToolCall{ID: id, Name: name, Args: raw, Step: i, Message: 2 * (i - 1)}
		c.Classify("")
		text := fmt.Sprintf("content %d of %s", i, p)
		o := &transcript.ToolOutput{Key: id, CallID: id, Call: c, Text: text, Hash: transcript.TextHash(text), Step: i, Message: 2*i - 1}
		c.Output = o
		msgs = append(msgs,
			&transcript.Message{Index: 2 * (i - 1), Step: i, Role: transcript.RoleAssistant, Calls: []*transcript.ToolCall{c}},
			&transcript.Message{Index: 2*i - 1, Step: i, Role: transcript.RoleTool, Outputs: []*transcript.ToolOutput{o}})
	}
	return msgs
}

// BenchmarkAdd measures Add per message after a long history: the cost must not
// grow with the session's length (compare the history=1000 and history=20000
// results, ns per added message).
func BenchmarkAdd(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			msgs := synthetic(n + b.N)
			x := NewIndex()
			for _, m := range msgs[:2*n] {
				x.Add(m)
			}
			tail := msgs[2*n:]
			runtime.GC()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x.Add(tail[2*i])
				x.Add(tail[2*i+1])
			}
		})
	}
}
