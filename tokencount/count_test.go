package tokencount_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"

	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Count over real outputs agrees with the tokenizer run over the whole text
// within one token per 1 KB piece (see countChunked).
func TestCountTokensChunked(t *testing.T) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	s, err := transcript.ReadFile(filepath.Join("..", "..", "shared", "sessions", "pi", "session.jsonl"), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, o := range s.Outputs() {
		if len(o.Text) < 3*tokencount.TokenChunk || len(o.Text) > 64<<10 {
			continue
		}
		want, _ := c.Count(o.Text)
		got := tokencount.CountUncached(o.Text)
		if d := got - want; d < -(len(o.Text)/tokencount.TokenChunk+1) || d > len(o.Text)/tokencount.TokenChunk+1 {
			t.Errorf("output %s (%d bytes): chunked %d, whole %d", o.Key, len(o.Text), got, want)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no output between 12 and 64 KB in pi/session.jsonl")
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
