package cards

import (
	"strings"
	"unicode"
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

// Add counts one output's text.
func (c *Corpus) Add(text string) {
	terms := Terms(text)
	c.Docs++
	c.Tokens += len(terms)
	seen := make(map[string]struct{}, len(terms))
	for _, t := range terms {
		if _, ok := seen[t]; ok {
			continue
		}
		seen[t] = struct{}{}
		if i, ok := c.terms[t]; ok {
			c.df[i]++
		} else {
			c.terms[strings.Clone(t)] = int32(len(c.df)) // a copy: t is a piece of text
			c.df = append(c.df, 1)
		}
	}
}

// AvgLen returns the mean number of terms per output (0 for an empty corpus).
func (c *Corpus) AvgLen() float64 {
	if c == nil || c.Docs == 0 {
		return 0
	}
	return float64(c.Tokens) / float64(c.Docs)
}

// Terms splits text into lower-cased terms for lexical matching: runs of letters,
// digits and '_' of at least 2 characters; a path or dotted name also yields its
// parts ("src/get.rs" gives "src", "get", "rs"). No stop list: common words are
// down-weighted by IDF instead.
func Terms(text string) []string {
	var out []string
	start := -1
	for i, r := range text {
		word := unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'
		if word && start < 0 {
			start = i
		}
		if !word && start >= 0 {
			if i-start >= 2 {
				out = append(out, strings.ToLower(text[start:i]))
			}
			start = -1
		}
	}
	if start >= 0 && len(text)-start >= 2 {
		out = append(out, strings.ToLower(text[start:]))
	}
	return out
}
