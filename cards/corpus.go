package cards

import (
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Corpus counts, for one session, in how many tool outputs each term occurs. The
// advisor adds each output once, when it appears (docs/DESIGN.md step 1), so scorers can
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
	// short is a direct-mapped table in front of terms for terms of at most 8
	// bytes (most of them): one slot per hash of the term's bytes packed in a
	// word, no probing and no string compare, a colliding term taking the slot
	// over. Allocated by the first Add.
	short *[1 << shortTermBits]shortTerm
}

// shortTermBits sizes Corpus.short: 2,048 slots of 16 bytes (32 KB a session).
const shortTermBits = 11

// shortTerm is a slot of Corpus.short: a term of size bytes (0: empty) packed into
// key (little end first), and its index in df.
type shortTerm struct {
	key  uint64
	idx  int32
	size uint8
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
	if c.short == nil {
		c.short = new([1 << shortTermBits]shortTerm)
	}
	EachTerm(text, &c.buf, func(t []byte) {
		c.Tokens++
		i := c.index(t)
		if c.last[i] != doc {
			c.last[i] = doc
			c.df[i]++
		}
	})
}

// index returns the index in df of term t, adding it (df 0, never counted) when new.
func (c *Corpus) index(t []byte) int32 {
	var slot *shortTerm
	var k uint64
	if len(t) <= 8 {
		for j := len(t) - 1; j >= 0; j-- {
			k = k<<8 | uint64(t[j])
		}
		// Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4)
		slot = &c.short[((k^uint64(len(t))<<61)*0x9e3779b97f4a7c15)>>(64-shortTermBits)]
		if slot.key == k && int(slot.size) == len(t) {
			return slot.idx
		}
	}
	i, ok := c.terms[string(t)] // no allocation: the key is not kept
	if !ok {
		i = int32(len(c.df))
		c.terms[string(t)] = i // a new string: t is the reused buffer or the text
		c.df = append(c.df, 0)
		c.last = append(c.last, 0)
	}
	if slot != nil {
		*slot = shortTerm{key: k, idx: i, size: uint8(len(t))}
	}
	return i
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
	eachRun(text, func(start, end, _ int) {
		out = append(out, strings.ToLower(text[start:end]))
	})
	return out
}

// Byte classes of wordClass: a byte that is no word character, one that is and
// needs no lowering (a lower-case letter, a digit, '_'), and an upper-case letter.
const (
	notWord = iota
	wordLower
	wordUpper
)

// wordClass[b] classes the ASCII byte b as a word character (a letter, a digit or
// '_') or not, and tells the upper-case letters apart; bytes >= 0x80 start a rune
// that unicode decides.
var wordClass = func() (t [utf8.RuneSelf]uint8) {
	for b := range t {
		r := rune(b)
		switch {
		case 'A' <= r && r <= 'Z':
			t[b] = wordUpper
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			t[b] = wordLower
		}
	}
	return t
}()

// Lowerings of eachRun's runs: none needed (ASCII with no upper-case letter), ASCII
// upper-case letters to lower, or strings.ToLower (a run with a multi-byte rune).
const (
	foldNone = iota
	foldASCII
	foldUnicode
)

// eachRun calls f with the bounds of each run of word characters of text of at
// least 2 bytes, in order, and the lowering the run needs (foldNone, foldASCII,
// foldUnicode). An invalid UTF-8 byte is utf8.RuneError, not a word character, as
// ranging over the string reads it.
func eachRun(text string, f func(start, end, fold int)) {
	n := len(text)
	for i := 0; i < n; {
		if b := text[i]; b < utf8.RuneSelf {
			if wordClass[b] == notWord {
				i++
				continue
			}
		} else if r, size := utf8.DecodeRuneInString(text[i:]); !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			i += size
			continue
		}
		// a run starts at i: consume its word characters
		start, classes, ascii := i, uint8(0), true
		for i < n {
			if b := text[i]; b < utf8.RuneSelf {
				k := wordClass[b]
				if k == notWord {
					break
				}
				classes |= k
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
			fold := foldNone
			switch {
			case !ascii:
				fold = foldUnicode
			case classes&wordUpper != 0:
				fold = foldASCII
			}
			f(start, i, fold)
		}
	}
}

// EachTerm calls f with each term of Terms(text), in order, valid only during the
// call, which must not change it (a map lookup m[string(term)] does not allocate):
// a run of lower-case ASCII letters, digits and '_' is the text's own bytes; any
// other ASCII run is lowered byte by byte into *buf, exactly as strings.ToLower
// lowers ASCII; any other run goes through strings.ToLower into *buf. Handing over
// the text's bytes instead of a copy took a quarter off Corpus.Add.
// TestEachTerm checks it against Terms.
func EachTerm(text string, buf *[]byte, f func(term []byte)) {
	whole := unsafe.Slice(unsafe.StringData(text), len(text)) // read only: f must not write
	eachRun(text, func(start, end, fold int) {
		switch fold {
		case foldNone:
			f(whole[start:end:end])
			return
		case foldASCII:
			b := append((*buf)[:0], text[start:end]...)
			for k, c := range b {
				if 'A' <= c && c <= 'Z' {
					b[k] = c + 'a' - 'A'
				}
			}
			*buf = b
		default:
			*buf = append((*buf)[:0], strings.ToLower(text[start:end])...)
		}
		f(*buf)
	})
}
