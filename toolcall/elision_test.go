package toolcall_test

import (
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// oldHasElision is the elision test VisibleRange made before hasElision: a lowered
// copy of the whole text, searched for each marker. The reference hasElision must
// agree with on every text.
func oldHasElision(text string) bool {
	low := strings.ToLower(text)
	for _, e := range toolcall.Elisions {
		if strings.Contains(low, e) {
			return true
		}
	}
	return false
}

// elisionCases are edge cases of the fold: markers in upper and mixed case, at both
// ends, split by a non-ASCII byte, spelled with the two non-ASCII runes whose lower
// case is ASCII (U+0130 and U+212A), invalid UTF-8, empty and huge texts.
var elisionCases = []string{
	"",
	"t",
	"tokens truncated",
	"TOKENS TRUNCATED",
	"... [12 Characters Truncated] ...",
	"xx<ELIDED_CHARS>yy",
	"<response clipped><NOTE>",
	"The Output Of Your Last Command Was Too Long",
	"tokens trunca",
	"tokens\u00a0truncated",
	"tokens tr\u00fcncated",
	"output truncaTED",
	"\u0130",
	"l\u0130nes omitted",      // İ lowers to i: a marker in the lowered text
	"to\u212Aens truncated",   // Kelvin sign lowers to k
	"toKens truncated \u212A", // ASCII K, a Kelvin sign elsewhere
	"tokens truncated\xff",    // invalid UTF-8 after a marker
	"tok\xffens truncated",    // invalid UTF-8 inside one
	"[... OMITTED 3 lines]",
	"[...  omitted",
	strings.Repeat("T", 10000) + "tokens truncated",
	strings.Repeat("Tt", 10000),
	strings.Repeat("é", 5000) + "LINES OMITTED" + strings.Repeat("ü", 5000),
	strings.Repeat("a", 1<<20),
}

func TestHasElisionMatchesLowerCopy(t *testing.T) {
	// The shift table by hand: the markers' shortest is "[... omitted" (12 bytes);
	// "ed" ends it; "om" ends "lines om" (4 bytes to the window's end), "s " ends
	// "characters " (1 byte to go); "zq" is in no marker.
	for _, c := range []struct {
		block string
		shift uint8
	}{{"ed", 0}, {"ED", 0}, {"om", 4}, {"zq", 11}, {"s ", 1}} {
		if got := toolcall.ElisionShift[toolcall.FoldBlock(c.block[0], c.block[1])]; toolcall.ElisionMin != 12 || got != c.shift {
			t.Errorf("shift of %q = %d (window %d), want %d (window 12)", c.block, got, toolcall.ElisionMin, c.shift)
		}
	}
	texts := append([]string(nil), elisionCases...)
	files := sessionfiles.Sample("../../shared")
	found := 0
	for _, f := range files {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			continue
		}
		for _, o := range s.Outputs() {
			texts = append(texts, o.Text)
			if oldHasElision(o.Text) {
				found++
			}
		}
	}
	if found < 20 {
		t.Errorf("only %d real outputs hold an elision marker", found)
	}
	for _, text := range texts {
		if got, want := toolcall.HasElision(text), oldHasElision(text); got != want {
			t.Errorf("hasElision(%.60q) = %v, the lowered copy says %v", text, got, want)
		}
	}
	// Known answers (independent of both implementations): these hold a marker.
	for _, text := range []string{"TOKENS TRUNCATED", "l\u0130nes omitted", "to\u212Aens truncated", "[... OMITTED 3 lines]"} {
		if !toolcall.HasElision(text) {
			t.Errorf("hasElision(%q) = false, want true", text)
		}
	}
	for _, text := range []string{"", "tokens trunca", "tok\xffens truncated", "tokens tr\u00fcncated"} {
		if toolcall.HasElision(text) {
			t.Errorf("hasElision(%q) = true, want false", text)
		}
	}
}

func FuzzHasElision(f *testing.F) {
	for _, text := range elisionCases[:20] {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := toolcall.HasElision(text), oldHasElision(text); got != want {
			t.Errorf("hasElision(%q) = %v, the lowered copy says %v", text, got, want)
		}
	})
}

// BenchmarkHasElision runs hasElision over the outputs of two real pi sessions that
// hold no marker (so every text is scanned to its end), 1.3 MB in all.
func BenchmarkHasElision(b *testing.B) {
	var texts []string
	n := 0
	for _, f := range []string{"../../shared/sessions/pi/session.jsonl", "../../shared/sessions/pi/before-compaction.jsonl"} {
		s, err := transcript.ReadFile(f, transcript.Options{Lenient: true})
		if err != nil {
			b.Skip(err)
		}
		for _, o := range s.Outputs() {
			if !oldHasElision(o.Text) {
				texts = append(texts, o.Text)
				n += len(o.Text)
			}
		}
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, t := range texts {
			if toolcall.HasElision(t) {
				b.Fatal("found a marker the lowered copy does not hold")
			}
		}
	}
}
