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
