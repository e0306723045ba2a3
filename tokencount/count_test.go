package tokencount_test

import (
	"path/filepath"
	"strings"
	"testing"

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
