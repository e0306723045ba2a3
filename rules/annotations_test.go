package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
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

// readPair reads the testdata/annotations file source (relative to the repository).
func readPair(t *testing.T, source string) realPair {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", source))
	if err != nil {
		t.Fatal(err)
	}
	var p realPair
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("%s: %v", source, err)
	}
	return p
}

// TestAnnotationsOnRealText checks every entry of the table on the real text it
// names: the two outputs differ, each holds the annotation, they are equal once it
// is removed, and the duplicate rule kills the first.
func TestAnnotationsOnRealText(t *testing.T) {
	for _, a := range Annotations {
		t.Run(a.Agent+" "+a.Marker, func(t *testing.T) {
			p := readPair(t, a.Source)
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

// stripByRegexps is what StripAnnotations does by definition: each annotation's
// regexp over the whole text.
func stripByRegexps(text string) string {
	for _, a := range Annotations {
		if strings.Contains(text, a.Marker) {
			text = a.strip(text)
		}
	}
	return text
}

// TestAnnotationShapes checks that each regexp has the shape its Open, Close and
// LineStart claim, on which StripAnnotations's shortcuts rely.
func TestAnnotationShapes(t *testing.T) {
	for _, a := range Annotations {
		if a.Open != "" {
			if got, want := a.Re.String(), BlockExpr(a.Open, a.Close); got != want {
				t.Errorf("%s: Re is %q; BlockExpr(Open, Close) is %q", a.Agent, got, want)
			}
		}
		if a.LineStart {
			if got, want := a.Re.String(), "(?m)^"+regexp.QuoteMeta(a.Marker); !strings.HasPrefix(got, want) {
				t.Errorf("%s: Re is %q; want it to start with %q", a.Agent, got, want)
			}
		}
	}
}

// annotationCases hold each annotation and its surroundings in every arrangement.
var annotationCases = []string{
	"", "plain\n", "<system-reminder>", "<system-reminder></system-reminder>",
	"\n\n<system-reminder>x</system-reminder>\n\n", "a\n\n<system-reminder>\nx\n</system-reminder>",
	"a<system-reminder>x</system-reminder>b", "a\n<system-reminder>x</system-reminder>\n<system-reminder>y</system-reminder>\nb",
	"a\n<system-reminder>x</system-reminder>\n\n\nb<system-reminder>y",
	"<system-reminder><system-reminder>x</system-reminder></system-reminder>", "</system-reminder><system-reminder>",
	"x\n\n<system-reminder>\xffé</system-reminder>\n\ny", "<system-reminder</system-reminder>",
	"Chunk ID: 1a2b3c\nWall time: 0.0011 seconds\nOutput:\nok\n", "Output:\nWall time: 3 seconds\n",
	"Output: 1\n2\nProcess Group PGID: 8332\n</untrusted_context>", "Process Group PGID: 1",
	"a Process Group PGID: 1\nProcess Group PGID: 2\nb\nProcess Group PGID: x\nProcess Group PGID: 3",
	"\nProcess Group PGID: 12\n\n", "Process Group PGID: 7\n<system-reminder>\n</system-reminder>",
}

// FuzzStripAnnotations checks that StripAnnotations's shortcuts remove what the
// regexps alone remove.
func FuzzStripAnnotations(f *testing.F) {
	for _, c := range annotationCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if got, want := StripAnnotations(in), stripByRegexps(in); got != want {
			t.Fatalf("StripAnnotations(%q) = %q; want %q", in, got, want)
		}
	})
}

// TestStripAnnotationsOnRealText compares StripAnnotations with the regexps alone
// on the real annotated outputs.
func TestStripAnnotationsOnRealText(t *testing.T) {
	for _, a := range Annotations {
		p := readPair(t, a.Source)
		for i, o := range p.Outputs {
			if StripAnnotations(o) != stripByRegexps(o) {
				t.Errorf("%s output %d: StripAnnotations and the regexps differ", a.Source, i)
			}
		}
	}
}
