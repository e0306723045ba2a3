package recall

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// An argument too long to show whole is cut in the error message at 60 bytes, back
// to the start of a character: the agent reads its own argument's beginning, never
// a broken character. "1-x" then 40 two-byte "é": byte 60 falls inside the 29th "é"
// (3 + 28 x 2 = 59), so the message shows "1-x" and 28 of them.
func TestLongArgumentCutOnACharacter(t *testing.T) {
	lines := "1-x" + strings.Repeat("é", 40)
	_, err := Select(ten, Part{Lines: lines})
	if !errors.Is(err, ErrBadRange) {
		t.Fatalf("Select(lines %q) error = %v, want ErrBadRange", lines, err)
	}
	want := `bad line range: lines "1-x` + strings.Repeat("é", 28) + `"...: `
	if !strings.HasPrefix(err.Error(), want) || !utf8.ValidString(err.Error()) {
		t.Errorf("error = %q, want it to start %q", err, want)
	}
	// A grep pattern over the byte limit the same way: "(" then 600 "ü" is 1,201
	// bytes; byte 60 falls inside the 30th "ü" (1 + 29 x 2 = 59).
	grep := "(" + strings.Repeat("ü", 600)
	_, err = Select(ten, Part{Grep: grep})
	want = `bad pattern: grep "(` + strings.Repeat("ü", 29) + `"... is 1201 bytes; want at most 1000`
	if !errors.Is(err, ErrBadPattern) || err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// An argument of exactly 60 bytes is short enough to show whole: the message
// quotes all of it, with no "..." after it.
func TestArgumentOfSixtyBytesShownWhole(t *testing.T) {
	lines := "1-" + strings.Repeat("y", 58) // 60 bytes
	_, err := Select(ten, Part{Lines: lines})
	want := `bad line range: lines "` + lines + `": `
	if !errors.Is(err, ErrBadRange) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %v, want an ErrBadRange starting %q", err, want)
	}
}

// A grep pattern that is not UTF-8 (here 70 continuation bytes, no character
// start among them) is refused as a bad pattern with an error, never a panic,
// although no character boundary is left to cut its quote at.
func TestPatternNotUTF8IsRefused(t *testing.T) {
	grep := strings.Repeat("\x80", 70)
	_, err := Select(ten, Part{Grep: grep})
	if !errors.Is(err, ErrBadPattern) || !strings.HasPrefix(err.Error(), `bad pattern: grep ""...: `) {
		t.Errorf("error = %v, want an ErrBadPattern quoting nothing of the pattern", err)
	}
}

// An id of exactly 40 bytes is quoted whole in the error, without "..." or a
// byte count; one of 41 is cut to its first 40 bytes and says 41.
func TestInvalidIDOfFortyBytesShownWhole(t *testing.T) {
	for _, tt := range []struct{ id, want string }{
		{strings.Repeat("k", 40), `recall "` + strings.Repeat("k", 40) + `": invalid recall id`},
		{strings.Repeat("k", 41), `recall "` + strings.Repeat("k", 40) + `"... (41 bytes): invalid recall id`},
	} {
		_, err := New(&fakeStore{}).Recall(t.Context(), tt.id)
		if !errors.Is(err, ErrInvalidID) || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Recall(%d bytes) = %v, want ErrInvalidID starting %q", len(tt.id), err, tt.want)
		}
	}
}
