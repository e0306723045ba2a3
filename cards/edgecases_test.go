package cards

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// The hand-made edge cases of the identity tests against the old definitions,
// without the real sessions: those tests read ../shared first and skip (or fail
// in CI) without it, and a checkout or a copy without it (gremlins runs each
// mutant in a copy of the module alone) must still check every edge of Cut,
// ReactionOf, HeadTail and Terms.

// Cut and ReactionOf are the old cut and reaction on every edge case and length,
// zero and negative lengths included, and on runs of the byte 0x80 (the lowest
// byte that is not ASCII: a run of invalid bytes is one character), one of them
// longer than the first stretch the reaction folds (804 bytes) with no byte in it
// that starts a character.
func TestCutMatchesOldOnEdgeCases(t *testing.T) {
	texts := append([]string{"\x80\x81abc", "a\x80\x80\x80b", strings.Repeat("\x80", 5) + "xyz", strings.Repeat("\x80", 1000)}, cutCases...)
	for _, text := range texts {
		for _, n := range cutLengths {
			if got, want := Cut(text, n), oldCut(text, n); got != want {
				t.Errorf("Cut(%.80q, %d) = %.80q, want %.80q", text, n, got, want)
			}
		}
		if got, want := ReactionOf(&transcript.Message{Text: text}), oldReaction(text); got != want {
			t.Errorf("ReactionOf(%.80q) = %q, want %q", text, got, want)
		}
	}
}

// New's head and tail are HeadTail's on the edge cases, around the 400
// characters of head and tail together and with invalid UTF-8.
func TestNewHeadTailMatchesHeadTailOnEdgeCases(t *testing.T) {
	headTailMatches(t, append(append([]string(nil), termCases...), cutCases...), t.Errorf)
}

// headTailEdges are texts at the edges of New's head and tail: around 400
// characters (HeadChars + TailChars) of two bytes each, and invalid UTF-8.
var headTailEdges = []string{strings.Repeat("é", 399), strings.Repeat("é", 400), strings.Repeat("é", 401),
	strings.Repeat("a\xff", 300), "\xff\xfe\xfd" + strings.Repeat("b", 500)}

// headTailMatches checks New's head and tail against HeadTail's on texts and on
// headTailEdges, reporting each difference through report (t.Errorf, or t.Fatalf
// to stop at the first).
func headTailMatches(t *testing.T, texts []string, report func(format string, args ...any)) {
	t.Helper()
	for i, text := range append(texts, headTailEdges...) {
		c := New(&transcript.ToolOutput{Key: "k", Text: text}, 0)
		head, tail := HeadTail(text, HeadChars, TailChars)
		if c.Head != head || c.Tail != tail {
			report("text %d %.80q: New gives head %.40q tail %.40q, HeadTail %.40q %.40q", i, text, c.Head, c.Tail, head, tail)
		}
	}
}

// Terms, EachTerm and Corpus.Add are the old terms and counts on the edge cases.
func TestTermsMatchOldOnEdgeCases(t *testing.T) {
	termsMatchOld(t, termCases, t.Errorf)
}

// termsMatchOld checks Terms against oldTerms and EachTerm against Terms on every
// text, reporting each difference through report (t.Errorf, or t.Fatalf to stop at
// the first), then Corpus.Add's counts against the old counts over all of them,
// which it returns.
func termsMatchOld(t *testing.T, texts []string, report func(format string, args ...any)) oldCounts {
	t.Helper()
	c := NewCorpus()
	old := oldCounts{DF: map[string]int{}}
	for i, text := range texts {
		if d := cmp.Diff(oldTerms(text), Terms(text)); d != "" {
			report("text %d %.80q: Terms differ (-old +new):\n%s", i, text, d)
		}
		var each []string
		EachTerm(text, &c.buf, func(term []byte) { each = append(each, string(term)) })
		if d := cmp.Diff(Terms(text), each); d != "" {
			report("text %d %.80q: EachTerm differs from Terms (-Terms +EachTerm):\n%s", i, text, d)
		}
		c.Add(text)
		old.add(text)
	}
	if d := cmp.Diff(old, c.counts()); d != "" {
		t.Errorf("corpus counts differ (-old +new):\n%s", d)
	}
	return old
}

// The byte 0x80 alone (invalid UTF-8: the lowest byte that is not ASCII) is no
// word character: it splits the terms around it, as ranging over the string
// reads it (U+FFFD), in Terms and in a corpus's counts.
func TestTermsSplitAtALone0x80(t *testing.T) {
	text := "ab\x80cd \x80\x80 ef\x80"
	if d := cmp.Diff([]string{"ab", "cd", "ef"}, Terms(text)); d != "" {
		t.Errorf("Terms(%q) (-want +got):\n%s", text, d)
	}
	c := NewCorpus()
	c.Add(text)
	if c.Tokens != 3 || c.DF("ab") != 1 || c.DF("cd") != 1 || c.DF("ef") != 1 {
		t.Errorf("corpus of %q: %d tokens, DF ab %d, cd %d, ef %d; want 3 tokens, each DF 1", text, c.Tokens, c.DF("ab"), c.DF("cd"), c.DF("ef"))
	}
}

// Upper-case ASCII letters are lowered in every term, 'A' and 'Z' (the ends of
// the range) included: EachTerm gives what Terms gives, written out by hand.
func TestEachTermLowersFromAToZ(t *testing.T) {
	text := "ZIP Zebra AZ_9 QUIZ"
	want := []string{"zip", "zebra", "az_9", "quiz"}
	var each []string
	var buf []byte
	EachTerm(text, &buf, func(term []byte) { each = append(each, string(term)) })
	if d := cmp.Diff(want, each); d != "" {
		t.Errorf("EachTerm(%q) (-want +got):\n%s", text, d)
	}
	if d := cmp.Diff(want, Terms(text)); d != "" {
		t.Errorf("Terms(%q) (-want +got):\n%s", text, d)
	}
}
