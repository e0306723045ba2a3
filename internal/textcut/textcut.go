// Package textcut shortens strings, one function for each way of cutting: to a
// number of bytes (Bytes), the same with "..." after a cut (BytesDots), to a number
// of bytes without splitting a UTF-8 sequence (BytesOnRune), and to a number of
// runes with "…" after a cut (RunesEllipsis). Nothing here folds white space or
// repairs invalid UTF-8; package cards cuts card text its own way (cards.Cut).
package textcut

// Bytes returns at most the first n bytes of s: s itself when it has no more.
// The cut may split a UTF-8 sequence: for the head of a text that is scanned for
// ASCII markers, not shown.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// BytesDots returns s when it has at most n bytes, else its first n bytes and
// "..." (three full stops): a value quoted in a log line or an error message. The
// cut may split a UTF-8 sequence (strconv.Quote and %q escape the pieces).
func BytesDots(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// BytesOnRune returns the longest prefix of s of at most n bytes that does not end
// inside a UTF-8 sequence: s itself when it has no more than n bytes; otherwise the
// cut backs off from byte n over continuation bytes (0b10xxxxxx), to "" at worst.
// Invalid bytes are kept as they are.
func BytesOnRune(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// RunesEllipsis returns s when it has at most n runes, else its first n-1 runes
// and "…" (n runes in all). Each invalid UTF-8 byte counts as one rune and, in a
// cut string, becomes U+FFFD. n must be at least 1 when s may be longer.
func RunesEllipsis(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
