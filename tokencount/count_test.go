package tokencount_test

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"

	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Count over real outputs is the tokenizer's count of the whole text, to the
// token: long lines, runs of blank lines and non-ASCII included (countWhole). The
// digits case is a line longer than the tokenizer's old 1 KB pieces whose every
// cut fell inside a three-digit group (a count 170 over the truth).
func TestCountTokensExact(t *testing.T) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	s, err := transcript.ReadFile(filepath.Join("..", "..", "shared", "sessions", "pi", "session.jsonl"), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{strings.Repeat("1", 256<<10), strings.Repeat("word ", 1000) + strings.Repeat("\n", 3000) + "end"}
	for _, o := range s.Outputs() {
		if len(o.Text) >= 3*tokencount.TokenChunk && len(o.Text) <= 64<<10 {
			texts = append(texts, o.Text)
		}
	}
	if len(texts) < 10 {
		t.Fatalf("only %d outputs between 3 and 64 KB in pi/session.jsonl", len(texts)-2)
	}
	for _, text := range texts {
		want, _ := c.Count(text)
		if got := tokencount.CountUncached(text); got != want {
			t.Errorf("text of %d bytes (%.40q…): Count %d, the tokenizer over the whole %d", len(text), text, got, want)
		}
	}
}

// Count over a text that is not valid UTF-8 (countChunked's ~1 KB pieces, each cut
// after its last newline) is the tokenizer's count of the whole text, invalid
// bytes included, wherever no piece of the pre-split crosses a cut: real outputs
// between 3 and 64 KB with their runs of blank lines made single newlines, their
// lines over 512 bytes and those that start with '/' left out, and a byte 0xff
// at the head of every 20th line. (A line that starts with '/' after one that
// ends in punctuation is no such place: the pre-split's ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
// takes "}\n//" whole, so a cut there counts a token more.) A cut that moved a
// line's newline into the next piece would split pieces such as ";\n" and "{\n"
// that the pre-split keeps whole.
func TestCountInvalidUTF8Exact(t *testing.T) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	s, err := transcript.ReadFile(filepath.Join("..", "..", "shared", "sessions", "pi", "session.jsonl"), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, o := range s.Outputs() {
		if len(o.Text) < 3*tokencount.TokenChunk || len(o.Text) > 64<<10 {
			continue
		}
		var lines []string
		for i, line := range strings.Split(o.Text, "\n") {
			if line == "" || len(line) > 512 || line[0] == '/' {
				continue
			}
			if i%20 == 0 {
				line = "\xff" + line
			}
			lines = append(lines, line)
		}
		if text := strings.Join(lines, "\n") + "\n"; len(text) >= 3*tokencount.TokenChunk {
			texts = append(texts, text)
		}
	}
	if len(texts) < 10 {
		t.Fatalf("only %d outputs of pi/session.jsonl make texts of 3 KB or more", len(texts))
	}
	for _, text := range texts {
		if utf8.ValidString(text) {
			t.Fatalf("text of %d bytes (%.40q…) is valid UTF-8", len(text), text)
		}
		want, _ := c.Count(text)
		if got := tokencount.CountUncached(text); got != want {
			t.Errorf("text of %d bytes (%.40q…): Count %d, the tokenizer over the whole %d", len(text), text, got, want)
		}
	}
}

// BenchmarkCountTokensWhitespace measures a 128 KB run of " \n", which the
// tokenizer's pre-split pattern handles in quadratic time when given whole.
func BenchmarkCountTokensWhitespace(b *testing.B) {
	s := strings.Repeat(" \n", 64<<10)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		tokencount.CountUncached(s)
	}
}

// BenchmarkCountTokensText measures ordinary tool output (the largest output of
// pi/session.jsonl).
func BenchmarkCountTokensText(b *testing.B) {
	s, err := transcript.ReadFile(filepath.Join("..", "..", "shared", "sessions", "pi", "session.jsonl"), transcript.Options{})
	if err != nil {
		b.Fatal(err)
	}
	text := ""
	for _, o := range s.Outputs() {
		if len(o.Text) > len(text) {
			text = o.Text
		}
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tokencount.CountUncached(text)
	}
}
