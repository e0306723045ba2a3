package main

import (
	"strconv"
	"unicode/utf8"
)

// safe makes text from a session file harmless in a human table: a value holding a
// character a terminal would act on or not show (C0 and C1 controls such as ESC, BEL
// and NUL, DEL, tabs and newlines, Unicode format characters such as the bidi
// overrides U+202A-202E and zero-width spaces, bytes that are not UTF-8) is printed
// quoted and escaped as %q does (strconv.Quote, which keeps printable non-ASCII
// letters); any other value is printed as it is. So a set-title or clear-screen
// sequence in a command shows as "printf '\x1b]0;pwned\a'" instead of acting, and the
// quotes mark the values that were escaped. --json output is left alone: its encoder
// escapes control characters itself.
func safe(s string) string {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return strconv.Quote(s)
			}
			continue
		}
		if r != ' ' && !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// safeAll is safe applied to each of ss, in a new slice.
func safeAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = safe(s)
	}
	return out
}
