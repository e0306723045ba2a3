package recall

import (
	"errors"
	"strings"
	"testing"
)

// A grep pattern may be MaxPatternBytes (1000) long, and no longer: a pattern of
// exactly 1000 bytes is used (it finds the one line that holds it), one of 1001 is
// refused as a bad pattern naming its length.
func TestGrepPatternOfTheMaximumLength(t *testing.T) {
	needle := strings.Repeat("ab", 500) // 1000 bytes, a literal
	original := "first\n" + "x" + needle + "y\n" + "last"
	got, err := Select(original, Part{Grep: needle})
	if err != nil {
		t.Fatalf("a pattern of %d bytes: %v; want it used", len(needle), err)
	}
	if !strings.HasPrefix(got, "2:x"+needle+"y\n") || !strings.Contains(got, "\n[1 line matches ") {
		t.Errorf("a pattern of 1000 bytes: got %.80q...; want line 2 and one match", got)
	}
	_, err = Select(original, Part{Grep: needle + "b"})
	if !errors.Is(err, ErrBadPattern) || !strings.Contains(err.Error(), "is 1001 bytes; want at most 1000") {
		t.Errorf("a pattern of 1001 bytes: %v; want ErrBadPattern naming 1001 bytes", err)
	}
}
