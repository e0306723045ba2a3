package evidence

// The tokenizer as it was before the byte-class table and the word-run fast path
// (H21), kept as the reference TestVisitNamesMatchesRef and FuzzVisitNames compare
// the tokenizer with, emission by emission.

import "strings"

func refIsWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}

func refIsCompoundByte(b byte) bool {
	return refIsWordByte(b) || b == '.' || b == '/' || b == '-' || b == '~'
}

func refIsLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

func refIsUpper(b byte) bool { return b >= 'A' && b <= 'Z' }

func refHasWordByte(s string) bool {
	for i := 0; i < len(s); i++ {
		if refIsWordByte(s[i]) {
			return true
		}
	}
	return false
}

// refPlainWord reports whether s (a lone identifier) is spelled like an ordinary
// word: letters only, no upper-case letter after the first.
func refPlainWord(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !refIsLetter(b) || i > 0 && refIsUpper(b) {
			return false
		}
	}
	return true
}

// refVisitNames is the tokenizer documented on Names. emit receives each name with the
// group of the compound or quoted string it came from (*g counts groups) and
// whether it is a prose word.
func refVisitNames(text string, g *int32, emit emitFunc) {
	n := len(text)
	codeEnd := 0   // text[:codeEnd] up to here is inside a quoted string or fence
	fenceEnd := -1 // index of the closing fence of the open fenced block
	joinAt, joinGroup := -1, int32(0)
	for i := 0; i < n; {
		b := text[i]
		if b == '`' && strings.HasPrefix(text[i:], fence) {
			if i == fenceEnd {
				fenceEnd = -1
			} else if fenceEnd < 0 {
				k := strings.Index(text[i+3:], fence)
				if k < 0 {
					fenceEnd = n
				} else {
					fenceEnd = i + 3 + k
				}
				codeEnd = max(codeEnd, fenceEnd)
			}
			i += 3
			continue
		}
		if b == '"' || b == '\'' || b == '`' {
			if end := refVisitQuoted(text, i, g, emit); end > 0 {
				codeEnd = max(codeEnd, end)
				whole := end > i+1
				for k := i + 1; k < end; k++ {
					whole = whole && refIsCompoundByte(text[k])
				}
				if whole { // one run between the quotes: the run is the quoted string's compound
					joinAt, joinGroup = i+1, *g
				}
			}
			i++
			continue
		}
		if !refIsCompoundByte(b) {
			i++
			continue
		}
		start := i
		drive := false
		if refIsLetter(b) && i+3 < n && text[i+1] == ':' && (text[i+2] == '\\' || text[i+2] == '/') &&
			(i == 0 || !refIsWordByte(text[i-1])) && refIsWordByte(text[i+3]) {
			drive = true
			i += 3
		}
		for i < n && (refIsCompoundByte(text[i]) || drive && text[i] == '\\') {
			i++
		}
		group := joinGroup
		if start != joinAt {
			*g++
			group = *g
		}
		refVisitCompound(text[start:i], drive, start < codeEnd, group, emit)
	}
}

// refVisitQuoted emits the quoted string opening at text[i], if it is one, and
// returns the index of its closing quote (0 when it is not one).
func refVisitQuoted(text string, i int, g *int32, emit emitFunc) int {
	q := text[i]
	if i > 0 && refIsWordByte(text[i-1]) {
		return 0
	}
	end := min(len(text), i+2+MaxQuotedLen)
	for j := i + 1; j < end; j++ {
		c := text[j]
		if c == '\n' || c == '\r' {
			return 0
		}
		if c != q {
			continue
		}
		if j+1 < len(text) && refIsWordByte(text[j+1]) {
			return 0
		}
		s := text[i+1 : j]
		if len(s) < MinNameLen || s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || !refHasWordByte(s) {
			return 0
		}
		*g++
		emit(s, *g, 0)
		return j
	}
	return 0
}

// refVisitCompound emits the names of one compound run (see Names); code reports that
// it lies inside a quoted string or fenced block.
func refVisitCompound(s string, drive, code bool, group int32, emit emitFunc) {
	if !drive {
	trim:
		for len(s) > 0 {
			switch {
			case strings.HasPrefix(s, "./"):
				s = s[2:]
			case strings.HasPrefix(s, "../"):
				s = s[3:]
			case s[0] == '.' || s[0] == '-':
				s = s[1:]
			default:
				break trim
			}
		}
	}
	for len(s) > 0 {
		c := s[len(s)-1]
		if c != '.' && c != '-' && c != '/' && c != '~' && c != '\\' {
			break
		}
		s = s[:len(s)-1]
	}
	if len(s) < MinNameLen || len(s) > MaxNameLen || !refHasWordByte(s) {
		return
	}
	if drive {
		s = strings.ReplaceAll(s, `\`, "/")
	}
	if drive || strings.IndexByte(s, '/') >= 0 {
		emit(s, group, 0)
		for j := 0; j < len(s)-1; j++ {
			if s[j] != '/' {
				continue
			}
			suf := s[j+1:]
			if len(suf) >= MinNameLen && suf[0] != '/' && refHasWordByte(suf) {
				emit(suf, group, 0)
			}
		}
		base := s[strings.LastIndexByte(s, '/')+1:]
		if refIndexDotDash(base) >= 0 {
			refEmitParts(base, group, emit)
		}
		return
	}
	if refIndexDotDash(s) >= 0 {
		emit(s, group, 0)
		refEmitParts(s, group, emit)
		return
	}
	emit(s, group, proseFlag(!code && refPlainWord(s)))
}

// refIndexDotDash is strings.IndexAny(s, ".-") for the short strings of names,
// without IndexAny's set building.
func refIndexDotDash(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' || s[i] == '-' {
			return i
		}
	}
	return -1
}

// refEmitParts emits the pieces of s split at '.' and '-' that are long enough.
func refEmitParts(s string, group int32, emit emitFunc) {
	for len(s) > 0 {
		k := refIndexDotDash(s)
		part := s
		if k >= 0 {
			part, s = s[:k], s[k+1:]
		} else {
			s = ""
		}
		if len(part) >= MinNameLen && refHasWordByte(part) {
			emit(part, group, namePart)
		}
	}
}
