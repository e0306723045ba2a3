package recall

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The byte limit of a partial recall is on the numbered lines as shown, "N:",
// the (cut) text, its cut note and "\n" counted: lines that come to exactly
// MaxPartBytes are all shown; one byte more and the last of them waits for the
// next ask. Line 1 is t bytes of "a" (t + 3 bytes shown); lines 2-50 are 2,500
// bytes of "x", each shown as 2,000 bytes and " [… 500 more bytes]" (21 bytes):
// 2,024 bytes for lines 2-9, 2,025 for 10-50, 99,217 in all; line 51 is "z". With
// t = 780 lines 1-50 are 100,000 bytes (worked again in Python: a loop adding the
// shown lines' bytes).
func TestPartialRecallFillsTheByteLimitExactly(t *testing.T) {
	original := func(first int) string {
		return strings.Repeat("a", first) + "\n" + strings.Repeat(strings.Repeat("x", 2500)+"\n", 49) + "z"
	}
	for _, tt := range []struct {
		first             int
		shown             int // lines shown
		bytes             int // their bytes
		lastNote, stopped string
	}{
		{780, 50, 100_000, "[lines 1-50 of 51]",
			`[stopped after line 50 (at most 2000 lines, 100000 bytes): ask for lines="51-51" for more]`},
		{781, 49, 97_976, "[lines 1-49 of 51]",
			`[stopped after line 49 (at most 2000 lines, 100000 bytes): ask for lines="50-51" for more]`},
	} {
		got, err := Select(original(tt.first), Part{Lines: "1-"})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(got, "\n")
		lines = lines[:len(lines)-1] // after the final "\n"
		if len(lines) != tt.shown+2 {
			t.Fatalf("line 1 of %d bytes: %d lines in the answer; want %d shown and two notes", tt.first, len(lines), tt.shown)
		}
		if n := len(strings.Join(lines[:tt.shown], "")); n != tt.bytes {
			t.Errorf("line 1 of %d bytes: %d bytes of lines shown; want %d", tt.first, n, tt.bytes)
		}
		if want := "50:" + strings.Repeat("x", 2000) + " [… 500 more bytes]\n"; tt.shown == 50 && lines[49] != want {
			t.Errorf("line 50 shown as %.40q...; want it cut at 2,000 bytes", lines[49])
		}
		if d := cmp.Diff([]string{tt.lastNote + "\n", tt.stopped + "\n"}, lines[tt.shown:]); d != "" {
			t.Errorf("line 1 of %d bytes: notes (-want +got):\n%s", tt.first, d)
		}
	}
}

// A line of exactly MaxLineBytes (2,000) is shown whole; one of 2,001 is cut to
// 2,000 and says 1 more byte.
func TestLineOfTheMaximumLengthShownWhole(t *testing.T) {
	line := strings.Repeat("q", 2000)
	got, err := Select("a\n"+line+"\nb\n"+line+"r", Part{Grep: "q"})
	if err != nil {
		t.Fatal(err)
	}
	want := "2:" + line + "\n4:" + line + " [… 1 more bytes]\n[2 lines match \"q\" in all 4 lines]\n"
	if got != want {
		t.Errorf("got %d bytes ending %q; want %d bytes ending %q", len(got), got[max(0, len(got)-60):], len(want), want[len(want)-60:])
	}
}

// A long line of bytes that are not UTF-8 (binary output: 2,500 continuation
// bytes, not one character start to cut at) is cut to nothing and says so, never a
// panic.
func TestLongBinaryLineIsCut(t *testing.T) {
	got, err := Select("ok\n"+strings.Repeat("\x80", 2500), Part{Lines: "2"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "2: [… 2500 more bytes]\n[lines 2-2 of 2]\n"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}
