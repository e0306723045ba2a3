package cards

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func readSession(t *testing.T, path string) *transcript.Session {
	t.Helper()
	s, err := transcript.ReadFile(path, transcript.Options{Lenient: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func output(t *testing.T, s *transcript.Session, callID string) *transcript.ToolOutput {
	t.Helper()
	for _, o := range s.Outputs() {
		if o.CallID == callID {
			return o
		}
	}
	t.Fatalf("no output for call %s", callID)
	return nil
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cards -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s (-want +got):\n%s", name, d)
	}
}

// Cards of real outputs, rendered as the scorer sees them, against golden files.
// Expected field values were checked against the session file with python3: the go
// env output of fix-port.jsonl is 7,509 characters, starts "AR='ar'" and ends
// "GOEXPERIMENT_259='x2051021'"; the next assistant text after it is the route.go
// read's preamble "The routes use the same Getenv pattern. ...".
func TestCardGolden(t *testing.T) {
	s := readSession(t, "../testdata/sessions/fix-port.jsonl")
	tests := []struct {
		name, call string
		now        int
	}{
		{"fixport-goenv.golden", "toolu_05cEnv", 12},
		{"fixport-readme-parallel.golden", "toolu_02Readme", 9},
		{"fixport-grep.golden", "toolu_05Grep", 7},
		{"fixport-failed-edit.golden", "toolu_08EditBad", 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := output(t, s, tt.call)
			c := Build(s.Messages, o, tt.now)
			golden(t, tt.name, c.Text("c1"))
			// byte-stable: the same output at the same age renders the same bytes
			if again := Build(s.Messages, o, tt.now).Text("c1"); again != c.Text("c1") {
				t.Error("card text changed between two builds")
			}
		})
	}
}

// Field-level checks on the same outputs, verified by reading the file.
func TestCardFields(t *testing.T) {
	s := readSession(t, "../testdata/sessions/fix-port.jsonl")
	env := Build(s.Messages, output(t, s, "toolu_05cEnv"), 12)
	if got, want := env.Chars, utf8.RuneCountInString(output(t, s, "toolu_05cEnv").Text); got != want {
		t.Errorf("Chars = %d, want %d", got, want)
	}
	if !strings.HasPrefix(env.Head, "AR='ar'\nCC='gcc'") || utf8.RuneCountInString(env.Head) != HeadChars {
		t.Errorf("Head = %.40q (%d chars)", env.Head, utf8.RuneCountInString(env.Head))
	}
	if !strings.HasSuffix(env.Tail, "GOEXPERIMENT_259='x2051021'") || utf8.RuneCountInString(env.Tail) != TailChars {
		t.Errorf("Tail = %q", env.Tail)
	}
	if got, want := env.Age, 12-output(t, s, "toolu_05cEnv").Step; got != want || got != 6 {
		t.Errorf("Age = %d, want %d (step 6 output seen at step 12)", got, want)
	}
	if got := env.Chars; got != 7509 {
		t.Errorf("Chars = %d, want 7509", got)
	}
	if env.Tool != "Bash" || env.Args != "go env" {
		t.Errorf("Tool, Args = %q, %q", env.Tool, env.Args)
	}
	if want := "Nothing there. Checking the toolchain"; strings.HasPrefix(env.Reaction, want) {
		t.Errorf("Reaction %q is the agent's words before the call, not after", env.Reaction)
	}
	if want := "The routes use the same Getenv pattern."; !strings.HasPrefix(env.Reaction, want) {
		t.Errorf("Reaction = %q, want prefix %q", env.Reaction, want)
	}

	// The README and config.go reads were made in parallel: one reaction follows both.
	readme := Build(s.Messages, output(t, s, "toolu_02Readme"), 9)
	cfg := Build(s.Messages, output(t, s, "toolu_03Cfg"), 9)
	if !readme.SharedReaction || !cfg.SharedReaction || readme.Reaction != cfg.Reaction {
		t.Errorf("parallel reads: shared %v/%v, reactions %q / %q", readme.SharedReaction, cfg.SharedReaction, readme.Reaction, cfg.Reaction)
	}
	if env.SharedReaction {
		t.Error("a single call's reaction is marked shared")
	}
	// The grep's reaction is the next assistant text (the changelog call's preamble).
	if g := Build(s.Messages, output(t, s, "toolu_05Grep"), 7); g.Reaction != "Let me check the changelog for any earlier mention of this." {
		t.Errorf("grep reaction = %q", g.Reaction)
	}
	// A card never shows the future: with the session cut before the reaction, none.
	o := output(t, s, "toolu_05cEnv")
	if c := Build(s.Messages[:o.Message+1], o, 12); c.Reaction != "" {
		t.Errorf("reaction from the future: %q", c.Reaction)
	}
}

// The next tool call stands in for a reaction when the agent said nothing.
func TestReactionNextCall(t *testing.T) {
	m := &transcript.Message{Role: transcript.RoleAssistant, Calls: []*transcript.ToolCall{{Name: "Read", Classification: toolcall.Classification{Summary: "/src/a.go"}}}}
	if got, want := ReactionOf(m), "next call: Read /src/a.go"; got != want {
		t.Errorf("ReactionOf = %q, want %q", got, want)
	}
	m.Text = "  Now   the\n\tfix. "
	if got, want := ReactionOf(m), "Now the fix."; got != want {
		t.Errorf("ReactionOf = %q, want %q", got, want)
	}
}

// Head and tail are cut on rune boundaries, never inside a UTF-8 sequence, and
// invalid bytes become U+FFFD so card bytes are valid UTF-8.
func TestHeadTailRunes(t *testing.T) {
	tests := []struct {
		name, in   string
		head, tail int
		wantHead   string
		wantTail   string
	}{
		{"short stays whole", "héllo", 3, 2, "héllo", ""},
		{"multibyte cut", "αβγδεζηθ", 2, 3, "αβ", "ζηθ"},
		{"emoji", "😀😁😂🤣😃😄", 1, 1, "😀", "😄"},
		{"invalid bytes", "ab\xffcdefgh\xfe", 3, 2, "ab\uFFFD", "h\uFFFD"},
		{"exact fit", "abcde", 3, 2, "abcde", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, tl := HeadTail(tt.in, tt.head, tt.tail)
			if h != tt.wantHead || tl != tt.wantTail {
				t.Errorf("HeadTail(%q) = %q, %q; want %q, %q", tt.in, h, tl, tt.wantHead, tt.wantTail)
			}
			if !utf8.ValidString(h) || !utf8.ValidString(tl) {
				t.Error("invalid UTF-8 in card")
			}
		})
	}
	if got, want := Cut("αβγδε", 3), "αβ…"; got != want {
		t.Errorf("Cut = %q, want %q", got, want)
	}
	if got := Cut("αβγ", 3); got != "αβγ" {
		t.Errorf("Cut kept-whole = %q", got)
	}
}

// Terms splits identifiers and paths into lower-cased parts without a stop list.
func TestTerms(t *testing.T) {
	got := Terms("Read src/Get.rs: the PORT=8080 in config.yaml (a b)")
	want := []string{"read", "src", "get", "rs", "the", "port", "8080", "in", "config", "yaml"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Terms (-want +got):\n%s", d)
	}
	c := NewCorpus()
	c.Add("alpha beta beta")
	c.Add("beta gamma")
	if c.Docs != 2 || c.DF("beta") != 2 || c.DF("alpha") != 1 || c.AvgLen() != 2.5 {
		t.Errorf("corpus = %+v, avg %v", c, c.AvgLen())
	}
}
