package cards

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// oldTerms is Terms as it was before the byte-level scan (one strings.ToLower per
// term, unicode per rune): the reference the fast path must equal on every text.
func oldTerms(text string) []string {
	var out []string
	start := -1
	for i, r := range text {
		word := unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'
		if word && start < 0 {
			start = i
		}
		if !word && start >= 0 {
			if i-start >= 2 {
				out = append(out, strings.ToLower(text[start:i]))
			}
			start = -1
		}
	}
	if start >= 0 && len(text)-start >= 2 {
		out = append(out, strings.ToLower(text[start:]))
	}
	return out
}

// oldCounts is what Corpus.Add counted before (a set per output): document
// frequency by term, outputs and terms.
type oldCounts struct {
	DF           map[string]int
	Docs, Tokens int
}

func (o *oldCounts) add(text string) {
	terms := oldTerms(text)
	o.Docs++
	o.Tokens += len(terms)
	seen := map[string]bool{}
	for _, t := range terms {
		if !seen[t] {
			seen[t] = true
			o.DF[t]++
		}
	}
}

// counts reads the corpus back in oldCounts' shape.
func (c *Corpus) counts() oldCounts {
	df := map[string]int{}
	for t, i := range c.terms {
		df[t] = c.df[i]
	}
	return oldCounts{DF: df, Docs: c.Docs, Tokens: c.Tokens}
}

// termCases are edge cases: Unicode letters and digits, upper case beyond ASCII
// (whose lower case changes length: 'İ' is 2 bytes, its lower case 'i' 1; the
// Kelvin sign 3 bytes, 'k' 1), marks, one-rune runs of 2 bytes, invalid UTF-8,
// '_', empty and huge texts.
var termCases = []string{
	"",
	"a",
	"ab",
	"AB_cd ÉTÉ été ÀB 𝔘𝔫𝔦 ١٢٣ x9 _ __ a_",
	"İSTANBUL \u212Aelvin ΣΑΣ ǅ ß ẞ Ω",
	"é ü 日本語のテキスト 日 a日 日a",
	"naïve cafe\u0301 e\u0301e\u0301",
	"src/Get.rs os.Path.Join foo-BAR 3.14159",
	"bad\xffbytes \xff\xfe ab\xc3 \xc3\xa9t\xc3",
	"\xe2\x84",
	strings.Repeat("Word ", 20000),
	strings.Repeat("x", 1<<20),
	strings.Repeat("Ünïcödé_ASCII mix ", 5000),
}

// realTexts returns the tool output texts and assistant texts of every session under
// ../shared/sessions and every third file of ../shared/corpus (skipping files the
// reader rejects).
func realTexts(t *testing.T) []string {
	t.Helper()
	files := sessionfiles.Sample("../../shared")
	var texts []string
	read := 0
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			continue
		}
		read++
		for _, m := range s.Messages {
			texts = append(texts, m.Text)
			for _, o := range m.Outputs {
				texts = append(texts, o.Text)
			}
		}
	}
	if read < 50 {
		sessionfiles.Missing(t, "only %d real sessions readable", read)
	}
	t.Logf("%d sessions, %d texts", read, len(texts))
	return texts
}

// The byte-level Terms and Corpus.Add give exactly the old results (terms in order,
// document frequencies, counts) on every real text and on the edge cases, and
// EachTerm gives Terms's terms.
func TestTermsMatchOldOnRealText(t *testing.T) {
	old := termsMatchOld(t, append(realTexts(t), termCases...), t.Fatalf)
	if len(old.DF) < 10000 {
		t.Errorf("only %d distinct terms: the real texts were not read", len(old.DF))
	}
}

func FuzzTerms(f *testing.F) {
	for _, s := range termCases[:10] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if d := cmp.Diff(oldTerms(text), Terms(text)); d != "" {
			t.Fatalf("Terms(%q) differ (-old +new):\n%s", text, d)
		}
		c := NewCorpus()
		old := oldCounts{DF: map[string]int{}}
		for _, s := range []string{text, strings.ToUpper(text), text} {
			c.Add(s)
			old.add(s)
		}
		if d := cmp.Diff(old, c.counts()); d != "" {
			t.Errorf("corpus counts differ (-old +new):\n%s", d)
		}
	})
}

// New's head and tail (valid text skips HeadTail's passes) are HeadTail's on every
// real text and edge case, invalid UTF-8 included.
func TestNewHeadTailMatchesHeadTail(t *testing.T) {
	headTailMatches(t, append(realTexts(t), termCases...), t.Fatalf)
}

// oldCut and oldReaction are Cut and ReactionOf's words as they were before Cut
// stopped reading at n+1 characters and the reaction stopped folding white space
// once it had enough (H21): the references.
func oldCut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return cutRunes(s, n-1) + "…"
}

func oldReaction(text string) string {
	if t := strings.Join(strings.Fields(text), " "); t != "" {
		return oldCut(t, ReactionChars)
	}
	return ""
}

// cutCases are texts at the edges of Cut's character count: invalid bytes alone, in
// runs, beside an encoded U+FFFD, truncated runes at the ends, white space of every
// kind between words.
var cutCases = []string{
	"", "a", "ab", "abc", "\xff", "\xff\xfe", "a\xffb", "\xef\xbf\xbd\xff", "\xff\xef\xbf\xbd",
	"日本語", "日本\xe8", "\xe8\xaa", "é\xc3", " \t\n a  b\u00a0c\u2003d \xff\xfe e ",
	strings.Repeat("word ", 300), strings.Repeat(" ", 5000) + "late words", strings.Repeat("\xff", 900) + "x",
	strings.Repeat("日本 ", 400), strings.Repeat("\xe8\xaa", 500),
}

var cutLengths = []int{-1, 0, 1, 2, 3, 5, ReactionChars, HeadChars, ContextChars}

func TestCutMatchesOld(t *testing.T) {
	texts := append(realTexts(t), cutCases...)
	for _, text := range texts {
		for _, n := range cutLengths {
			if got, want := Cut(text, n), oldCut(text, n); got != want {
				t.Fatalf("Cut(%.80q, %d) = %.80q, want %.80q", text, n, got, want)
			}
		}
		if got, want := ReactionOf(&transcript.Message{Text: text}), oldReaction(text); got != want {
			t.Fatalf("ReactionOf(%.80q) = %q, want %q", text, got, want)
		}
	}
}

func FuzzCut(f *testing.F) {
	for _, c := range cutCases {
		f.Add(c, 5)
	}
	f.Fuzz(func(t *testing.T, text string, n int) {
		n = n%700 - 2
		if got, want := Cut(text, n), oldCut(text, n); got != want {
			t.Errorf("Cut(%q, %d) = %q, want %q", text, n, got, want)
		}
		m := (n%20+20)%20 + 1 // 1 to 20: short enough that the fuzzer's texts are cut
		if got, want := foldWords(text, m), strings.Join(strings.Fields(text), " "); !strings.HasPrefix(want, got) ||
			Cut(got, m) != Cut(want, m) {
			t.Errorf("foldWords(%q, %d) = %q, whole fold %q", text, m, got, want)
		}
		if got, want := ReactionOf(&transcript.Message{Text: text}), oldReaction(text); got != want {
			t.Errorf("ReactionOf(%q) = %q, want %q", text, got, want)
		}
	})
}
