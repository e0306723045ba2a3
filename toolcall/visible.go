package toolcall

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
)

var showingLines = regexp.MustCompile(`Showing lines (\d+)-(\d+) of (\d+)`)

// elisions are markers of output cut in the middle (seen in ../shared/sessions:
// Claude Code Bash "[N characters truncated]", mini-swe-agent <elided_chars>;
// Codex "tokens truncated"; SWE-agent/OpenHands "<response clipped>").
var elisions = []string{
	"characters truncated]", "<elided_chars>", "tokens truncated", "chars truncated",
	"<response clipped>", "[... omitted", "lines omitted", "output truncated",
	"the output of your last command was too long",
}

// elisionMin is the length of the shortest elision marker: the window of
// hasElision's scan.
var elisionMin = func() int {
	m := len(elisions[0])
	for _, e := range elisions {
		m = min(m, len(e))
	}
	return m
}()

// elisionShift is the scan's shift table (Wu and Manber, "A fast algorithm for
// multi-pattern searching", TR-94-17, University of Arizona, 1994, with blocks of
// two bytes): for the two bytes that end the window, ASCII letters lowered (a
// block, foldBlock), how far the window may move on without passing the start of
// a marker. For a block in no marker's first elisionMin bytes that is
// elisionMin-1; 0 when it ends some marker's first elisionMin bytes, where the
// markers are compared.
var elisionShift = func() (t [1 << 16]uint8) {
	m := elisionMin
	for i := range t {
		t[i] = uint8(m - 1)
	}
	for _, e := range elisions {
		for q := 2; q <= m; q++ { // the block e[q-2:q] ends q bytes into the window
			k := foldBlock(e[q-2], e[q-1])
			t[k] = min(t[k], uint8(m-q))
		}
	}
	return t
}()

// foldBlock is the block of the bytes a, b: each lowered when an ASCII letter.
func foldBlock(a, b byte) int { return int(lowerASCII(a))<<8 | int(lowerASCII(b)) }

// lowerASCII lowers an ASCII upper-case letter, and returns any other byte as is.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// VisibleRange returns the lines of a read the output text really shows, given the
// range r the call asked for: a "Showing lines A-B of N" note (pi read and bash,
// Gemini read_file) narrows a whole-file read to A-B (a partial read with such a note,
// or Gemini's whole-file read with cut lines, becomes Unknown), and an elision marker
// in the middle makes it Unknown. Otherwise r is returned unchanged.
func VisibleRange(r Range, text string) Range {
	head := textcut.Bytes(text, 800)
	tail := text
	if len(tail) > 800 {
		tail = tail[len(tail)-800:]
	}
	m := showingLines.FindStringSubmatch(tail)
	if m == nil {
		m = showingLines.FindStringSubmatch(head)
	}
	if m != nil {
		if !r.Whole() {
			return UnknownRange()
		}
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		if a <= 1 && b >= n || b < a {
			return UnknownRange() // every line shown yet "truncated": lines were cut
		}
		return Range{Start: max(a, 1), End: b}
	}
	if hasElision(text) {
		return UnknownRange()
	}
	return r
}

// hasElision reports whether strings.ToLower(text) contains one of the elisions,
// without building a lowered copy of a text that has no elision marker: the markers
// are ASCII, and the only non-ASCII runes whose lower case is ASCII are U+0130 ('İ'
// to 'i') and U+212A (Kelvin sign to 'k'), so unless text holds one of those, a
// marker occurs in the lowered text exactly where it occurs in the text with only
// its ASCII letters lowered (bytes >= 0x80 never match an ASCII byte).
func hasElision(text string) bool {
	if strings.Contains(text, "\u0130") || strings.Contains(text, "\u212A") {
		low := strings.ToLower(text)
		for _, e := range elisions {
			if strings.Contains(low, e) {
				return true
			}
		}
		return false
	}
	return hasElisionFold(text)
}

// hasElisionFold reports whether text, with its ASCII letters lowered, contains one
// of the elisions. A window of elisionMin bytes moves over text by the shift of
// the block that ends it (elisionShift), and only where that is 0 are the markers
// compared with the text from the window's start: one pass that looks at one block
// in several bytes. The nine passes before, one per marker from a rarer anchor
// byte, stopped at about one byte in ten of tool output ('u', 'm', 'p', 'y', 'k'
// in both cases): 2.2 of the rules' 3.1 ms on a first request of 200,000 tokens.
func hasElisionFold(text string) bool {
	m := elisionMin
	for end := m - 1; end < len(text); {
		if s := elisionShift[foldBlock(text[end-1], text[end])]; s > 0 {
			end += int(s)
			continue
		}
		start := end - m + 1
		for _, e := range elisions {
			if start+len(e) <= len(text) && equalASCIIFold(text[start:start+len(e)], e) {
				return true
			}
		}
		end++
	}
	return false
}

// equalASCIIFold reports whether s with its ASCII letters lowered equals pat
// (ASCII lower case, as long as s).
func equalASCIIFold(s, pat string) bool {
	for k := 0; k < len(pat); k++ {
		b := s[k]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if b != pat[k] {
			return false
		}
	}
	return true
}
