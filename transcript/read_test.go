package transcript

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// detectHead trims data as Detect does and cuts it to DetectBytes.
func detectHead(data []byte) []byte {
	head := bytes.TrimPrefix(bytes.TrimLeft(data, " \t\r\n\ufeff"), []byte("\xef\xbb\xbf"))
	if len(head) > DetectBytes {
		head = head[:DetectBytes]
	}
	return head
}

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
	byDir := map[string]Format{"claude-code": FormatClaudeCode, "pi": FormatPi, "gemini-cli": FormatGemini,
		"mini-swe-agent": FormatMiniSWEAgent, "swe-agent": FormatSWEAgent, "openhands": FormatOpenHands,
		"codex": FormatCodex, "openai": FormatOpenAI}
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
