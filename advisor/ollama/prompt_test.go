package ollama

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func newServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func exampleBatch() cards.Batch {
	return cards.Batch{
		Task: "Change the server port to 9090",
		Now:  "Next I will update the port in config.yaml.",
		Cards: []cards.Card{
			{ID: "toolu_01", Tool: "Read", Args: "config.yaml", Head: "server:\n  host: 0.0.0.0\n  port: 8080\n",
				Chars: 36, Age: 8, Reaction: "The server listens on port 8080.", Uses: 2, LastUseAgo: 1},
			{ID: "toolu_02", Tool: "Bash", Args: "go test ./...", Head: "ok  \texample.com/app\t0.412s\n",
				Chars: 27, Age: 7, Reaction: "All tests pass.", SharedReaction: true},
			{ID: "toolu_03", Tool: "Grep", Args: "Getenv", Head: "main.go:12: port := os.Getenv(\"PORT\")\n",
				Chars: 38, Age: 5, Reaction: "next call: Read main.go", Uses: 1, LastUseAgo: 4},
		},
	}
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
		t.Fatalf("%v (go test -run Golden -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-golden +got):\n%s", name, diff)
	}
}

// TestPromptGolden pins the rendered prompts v1 and v2 and their schema; a change
// to either must come with a new prompt version. v2 shows each card's use history
// (cards.Card.UsedText: "2 times, last 1 steps ago", "never", "once, 4 steps
// ago"); v1 does not, so RenderPrompt (v1) still gives the v1 golden. Regenerate
// with go test -run Golden -update.
func TestPromptGolden(t *testing.T) {
	render := map[string]func(cards.Batch) (Prompt, error){
		PromptV1: RenderPrompt,
		PromptV2: (&Scorer{Prompt: PromptV2}).Render,
	}
	for _, v := range []string{PromptV1, PromptV2} {
		p, err := render[v](exampleBatch())
		if err != nil {
			t.Fatal(err)
		}
		if p.Version != v {
			t.Errorf("%s: rendered version %q", v, p.Version)
		}
		got := "=== system\n" + p.System + "\n=== user\n" + p.User + "\n=== format\n" + string(p.Format) + "\n"
		golden(t, "prompt_"+strings.Replace(v, "p", "v", 1)+".golden", got)
		used := strings.Count(p.User, "\nused: ")
		if want := map[string]int{PromptV1: 0, PromptV2: 3}[v]; used != want {
			t.Errorf("%s: %d used lines, want %d", v, used, want)
		}
	}
}

// TestRequestBodyGolden pins the whole /api/chat body Score sends for the example
// batch under each prompt version, byte for byte as the fake received it.
func TestRequestBodyGolden(t *testing.T) {
	for _, v := range []string{PromptV1, PromptV2} {
		f, srv := newFake(t, DefaultModel, DefaultNumCtx)
		s := newScorer(t, srv.URL)
		s.Prompt = v
		if _, err := s.Score(context.Background(), exampleBatch()); err != nil {
			t.Fatal(err)
		}
		noProblems(t, f)
		f.mu.Lock()
		body := string(f.bodies[0])
		f.mu.Unlock()
		golden(t, "request_"+strings.Replace(v, "p", "v", 1)+".golden.json", body+"\n")
	}
}

func TestFormat(t *testing.T) {
	raw, err := Format(Keys(2))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"properties":{"c1":{"type":"integer","maximum":100,"minimum":0},` +
		`"c2":{"type":"integer","maximum":100,"minimum":0}},"additionalProperties":false,` +
		`"type":"object","required":["c1","c2"]}`
	if got := string(raw); got != want {
		t.Errorf("Format(c1, c2) =\n%s\nwant\n%s", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	// Byte-stable: the same keys give the same bytes.
	again, _ := Format(Keys(2))
	if string(again) != string(raw) {
		t.Errorf("Format is not byte-stable")
	}
}

func TestKeys(t *testing.T) {
	if diff := cmp.Diff([]string{"c1", "c2", "c3"}, Keys(3)); diff != "" {
		t.Errorf("Keys(3) (-want +got):\n%s", diff)
	}
}

func TestParseAnswer(t *testing.T) {
	keys := Keys(3)
	ok := []struct {
		content string
		want    []int
	}{
		{`{"c1": 40, "c2": 50, "c3": 88}`, []int{40, 50, 88}},
		{"{\n\n\t\t \"c3\":0 ,\n\t\"c1\": 100,\"c2\":7}\n\n", []int{100, 7, 0}},
		{`{"c1": 40.0, "c2": 1e1, "c3": -0}`, []int{40, 10, 0}},
	}
	for _, tt := range ok {
		got, err := ParseAnswer(tt.content, keys)
		if err != nil {
			t.Errorf("ParseAnswer(%q): %v", tt.content, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseAnswer(%q) (-want +got):\n%s", tt.content, diff)
		}
	}
	bad := []struct {
		content, want string
	}{
		{`{"c1": 40, "c2": 50}`, "ids missing: c3"},
		{`{"c1": 40, "c2": 50, "c3": 1e400}`, `value of "c3" is 1e400`},
		{`{"c1": 40, "c2": 50, "c3": true}`, `value of "c3" is true, not a number`},
		{`{"c1": 40, "c2": 50, "c3": [1]}`, `value of "c3" is '[', not a number`},
		{`{"C1": 40, "c2": 50, "c3": 1}`, `unknown id "C1"`},
		{`{"c1": 40, "c2": 50, "c3": 1`, "not JSON"},
		{`"c1"`, "not a JSON object"},
	}
	for _, tt := range bad {
		_, err := ParseAnswer(tt.content, keys)
		if FailKind(err) != "invalid" || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseAnswer(%q) = %v, want invalid containing %q", tt.content, err, tt.want)
		}
	}
}

// TestRequestShape checks the request Score sends with a fake that accepts only
// the shape OLLAMA-WIRE.md says works (the fake's check), for a non-default model,
// context and keep-alive-independent options.
func TestRequestShape(t *testing.T) {
	f, srv := newFake(t, "llama3.2:1b", 4096)
	s := newScorer(t, srv.URL)
	s.Model = "llama3.2:1b"
	s.NumCtx = 4096
	if _, err := s.Score(context.Background(), exampleBatch()); err != nil {
		t.Fatal(err)
	}
	if _, _, problems := f.stats(); len(problems) > 0 {
		t.Errorf("request problems: %q", problems)
	}
}
