package transcript

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
)

// detectHead trims data as Detect does and cuts it to DetectBytes.
func detectHead(data []byte) []byte {
	head := bytes.TrimPrefix(bytes.TrimLeft(data, " \t\r\n\ufeff"), []byte("\xef\xbb\xbf"))
	if len(head) > DetectBytes {
		head = head[:DetectBytes]
	}
	return head
}

// realDirFormats maps the folders of the real sessions to their formats.
var realDirFormats = map[string]Format{"claude-code": FormatClaudeCode, "pi": FormatPi, "gemini-cli": FormatGemini,
	"mini-swe-agent": FormatMiniSWEAgent, "swe-agent": FormatSWEAgent, "openhands": FormatOpenHands,
	"codex": FormatCodex, "openai": FormatOpenAI}

// claimants lists the formats whose detector claims head, in detection order.
func claimants(head []byte) []Format {
	var got []Format
	for _, r := range readers {
		if r.detect(head) {
			got = append(got, r.format)
		}
	}
	return got
}

// TestDetectorsDisjoint: no two detectors claim the same content, on every real
// session and every file of our own, whole and cut after each of 60 evenly spaced
// points of its first 64 KiB (the order of readers then decides nothing), and the
// one that claims a whole real session is its format's. Crafted content that two
// detectors claim is resolved by the order, as read.go says.
func TestDetectorsDisjoint(t *testing.T) {
	byDir := realDirFormats
	var files []string
	for _, root := range []string{docReal(""), filepath.Join("..", "testdata")} {
		err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() && !strings.HasSuffix(p, ".md") && !strings.HasSuffix(p, ".py") && !strings.Contains(p, "LICENSE") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 80 {
		t.Fatalf("only %d files", len(files))
	}
	heads := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		head := detectHead(data)
		got := claimants(head)
		if want, real := byDir[filepath.Base(filepath.Dir(f))]; real && strings.HasPrefix(f, docReal("")) {
			if d := cmp.Diff([]Format{want}, got); d != "" {
				t.Errorf("%s: claimed by (-want +got):\n%s", f, d)
			}
		} else if len(got) > 1 {
			t.Errorf("%s: claimed by %v", f, got)
		}
		for k := 1; k <= 60 && len(head) > 1; k++ {
			cut := head[:max(1, len(head)*k/61)]
			heads++
			if got := claimants(cut); len(got) > 1 {
				t.Errorf("%s cut at %d: claimed by %v", f, len(cut), got)
			}
		}
	}
	if heads < 4000 {
		t.Errorf("only %d cut heads checked", heads)
	}

	crafted := []struct {
		name   string
		data   string
		claims []Format
	}{
		{"request body with Gemini CLI keys", `{"sessionId":"s","projectHash":"h","system":"be brief","messages":[{"role":"user","content":"hi"}]}`,
			[]Format{FormatAnthropic, FormatGemini}},
		{"chat list with OpenHands event keys", `[{"role":"user","content":"hi","source":"user","action":"message"}]`,
			[]Format{FormatOpenAI, FormatOpenHands}},
	}
	for _, c := range crafted {
		if d := cmp.Diff(c.claims, claimants([]byte(c.data))); d != "" {
			t.Errorf("%s: claimed by (-want +got):\n%s", c.name, d)
		}
		if f, err := Detect(c.name, []byte(c.data)); err != nil || f != c.claims[0] {
			t.Errorf("%s: Detect = %q, %v; want %q, the first in detection order", c.name, f, err, c.claims[0])
		}
	}
}

// TestFormatsOrder pins the detection order that Formats, error messages and the
// docs (RELIABILITY.md) show.
func TestFormatsOrder(t *testing.T) {
	want := []Format{FormatAnthropic, FormatClaudeCode, FormatCodex, FormatGemini, FormatOpenAI,
		FormatMiniSWEAgent, FormatSWEAgent, FormatOpenHands, FormatPi, FormatResponses, FormatGeminiAPI}
	if d := cmp.Diff(want, Formats()); d != "" {
		t.Errorf("Formats() (-want +got):\n%s", d)
	}
}

// TestDetectSkeleton: every real session and file of our own has a skeleton
// (jsonscan.SkeletonOf) that at most one detector claims, and a real session's is
// claimed by its format's, so the fallback Detect takes for long files is as
// disjoint as the heads are.
func TestDetectSkeleton(t *testing.T) {
	byDir := realDirFormats
	checked := 0
	for _, root := range []string{docReal(""), filepath.Join("..", "testdata")} {
		err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".py") || strings.Contains(p, "LICENSE") {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			skel, ok := jsonscan.SkeletonOf(data)
			if !ok {
				return nil
			}
			checked++
			got := claimants(skel)
			if want, real := byDir[filepath.Base(filepath.Dir(p))]; real && strings.HasPrefix(p, docReal("")) {
				// A JSONL session's first lines may all be bookkeeping that only
				// the lines after them explain; then nobody claims the skeleton.
				if len(got) > 0 && (len(got) != 1 || got[0] != want) {
					t.Errorf("%s: skeleton claimed by %v, want %s", p, got, want)
				}
			} else if len(got) > 1 {
				t.Errorf("%s: skeleton claimed by %v", p, got)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Errorf("only %d skeletons checked", checked)
	}
}

// TestDetectLateKeys: a document whose telling keys come after the first
// DetectBytes is detected (and read) all the same, from its skeleton; one with no
// telling key anywhere is still no session.
func TestDetectLateKeys(t *testing.T) {
	big := strings.Repeat(`diff --git a/x.py b/x.py\n+    return \"ok\"\n`, 6000) // 250 KB of JSON string
	msgs := `[{"role":"system","content":"You are a helpful assistant."},` +
		`{"role":"user","content":"Fix the bug."},` +
		`{"role":"assistant","content":"Look first.\n\n` + "```bash\\nls\\n```" + `"},` +
		`{"role":"user","content":"<returncode>0</returncode><output>x.py</output>"}]`
	cases := []struct {
		name string
		doc  string
		want Format
	}{
		{"mini-swe-agent, info.submission first and large",
			`{"info":{"exit_status":"Submitted","submission":"` + big + `","model_stats":{"api_calls":1},"mini_version":"1.9.0"},` +
				`"messages":` + msgs + `,"trajectory_format":"mini-swe-agent-1"}`, FormatMiniSWEAgent},
		{"mini-swe-agent, info.submission large, no version nor format",
			`{"info":{"exit_status":"Submitted","submission":"` + big + `"},"messages":` + msgs + `}`, FormatMiniSWEAgent},
		{"gemini-cli, messages first and large",
			`{"messages":[{"id":"m1","type":"user","content":"` + big + `"},{"id":"m2","type":"gemini","content":"ok"}],` +
				`"sessionId":"s1","projectHash":"p1","startTime":"2025-01-01T00:00:00Z"}`, FormatGemini},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(c.doc)
			if len(data) < 3*DetectBytes {
				t.Fatalf("only %d bytes", len(data))
			}
			if got := claimants(detectHead(data)); len(got) > 0 {
				t.Fatalf("the head alone is claimed by %v: the case tests nothing", got)
			}
			f, err := Detect(c.name, data)
			if err != nil || f != c.want {
				t.Fatalf("Detect = %q, %v; want %q", f, err, c.want)
			}
			s, err := Read(c.name, data, Options{})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if s.Format != c.want || len(s.Messages) < 2 {
				t.Errorf("Read: format %q, %d messages", s.Format, len(s.Messages))
			}
		})
	}
	none := []byte(`{"notes":"` + big + `","items":[{"role":"user","content":"hi"}],"version":"1"}`)
	if f, err := Detect("none", none); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Detect(no telling keys) = %q, %v; want ErrUnknownFormat", f, err)
	}
}
