package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// realPair is a testdata/annotations file: two outputs of the same call, as the
// agent sent them to its model in an end-to-end run with the real CLI.
type realPair struct {
	Agent     string          `json:"agent"`
	Version   string          `json:"version"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Outputs   []string        `json:"outputs"`
}

// TestAnnotationsOnRealText checks every entry of the table on the real text it
// names: the two outputs differ, each holds the annotation, they are equal once it
// is removed, and the duplicate rule kills the first.
func TestAnnotationsOnRealText(t *testing.T) {
	for _, a := range Annotations {
		t.Run(a.Agent+" "+a.Marker, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", a.Source))
			if err != nil {
				t.Fatal(err)
			}
			var p realPair
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Outputs) != 2 || p.Outputs[0] == p.Outputs[1] {
				t.Fatalf("%s: want two outputs that differ", a.Source)
			}
			for i, o := range p.Outputs {
				if !a.Re.MatchString(o) {
					t.Errorf("output %d does not hold the annotation: %q", i, o[:min(len(o), 200)])
				}
			}
			s0, s1 := StripAnnotations(p.Outputs[0]), StripAnnotations(p.Outputs[1])
			if s0 != s1 {
				t.Fatalf("stripped outputs differ:\n%q\n%q", s0[max(0, len(s0)-200):], s1[max(0, len(s1)-200):])
			}
			if strings.Contains(s0, a.Marker) || len(s0) >= len(p.Outputs[0]) {
				t.Errorf("nothing was removed: %q", s0[max(0, len(s0)-200):])
			}
			// The tool's own output stays: seq 1 300 ends in 300.
			if !strings.Contains(s0, "\n300") {
				t.Errorf("the output itself was cut: %q", s0[max(0, len(s0)-100):])
			}
			s := sessionOf(p)
			deaths := Analyze(s)
			if len(deaths) != 1 || deaths[0].OutputKey != "c1" || deaths[0].Rule != RuleDuplicate {
				t.Errorf("deaths %+v; want c1 dead as a duplicate", deaths)
			}
		})
	}
}

// sessionOf makes a session of the two calls and their outputs.
func sessionOf(p realPair) *transcript.Session {
	s := &transcript.Session{}
	for i, text := range p.Outputs {
		id := []string{"c1", "c2"}[i]
		c := &transcript.ToolCall{ID: id, Name: p.Tool, Args: p.Arguments, Step: i + 1}
		c.Classify("/w")
		o := &transcript.ToolOutput{Key: id, CallID: id, Call: c, Text: text, Hash: transcript.TextHash(text), Step: i + 1}
		c.Output = o
		s.Messages = append(s.Messages,
			&transcript.Message{Role: transcript.RoleAssistant, Step: i + 1, Calls: []*transcript.ToolCall{c}},
			&transcript.Message{Role: transcript.RoleTool, Step: i + 1, Outputs: []*transcript.ToolOutput{o}})
	}
	return s
}

// TestStripAnnotations covers what must stay: text without annotations, and the
// tool's own lines around them.
func TestStripAnnotations(t *testing.T) {
	for in, want := range map[string]string{
		"plain output\n": "plain output\n",
		"a\n\n<system-reminder>\n<total_tokens>9 tokens left</total_tokens>\n</system-reminder>": "a",
		"Chunk ID: 1a2b3c\nWall time: 0.0011 seconds\nProcess exited with code 0\nOutput:\nok\n": "Process exited with code 0\nOutput:\nok\n",
		"Wall time: 0.5 seconds\nOutput:\nx":                                                     "Output:\nx",
		"Output:\nWall time: 3 seconds\n":                                                        "Output:\nWall time: 3 seconds\n",
		"Output: 1\n2\nProcess Group PGID: 8332\n</untrusted_context>":                           "Output: 1\n2\n</untrusted_context>",
	} {
		if got := StripAnnotations(in); got != want {
			t.Errorf("StripAnnotations(%q) = %q; want %q", in, got, want)
		}
	}
}
