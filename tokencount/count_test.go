package tokencount_test

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"

	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// mediumOutputs returns the texts of pi/session.jsonl's outputs of 3 to 64 KB
// (at least 10 of them, else the test fails).
func mediumOutputs(t *testing.T) []string {
	t.Helper()
	s, err := transcript.ReadFile(filepath.Join("..", "..", "shared", "sessions", "pi", "session.jsonl"), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range s.Outputs() {
		if len(o.Text) >= 3*tokencount.TokenChunk && len(o.Text) <= 64<<10 {
			out = append(out, o.Text)
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d outputs of 3 to 64 KB in pi/session.jsonl", len(out))
	}
	return out
}

// checkExact checks Count (uncached) against the tokenizer run over each whole text.
func checkExact(t *testing.T, texts []string) {
	t.Helper()
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range texts {
		want, _ := c.Count(text)
		if got := tokencount.CountUncached(text); got != want {
			t.Errorf("text of %d bytes (%.40q…): Count %d, the tokenizer over the whole %d", len(text), text, got, want)
		}
	}
}

// Count over real outputs is the tokenizer's count of the whole text, to the
// token: long lines, runs of blank lines and non-ASCII included (countWhole). The
// digits case is a line longer than the tokenizer's old 1 KB pieces whose every
// cut fell inside a three-digit group (a count 170 over the truth).
func TestCountTokensExact(t *testing.T) {
	texts := []string{strings.Repeat("1", 256<<10), strings.Repeat("word ", 1000) + strings.Repeat("\n", 3000) + "end"}
	checkExact(t, append(texts, mediumOutputs(t)...))
}

// Count over a text that is not valid UTF-8 is the tokenizer's count of the whole
// text, invalid bytes included (each read as U+FFFD, validPerByte): real outputs
// between 3 and 64 KB, long lines and runs of blank lines kept, with a stray byte
// (0xff, 0x80, the head of a 2-, 3- or 4-byte sequence cut short) before about one
// byte in 200, some of them inside a multi-byte rune of the output. Counted in 1 KB
// pieces cut after a newline, as Count did before, three of these texts were off.
func TestCountInvalidUTF8Exact(t *testing.T) {
	stray := []string{"\xff", "\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xfe\xff"}
	r := rand.New(rand.NewPCG(1, 2))
	var texts []string
	for _, text := range mediumOutputs(t) {
		var b strings.Builder
		for i := 0; i < len(text); i++ {
			if r.IntN(200) == 0 {
				b.WriteString(stray[r.IntN(len(stray))])
			}
			b.WriteByte(text[i])
		}
		if utf8.ValidString(b.String()) {
			t.Fatalf("text of %d bytes (%.40q…) is valid UTF-8", b.Len(), b.String())
		}
		texts = append(texts, b.String())
	}
	checkExact(t, texts)
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
