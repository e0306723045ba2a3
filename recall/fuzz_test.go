package recall

import (
	"bufio"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// FuzzSelect: on any text, range, pattern and context, Select does not panic, fails
// only with ErrBadRange, ErrBadPattern or ErrBadContext, and otherwise answers
// numbered lines that are the original's lines as bufio.ScanLines splits them
// (another splitter than Select's), in order, within the range, ':' exactly for the
// lines the pattern matches, then one bracketed note counting the matches; the zero
// Part gives the text unchanged.
func FuzzSelect(f *testing.F) {
	f.Add(ten, "2-5", "", 0)
	f.Add(ten, "", "(?i)timeout", 1)
	f.Add(ten, "3-", "a$", 2)
	f.Add("a\r\nb\rc\n\n", "1-9", "^$", 0)
	f.Add("", "", "x", 0)
	f.Add("x\n", "0-", "(", 21)
	f.Fuzz(func(t *testing.T, text, lines, grep string, context int) {
		p := Part{Lines: lines, Grep: grep, Context: context}
		got, err := Select(text, p)
		if err != nil {
			if !errors.Is(err, ErrBadRange) && !errors.Is(err, ErrBadPattern) && !errors.Is(err, ErrBadContext) {
				t.Fatalf("Select(%+v) = %v; want a bad range, pattern or context", p, err)
			}
			return
		}
		if p.IsWhole() {
			if got != text {
				t.Fatalf("whole: got %q, want the text", got)
			}
			return
		}
		var ref []string
		sc := bufio.NewScanner(strings.NewReader(text))
		sc.Buffer(nil, len(text)+1)
		for sc.Scan() {
			ref = append(ref, sc.Text())
		}
		var re *regexp.Regexp
		if grep != "" {
			re = regexp.MustCompile(grep)
		}
		from, to := 1, len(ref)
		if lines != "" {
			a, b, dash := strings.Cut(lines, "-")
			from, _ = strconv.Atoi(a)
			switch n, err := strconv.Atoi(b); {
			case !dash:
				to = from
			case b != "" && err == nil && n < to:
				to = n
			}
		}
		out := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if !strings.HasSuffix(got, "\n") || len(out) == 0 {
			t.Fatalf("answer %q: want lines ending in \\n", got)
		}
		body, notes := out, []string(nil)
		for i, l := range out {
			if strings.HasPrefix(l, "[") && !strings.Contains(l[:min(len(l), 12)], ":") {
				body, notes = out[:i], out[i:]
				break
			}
		}
		if len(notes) == 0 || len(notes) > 2 {
			t.Fatalf("answer %q: want one or two bracketed notes at the end", got)
		}
		last, matches := 0, 0
		for _, l := range body {
			if l == "--" && context > 0 {
				continue
			}
			k := strings.IndexAny(l, ":-")
			n, err := strconv.Atoi(l[:max(k, 0)])
			if k <= 0 || err != nil || n <= last || n < from || n > to {
				t.Fatalf("line %q of %q: want a number after %d in %d-%d, then : or -", l, got, last, from, to)
			}
			last = n
			shown, want := l[k+1:], ref[n-1]
			if shown != want && !(strings.HasSuffix(shown, " more bytes]") && strings.HasPrefix(want, shown[:strings.LastIndex(shown, " [… ")])) {
				t.Fatalf("line %d shown %q; the original's is %q", n, shown, want)
			}
			isMatch := re == nil || re.MatchString(want)
			if (l[k] == ':') != isMatch {
				t.Fatalf("line %q: mark %q, but the pattern matches it: %v", l, l[k], isMatch)
			}
			if re == nil && n != from+matches {
				t.Fatalf("line %d after %d lines from %d: want the range in order", n, matches, from)
			}
			if isMatch {
				matches++
			}
		}
		if re != nil {
			all := 0
			for n := from; n <= to; n++ {
				if re.MatchString(ref[n-1]) {
					all++
				}
			}
			if want := fmt.Sprintf("%d line", all); all == 0 && !strings.HasPrefix(notes[0], "[no line matches") ||
				all > 0 && !strings.HasPrefix(notes[0], "["+want) {
				t.Fatalf("note %q: want %d matches", notes[0], all)
			}
			if len(notes) == 1 && matches != all {
				t.Fatalf("%d matching lines shown of %d, and no note that the limits stopped them", matches, all)
			}
		} else if len(notes) == 1 && last != to {
			t.Fatalf("lines shown to %d, want to %d: no note that the limits stopped them", last, to)
		}
	})
}
