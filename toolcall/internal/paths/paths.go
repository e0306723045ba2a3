// Package paths normalises the file paths tool calls name, so that the same file
// compares equal across calls and agents. toolcall.NormalizePath is its public face;
// toolcall's shell analysis uses it too.
package paths

import (
	"path"
	"strings"
)

// Normalize is toolcall.NormalizePath, documented there: quotes and blanks
// trimmed, backslashes and Windows drive forms made /c/…, a relative path joined to
// cwd (unless cwd is "" or "\x00", unknown), then path.Clean.
func Normalize(p, cwd string) string {
	p = strings.TrimSpace(p)
	p = strings.Trim(p, "\"'`")
	if p == "" {
		return ""
	}
	p = Slash(p)
	if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "~") && cwd != "" && cwd != "\x00" {
		p = Slash(strings.TrimSpace(cwd)) + "/" + p
	}
	return path.Clean(p)
}

// Slash turns backslashes into slashes and drive forms into /c/….
func Slash(s string) string {
	s = strings.ReplaceAll(s, `\`, "/")
	if len(s) >= 2 && s[1] == ':' && isLetter(s[0]) && (len(s) == 2 || s[2] == '/') {
		s = "/" + strings.ToLower(s[:1]) + s[2:]
	}
	for _, pre := range []string{"/cygdrive/", "/mnt/"} {
		n := len(pre)
		if strings.HasPrefix(s, pre) && len(s) > n && isLetter(s[n]) && (len(s) == n+1 || s[n+1] == '/') {
			s = s[n-1:]
		}
	}
	if len(s) >= 2 && s[0] == '/' && s[1] >= 'A' && s[1] <= 'Z' && (len(s) == 2 || s[2] == '/') {
		s = "/" + strings.ToLower(s[1:2]) + s[2:]
	}
	return s
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }
