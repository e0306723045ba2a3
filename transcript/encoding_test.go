package transcript

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/internal/widetext"
)

// badFile reads testdata/bad/name (written by gen.py).
func badFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "bad", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// summary is what two reads of the same session must agree on.
func summary(s *Session) []string {
	var out []string
	for _, m := range s.Messages {
		line := string(m.Role) + "|" + m.Text
		for _, o := range m.Outputs {
			line += "|" + o.Key + "=" + o.Text
		}
		out = append(out, line)
	}
	return out
}

// The healthy session in UTF-16 and UTF-32 (gen.py: encoded by Python's codecs, an
// independent route) reads as its UTF-8 original does, with a warning naming the
// encoding; so does the same session with CR-only line ends. Forcing a format on
// UTF-16 names the encoding instead.
func TestReadOtherEncodingsAndLineEnds(t *testing.T) {
	want, err := Read("healthy", badFile(t, "claude-healthy.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ file, warning string }{
		{"claude-utf16le-bom.jsonl", "the file is UTF-16LE text (with a byte-order mark): read as converted to UTF-8"},
		{"claude-utf16be.jsonl", "the file is UTF-16BE text (no byte-order mark): read as converted to UTF-8"},
		{"claude-utf32le-bom.jsonl", "the file is UTF-32LE text (with a byte-order mark): read as converted to UTF-8"},
		{"claude-cr-only.jsonl", ""},
	}
	for _, tt := range tests {
		data := badFile(t, tt.file)
		if f, err := Detect(tt.file, data); err != nil || f != FormatClaudeCode {
			t.Errorf("%s: Detect = %q, %v", tt.file, f, err)
		}
		got, err := Read(tt.file, data, Options{})
		if err != nil {
			t.Errorf("%s: %v", tt.file, err)
			continue
		}
		if d := cmp.Diff(summary(want), summary(got)); d != "" {
			t.Errorf("%s reads differently from the UTF-8 LF file (-want +got):\n%s", tt.file, d)
		}
		var warnings []string
		if tt.warning != "" {
			warnings = []string{tt.warning}
		}
		if d := cmp.Diff(warnings, got.Warnings); d != "" {
			t.Errorf("%s: warnings (-want +got):\n%s", tt.file, d)
		}
	}
	_, err = Read("w.jsonl", badFile(t, "claude-utf16le-bom.jsonl"), Options{Format: FormatClaudeCode})
	if !errors.Is(err, ErrMalformed) || err.Error() != "w.jsonl:1: the content is UTF-16LE text (with a byte-order mark); format claude-code is read as UTF-8 (leave the format to detection to convert it)" {
		t.Errorf("forced format on UTF-16: %v", err)
	}

	// A malformed line is named by the same number whatever the line ends.
	lf := badFile(t, "claude-truncated-last-line.jsonl")
	for name, data := range map[string][]byte{"lf": lf, "cr": bytes.ReplaceAll(lf, []byte("\n"), []byte("\r")),
		"crlf": bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n"))} {
		_, err := Read(name, data, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), name+":14: invalid JSON") {
			t.Errorf("%s line ends: %v; want line 14 named", name, err)
		}
	}
}

// Text that is neither UTF-16 nor UTF-32 is left alone: UTF-8 with and without a
// BOM, binary data, a single NUL.
func TestSniffWideLeavesOthers(t *testing.T) {
	for name, data := range map[string][]byte{
		"utf-8":        badFile(t, "claude-healthy.jsonl"),
		"utf-8 bom":    badFile(t, "claude-bom-crlf.jsonl"),
		"binary":       badFile(t, "binary-garbage.bin"),
		"escaped nuls": badFile(t, "claude-escaped-nul.jsonl"),
		"raw nul":      badFile(t, "claude-raw-nul.jsonl"),
		"short":        {'{', 0},
		"empty":        {},
	} {
		if w := widetext.Sniff(data); w != nil {
			t.Errorf("%s taken for %s", name, w)
		}
	}
}

// A Claude Code file whose first line was split in two by a CRLF at a blank is still
// detected; the reader names both pieces (lenient) or the first (strict).
func TestDetectFirstLineSplit(t *testing.T) {
	data := badFile(t, "claude-first-line-split.jsonl")
	if f, err := Detect("split.jsonl", data); err != nil || f != FormatClaudeCode {
		t.Fatalf("Detect = %q, %v; want claude-code", f, err)
	}
	if _, err := Read("split.jsonl", data, Options{}); err == nil || err.Error() != "split.jsonl:1: invalid JSON: unexpected end of input (truncated?)" {
		t.Errorf("strict: %v", err)
	}
	s, err := Read("split.jsonl", data, Options{Lenient: true})
	if err != nil || s.Skipped != 2 || len(s.Messages) != 13 {
		t.Fatalf("lenient: %v (skipped %d, %d messages); want 2 lines skipped, 13 messages", err, s.Skipped, len(s.Messages))
	}
}
