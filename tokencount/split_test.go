package tokencount_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/tiktoken-go/tokenizer"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// o200kPattern is the tokenizer's pre-split pattern for o200k_base, copied from
// github.com/tiktoken-go/tokenizer/codec/o200k_base.go (v0.10.0).
const o200kPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

var o200kRegexp = regexp2.MustCompile(o200kPattern, regexp2.None)

// regexpPieces splits s with the regexp engine, as the tokenizer does.
func regexpPieces(t testing.TB, s string) []string {
	t.Helper()
	var out []string
	m, err := o200kRegexp.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = o200kRegexp.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// splitPieces splits s with splitO200k.
func splitPieces(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := tokencount.SplitO200k(s, i)
		if j == i {
			i++
			continue
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// splitCases are texts at the pattern's edges: each alternative, the backtracking of
// A*B+ over runes in both classes (Lm, Lo, M), contractions in any case (and the long
// s, which folds to s), white space runs before letters, digits and line breaks,
// Unicode spaces, numbers and marks.
var splitCases = []string{
	"", "a", "A", "1", " ", "\n", "\t", "'", "x's", "X'S", "it'll", "IT'LL", "we've", "WE'Ve", "I'm", "you're", "he'd", "it's'", "a'", "a'x",
	"don\u017ft", "don'\u017f", "don'\u017fx", "O'Neil", "HTTPServer", "httpServer", "parseExpr12", "ABCdef's", " Hello", "\tfoo", "\rfoo", "\nfoo",
	"  foo", "   foo", " \tfoo", "foo  ", "foo   bar", "a \n b", "a\n\n\nb", " \n", "  \n\n  x", "\r\n\r\n", "x \r\n y", "12345678", "1a2b3c", "x123y",
	" ==", "==\n", "{\n\t", "};\n\n", " //", "a/b/c", "http://x.y/z?q=1", "...\n/", " (x)", "(X)", "'quoted'", "\"str\"", "a\x00b", "\x01\x02\x1f", "\x7f", "a=\x7f=b", " \x7f\x7fx", "\x7f\n",
	"\u00a0x", "x\u00a0\u00a0y", "\u3000\u3000", "x\u2028y", "\u0085", "naïve", "Ǆungla", "ǅx", "ʰello", "ʰ", "Aʰ", "AʰB", "Ａｂｃ", "日本語のテキスト", "한국어",
	"e\u0301", "E\u0301\u0301", "\u0301", " \u0301x", "A\u0301", "٣٤٥٦", "x²³", "Ⅻ", "1\u0661", "🙂 ok", "→ next", "     1→#!/bin/zsh\n     2→# x",
	"ΑΒΓαβγ's", "ǲa", "ªb", "Aª", "ÀÉÎ", "ß'S", "ʼn", strings.Repeat(" ", 40) + "x", strings.Repeat(" \n", 40), strings.Repeat("=", 60) + "\n",
}

// splitO200k cuts texts exactly where the regexp engine does: the edge cases, and
// every text of a sample of real sessions.
func TestSplitO200k(t *testing.T) {
	check := func(name, s string) {
		t.Helper()
		if !utf8.ValidString(s) {
			return
		}
		want, got := regexpPieces(t, s), splitPieces(s)
		if !slices.Equal(want, got) {
			t.Fatalf("%s: pieces differ (-regexp +split):\n%s", name, cmp.Diff(want, got))
		}
	}
	for _, s := range splitCases {
		check(strings.ToValidUTF8(s, "?"), s)
		check("prefix "+s, "x"+s+" y")
	}
	for _, s := range splitSample(t) {
		check("session text", s)
	}
}

// Every rune up to U+2FFFF, in a handful of contexts (alone, after a space, between
// letters, doubled before a digit, between line breaks, after an apostrophe), is
// cut where the regexp engine cuts it: the splitter's character classes are the
// engine's.
func TestSplitO200kEveryRune(t *testing.T) {
	var b strings.Builder
	flush := func() {
		s := b.String()
		b.Reset()
		want, got := regexpPieces(t, s), splitPieces(s)
		if !slices.Equal(want, got) {
			t.Fatalf("pieces differ (-regexp +split):\n%s", cmp.Diff(want, got))
		}
	}
	for r := rune(0); r < 0x30000; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		c := string(r)
		for _, ctx := range []string{c, " " + c, "a" + c + "A", c + c + "1", "\n" + c + " \n \n", "'" + c, "x'" + c + " "} {
			b.WriteString(ctx)
			b.WriteByte('|')
		}
		if r%1024 == 1023 {
			flush()
		}
	}
	flush()
}

// countSplit counts each piece as the tokenizer counts the whole text.
func TestCountSplitMatchesTokenizer(t *testing.T) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	texts := append(slices.Clone(splitCases), splitSample(t)...)
	for _, s := range texts {
		if !utf8.ValidString(s) {
			continue
		}
		want, _ := c.Count(s)
		if got := tokencount.CountSplit(s); got != want {
			t.Fatalf("countSplit(%.60q…) = %d; the tokenizer counts %d", s, got, want)
		}
	}
}

// splitSample returns texts of real sessions: from each session file, every 7th
// line up to 64 KB of text (all formats, code, logs, prose, non-ASCII included).
func splitSample(t testing.TB) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "shared", "sessions", "*", "*"))
	var out []string
	for _, f := range files {
		if strings.Contains(f, "LICENSE") || strings.HasSuffix(f, ".md") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s, err := transcript.Read(f, data, transcript.Options{Lenient: true})
		if err != nil {
			continue
		}
		size := 0
		for i, m := range s.Messages {
			if i%7 != 0 || size > 64<<10 {
				continue
			}
			out = append(out, m.Text)
			size += len(m.Text)
			for _, o := range m.Outputs {
				out = append(out, o.Text)
				size += len(o.Text)
			}
		}
	}
	if len(out) < 100 {
		t.Fatalf("only %d session texts", len(out))
	}
	return out
}

// FuzzSplitO200k: on any valid UTF-8 text, the pieces and the count are the
// tokenizer's.
func FuzzSplitO200k(f *testing.F) {
	for _, s := range splitCases {
		f.Add(s)
	}
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || len(s) > 4096 {
			return
		}
		want, got := regexpPieces(t, s), splitPieces(s)
		if !slices.Equal(want, got) {
			t.Fatalf("pieces differ (-regexp +split):\n%s", cmp.Diff(want, got))
		}
		n, _ := c.Count(s)
		if m := tokencount.CountSplit(s); m != n {
			t.Fatalf("countSplit = %d; tokenizer %d", m, n)
		}
	})
}

// BenchmarkCountTokensSplit measures countSplit against the tokenizer on the largest
// output of pi/session.jsonl, in 1 KB pieces (the tokenizer's pre-split is
// quadratic in a whitespace run, so it is not given the whole), with the piece
// cache warm.
func BenchmarkCountTokensSplit(b *testing.B) {
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
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		count func(string) int
	}{
		{"split", tokencount.CountSplit},
		{"tokenizer", func(s string) int { n, _ := c.Count(s); return n }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				for rest := text; len(rest) > 0; {
					piece := textcut.BytesOnRune(rest, tokencount.TokenChunk)
					tc.count(piece)
					rest = rest[len(piece):]
				}
			}
		})
	}
}
