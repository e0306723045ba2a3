package cards

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Corpus counts, for one session, in how many tool outputs each term occurs. The
// advisor adds each output once, when it appears (DESIGN.md step 1), so scorers can
// weigh terms by rarity (IDF) without rescanning the session.
type Corpus struct {
	Docs   int // outputs added
	Tokens int // total terms over all outputs added (for average length)
	// terms maps a term to its index in df, the number of outputs containing it.
	// Counting a term again changes df, never the map: Go's map assignment stores
	// the key it is given, and a term is a piece of its output's text, so assigning
	// would keep that whole output alive (what the proxy's memory showed: every
	// output a term was last counted from, pinned).
	terms map[string]int32
	df    []int
	last  []int32 // by term index: the number (Docs) of the last output that counted it
	buf   []byte  // scratch of Add: the lowered term
}

// NewCorpus returns an empty corpus.
func NewCorpus() *Corpus { return &Corpus{terms: map[string]int32{}} }

// DF is the number of outputs added that contain term (0 for an unknown term or a
// nil corpus).
func (c *Corpus) DF(term string) int {
	if c == nil {
		return 0
	}
	if i, ok := c.terms[term]; ok {
		return c.df[i]
	}
	return 0
}

// Add counts one output's text: Docs by one, Tokens by len(Terms(text)), and the
// DF of each distinct term of Terms(text) by one. It reads the text once and does
// not allocate for a term the corpus knows (the lowered term is built in a reused
// buffer and looked up without conversion).
func (c *Corpus) Add(text string) {
	c.Docs++
	doc := int32(c.Docs)
	EachTerm(text, &c.buf, func(t []byte) {
		c.Tokens++
		if i, ok := c.terms[string(t)]; ok { // no allocation: the key is not kept
			if c.last[i] != doc {
				c.last[i] = doc
				c.df[i]++
			}
			return
		}
		c.terms[string(t)] = int32(len(c.df)) // a new string: t is the reused buffer
		c.df = append(c.df, 1)
		c.last = append(c.last, doc)
	})
}

// AvgLen returns the mean number of terms per output (0 for an empty corpus).
func (c *Corpus) AvgLen() float64 {
	if c == nil || c.Docs == 0 {
		return 0
	}
	return float64(c.Tokens) / float64(c.Docs)
}

// Terms splits text into lower-cased terms for lexical matching: runs of letters,
// digits and '_' (unicode.IsLetter, unicode.IsDigit) of at least 2 bytes, each
// lowered by strings.ToLower; a path or dotted name also yields its parts
// ("src/get.rs" gives "src", "get", "rs"). No stop list: common words are
// down-weighted by IDF instead.
func Terms(text string) []string {
	var out []string
	eachRun(text, func(start, end int, _ bool) {
		out = append(out, strings.ToLower(text[start:end]))
	})
	return out
}

// wordByte[b] reports whether the ASCII byte b is a word character (a letter, a
// digit or '_'); bytes >= 0x80 start a rune that unicode decides.
var wordByte = func() (t [utf8.RuneSelf]bool) {
	for b := range t {
		r := rune(b)
		t[b] = unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'
	}
	return t
}()

// eachRun calls f with the bounds of each run of word characters of text of at
// least 2 bytes, in order, and whether the run is all ASCII. An invalid UTF-8 byte
// is utf8.RuneError, not a word character, as ranging over the string reads it.
func eachRun(text string, f func(start, end int, ascii bool)) {
	n := len(text)
	for i := 0; i < n; {
		if b := text[i]; b < utf8.RuneSelf {
			if !wordByte[b] {
				i++
				continue
			}
		} else if r, size := utf8.DecodeRuneInString(text[i:]); !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			i += size
			continue
		}
		// a run starts at i: consume its word characters
		start, ascii := i, true
		for i < n {
			if b := text[i]; b < utf8.RuneSelf {
				if !wordByte[b] {
					break
				}
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(text[i:])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				break
			}
			ascii = false
			i += size
		}
		if i-start >= 2 {
			f(start, i, ascii)
		}
	}
}

// EachTerm calls f with each term of Terms(text), in order, lowered into *buf (so
// valid only during the call; a map lookup m[string(term)] does not allocate): an
// ASCII run is lowered byte by byte, exactly as strings.ToLower lowers ASCII; any
// other run goes through strings.ToLower. TestEachTerm checks it against Terms.
func EachTerm(text string, buf *[]byte, f func(term []byte)) {
	eachRun(text, func(start, end int, ascii bool) {
		b := (*buf)[:0]
		if ascii {
			for i := start; i < end; i++ {
				c := text[i]
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				b = append(b, c)
			}
		} else {
			b = append(b, strings.ToLower(text[start:end])...)
		}
		*buf = b
		f(b)
	})
}
