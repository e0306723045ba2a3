package evidence

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestShapeOf: one name per rule, and names that meet several rules take the
// first (a path with a dot and a digit is a path; a dotted name with '_' is dotted).
func TestShapeOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		want NameShape
	}{
		{"daemon", ShapePlain},
		{"GitHub", ShapePlain},
		{"USER", ShapePlain},
		{"connection refused", ShapePhrase},
		{"see src/a.go", ShapePhrase},
		{"src/server.go", ShapePath},
		{"/Users", ShapePath},
		{`C:\tmp`, ShapePath},
		{"x/v1.2", ShapePath},
		{"server.go", ShapeDotted},
		{"os.path", ShapeDotted},
		{"file_2.txt", ShapeDotted},
		{"1.2.3", ShapeDotted},
		{"0x7f3a", ShapeDigits},
		{"e2e", ShapeDigits},
		{"parse_v2", ShapeDigits},
		{"read_file", ShapeCode},
		{"get-Foo", ShapeCode},
		{"foo-bar", ShapeOther},
		{"a:b", ShapeOther},
		{"@scope", ShapeOther},
	} {
		if got := ShapeOf(tc.name); got != tc.want {
			t.Errorf("ShapeOf(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	var names []string
	for s := NameShape(0); s <= NumShapes; s++ {
		names = append(names, s.String())
	}
	if d := cmp.Diff([]string{"plain", "phrase", "path", "dotted", "digits", "code", "other", "shape(7)"}, names); d != "" {
		t.Errorf("String (-want +got):\n%s", d)
	}
}

// TestLiveShapes follows the live names of two outputs by shape as the agent and
// the user write some of them and a later output carries one on.
func TestLiveShapes(t *testing.T) {
	tr := NewTracker()
	// "the", "tool" and "fails" are common; every other plain word is rare, so specific.
	tr.Background = &Background{Sessions: 10, MinShare: 0.5, Counts: map[string]int{"the": 10, "tool": 10, "fails": 10}}
	r1 := read("r1", "/x/a.go", 1, toolcall.Range{Start: 1, End: 50})
	c2 := &transcript.ToolCall{ID: "c2", Name: "bash", Args: []byte(`{"command":"ls"}`), Step: 3}
	var (
		plain, code, digits, dotted = int(ShapePlain), int(ShapeCode), int(ShapeDigits), int(ShapeDotted)
	)
	shapes := func(kv ...int) LiveShapes {
		var s LiveShapes
		for i := 0; i < len(kv); i += 2 {
			s[kv[i]] = kv[i+1]
		}
		return s
	}
	stages := []struct {
		msgs   []*transcript.Message
		r1, c2 LiveShapes
	}{
		{[]*transcript.Message{asst(1, "", r1), result(r1, "Zebulon quintessa read_file retry_42 main.go")},
			shapes(plain, 2, code, 1, digits, 1, dotted, 1), LiveShapes{}},
		{[]*transcript.Message{asst(2, "Zebulon first.")}, // the agent writes a plain name: not live any more
			shapes(plain, 1, code, 1, digits, 1, dotted, 1), LiveShapes{}},
		{[]*transcript.Message{asst(3, "", c2), result(c2, "the tool fails: quintessa")}, // c2 carries quintessa on
			shapes(code, 1, digits, 1, dotted, 1), shapes(plain, 1)},
		{[]*transcript.Message{{Role: transcript.RoleUser, Step: 4, Text: "And read_file, main.go?"}}, // the user's words pin them
			shapes(digits, 1), shapes(plain, 1)},
	}
	for i, st := range stages {
		addAll(t, tr, st.msgs...)
		if d := cmp.Diff(st.r1, tr.LiveShapes("r1")); d != "" {
			t.Errorf("stage %d: r1's live shapes (-want +got):\n%s", i, d)
		}
		if d := cmp.Diff(st.c2, tr.LiveShapes("c2")); d != "" {
			t.Errorf("stage %d: c2's live shapes (-want +got):\n%s", i, d)
		}
		checkLiveShapes(t, tr)
	}
	if got := tr.LiveShapes("nope"); got != (LiveShapes{}) {
		t.Errorf("unknown key: %v", got)
	}
}

// TestLiveShapesRecount: on real sessions, after every message, each output's
// live names by shape, kept up to date one name at a time, equal a count made
// from scratch over every name's entry, and add up to its live count.
func TestLiveShapesRecount(t *testing.T) {
	files := sessionfiles.Sample("../../shared")
	if len(files) == 0 {
		sessionfiles.Missing(t, "no shared sessions")
	}
	bg := &Background{Sessions: 10, MinShare: 0.3, Counts: map[string]int{"the": 10, "error": 10, "file": 10}}
	outputs := 0
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			continue
		}
		tr := NewTracker()
		tr.Background = bg
		for _, m := range s.Messages {
			if _, err := tr.Add(m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if t.Failed() {
				t.Fatalf("%s: at step %d", f, m.Step)
			}
			checkLiveShapes(t, tr)
		}
		outputs += len(tr.outs)
	}
	if outputs < 1000 {
		t.Errorf("only %d real outputs checked", outputs)
	}
}

// checkLiveShapes recounts every output's live names by shape from the name entries
// (a name is live for its carrier while it is specific and unpinned and the
// carrier is in context: no recorded compaction dropped it) and compares.
func checkLiveShapes(t *testing.T, tr *Tracker) {
	t.Helper()
	want := make([]LiveShapes, len(tr.outs))
	for i := range tr.infos {
		if in := &tr.infos[i]; in.carrier > 0 && in.spec && !in.pinned && !tr.outs[in.carrier-1].gone {
			want[in.carrier-1][in.shape]++
		}
	}
	for i, o := range tr.outs {
		got := tr.LiveShapes(o.key)
		live, _ := tr.Live(o.key)
		sum := 0
		for _, n := range got {
			sum += n
		}
		if got != want[i] || sum != live {
			t.Errorf("output %s: live shapes %v, recounted %v; sum %d, live %d", o.key, got, want[i], sum, live)
			return
		}
	}
}
