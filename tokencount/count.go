// Package tokencount counts tokens: the o200k_base tokens of a text (Count), by
// the tokenizer of github.com/tiktoken-go/tokenizer behind a pre-split done by hand
// and two caches, and of a request body's tool definitions (Tools). Every size the
// advisor, the proxy and the scorers reason about is in these tokens.
package tokencount

import (
	"hash/maphash"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/tiktoken-go/tokenizer"
)

// ExactLimit is the text length, in bytes, up to which Count runs the
// o200k_base tokenizer over the whole text. Longer texts are tokenized over their
// first ExactLimit bytes and the count is scaled by length; the tokenizer runs at
// roughly a few MB/s, and a 50 MB output would otherwise stall indexing for tens of
// seconds for a figure that only needs to be close.
const ExactLimit = 256 << 10

var (
	codecOnce sync.Once
	codec     tokenizer.Codec
	codecErr  error
)

// Count returns the number of o200k_base tokens in s (github.com/tiktoken-go/
// tokenizer, encoding shipped in the module). Texts over ExactLimit bytes are
// estimated from their prefix (see ExactLimit). If the tokenizer fails it falls
// back to len(s)/4, the usual bytes-per-token rule of thumb for English and code.
// Counts of texts of at least tokenCacheMinBytes are remembered (see tokenCache), so
// a proxy that reads the whole history on every request tokenizes each output once;
// below that, each piece of the tokenizer's pre-split is counted once per process
// (see countSplit), which keeps short texts cheap too.
func Count(s string) int {
	if s == "" {
		return 0
	}
	if len(s) < tokenCacheMinBytes {
		return countTokens(s)
	}
	k := tokenKey{maphash.String(tokenSeed, s), len(s)}
	if n, ok := tokenCache.get(k); ok {
		return n
	}
	n := countTokens(s)
	tokenCache.put(k, n)
	return n
}

// loadCodec loads the o200k_base tokenizer once; the error is the load's.
func loadCodec() error {
	codecOnce.Do(func() { codec, codecErr = tokenizer.Get(tokenizer.O200kBase) })
	return codecErr
}

// countTokens is Count without the cache.
func countTokens(s string) int {
	if loadCodec() != nil {
		return (len(s) + 3) / 4
	}
	if len(s) <= ExactLimit {
		return countWhole(s)
	}
	prefix := textcut.BytesOnRune(s, ExactLimit)
	if len(prefix) == 0 {
		return (len(s) + 3) / 4
	}
	n := countWhole(prefix)
	return int(float64(n) * float64(len(s)) / float64(len(prefix)))
}

// countWhole counts s exactly through countSplit: the hand-written pre-split runs
// over the whole text, so no piece of the tokenizer's pattern is cut and the sum is
// the tokenizer's count of s (TestCountSplitMatchesTokenizer, TestCountTokensExact,
// FuzzSplitO200k). A text that is not valid UTF-8 is counted as the tokenizer reads
// it, each invalid byte as U+FFFD (validPerByte; TestCountInvalidUTF8Exact).
func countWhole(s string) int {
	if !utf8.ValidString(s) {
		s = validPerByte(s)
	}
	return countSplit(s)
}

// validPerByte returns s with each byte that is not part of a valid UTF-8
// sequence replaced by U+FFFD, as a range over the string reads it (unlike
// strings.ToValidUTF8, which replaces a run of such bytes once).
func validPerByte(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// tokenChunk is about the text countBatch settles with the piece cache at once.
// (It was the largest piece handed to the tokenizer whole, whose own pre-split
// pattern, a regexp2 look-ahead over whitespace, is quadratic in the length of a
// whitespace run: 64 KB of " \n" took 4 s whole.)
const tokenChunk = 1 << 10

// tokenCacheMinBytes is the text size from which Count remembers counts:
// shorter texts tokenize faster than a cache round trip is worth.
const tokenCacheMinBytes = 512

// tokenCacheEntries bounds each of the cache's two generations (see tokenLRU); with
// 24-byte entries the cache stays under about 5 MB.
const tokenCacheEntries = 1 << 16

// tokenKey identifies a text by its 64-bit maphash and length. The texts themselves
// are not kept. Two different texts of the same length with the same hash (odds about
// 2^-64 per pair) would share a count: a wrong size estimate, never wrong content.
type tokenKey struct {
	hash uint64
	size int
}

var (
	tokenSeed  = maphash.MakeSeed()
	tokenCache = &tokenLRU{cur: map[tokenKey]int{}}
)

// tokenLRU is a two-generation cache: lookups hit the current generation, then the
// previous one (promoting the entry); when the current generation reaches
// tokenCacheEntries it becomes the previous one and the oldest is dropped. Safe for
// concurrent use.
type tokenLRU struct {
	mu        sync.Mutex
	cur, prev map[tokenKey]int
}

func (c *tokenLRU) get(k tokenKey) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.cur[k]; ok {
		return n, true
	}
	n, ok := c.prev[k]
	if ok {
		c.putLocked(k, n)
	}
	return n, ok
}

func (c *tokenLRU) put(k tokenKey, n int) {
	c.mu.Lock()
	c.putLocked(k, n)
	c.mu.Unlock()
}

func (c *tokenLRU) putLocked(k tokenKey, n int) {
	if len(c.cur) >= tokenCacheEntries {
		c.prev, c.cur = c.cur, make(map[tokenKey]int, tokenCacheEntries/4)
	}
	c.cur[k] = n
}

// ResetCaches empties the count cache and both generations of the piece cache
// (not its table of short pieces), so that the next counts tokenize their texts
// again, as on a first read in a fresh process: for benchmarks of what counting
// costs a cold proxy. Safe for concurrent use.
func ResetCaches() {
	tokenCache.mu.Lock()
	tokenCache.cur, tokenCache.prev = map[tokenKey]int{}, nil
	tokenCache.mu.Unlock()
	pieceCache.mu.Lock()
	pieceCache.cur, pieceCache.prev = map[string]int32{}, nil
	pieceCache.mu.Unlock()
}

// ---- the pre-split ----

// The tokenizer (github.com/tiktoken-go/tokenizer) splits a text with the o200k_base
// pattern, run by a backtracking regexp engine over the text's runes, then looks each
// piece up in the vocabulary or merges it byte pair by byte pair. The engine costs
// more than half of the time. splitO200k finds the same pieces by hand, and a piece's
// count depends only on the piece, so it is asked of the tokenizer once and kept
// (pieceCache): code and logs repeat their identifiers, indentation and punctuation.
// The pattern, tried in order at each position, where A = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
// B = [\p{Ll}\p{Lm}\p{Lo}\p{M}] and C = (?i:'s|'t|'re|'ve|'m|'ll|'d):
//
//	1. [^\r\n\p{L}\p{N}]? A* B+ C?
//	2. [^\r\n\p{L}\p{N}]? A+ B* C?
//	3. \p{N}{1,3}
//	4. ' '? [^\s\p{L}\p{N}]+ [\r\n/]*
//	5. \s* [\r\n]+ (ending after the first run of line breaks, see splitO200k)
//	6. \s+ (?!\S)
//	7. \s+
//
// with \s = unicode.IsSpace and the categories of package unicode, as the engine
// has them, except that the engine's classes leave out U+007F. TestSplitO200k
// compares the pieces with the engine's own.

// countSplit counts the tokens of the valid UTF-8 text s piece by piece: the pieces
// pieceCache holds from its lookups, the others from the tokenizer (and kept). The
// pieces are those of the whole text, so the sum is the tokenizer's count of s;
// they are settled in batches of about tokenChunk bytes (countBatch), so that a
// piece the cache lacks is counted once and then found by the next batches, and
// the lock is never held across a long text.
func countSplit(s string) int {
	total := 0
	for i := 0; i < len(s); {
		n, next := countBatch(s, i)
		total += n
		i = next
	}
	return total
}

// countBatch counts the pieces of s from byte i until about tokenChunk bytes are
// covered (a whole number of pieces, cut where splitO200k cuts the whole text) and
// returns their tokens and where the next batch starts. The lookups hold the
// cache's read lock only, so that the decoder goroutines (package transcript's
// decodeNew) count at the same time (under one exclusive lock they took turns);
// what must change the cache (a short slot to fill, a piece to promote or to add)
// waits until the batch is split.
func countBatch(s string, i int) (int, int) {
	total, start := 0, i
	var fill []pieceCount
	var rest []string
	pieceCache.mu.RLock()
	for i < len(s) && i-start < tokenChunk {
		j := splitO200k(s, i)
		if j == i {
			i++ // DEL: no piece
			continue
		}
		p := s[i:j]
		i = j
		n, where := pieceCache.lookup(p)
		switch where {
		case inShort:
			total += int(n)
		case inCurrent:
			total += int(n)
			if len(p) <= 8 {
				fill = append(fill, pieceCount{p, n})
			}
		default:
			rest = append(rest, p)
		}
	}
	pieceCache.mu.RUnlock()
	if len(fill) > 0 || len(rest) > 0 {
		rest = pieceCache.settle(fill, rest, &total)
	}
	if len(rest) > 0 && loadCodec() != nil {
		return total + (len(strings.Join(rest, ""))+3)/4, i
	}
	for _, p := range rest {
		n, err := codec.Count(p)
		if err != nil {
			n = (len(p) + 3) / 4
		}
		total += n
		pieceCache.put(p, int32(n))
	}
	return total, i
}

// pieceCount is a piece of countSplit's text and its count.
type pieceCount struct {
	piece string
	count int32
}

// Where lookup found a piece: its short slot, the current generation, or neither.
const (
	inNeither = iota
	inShort
	inCurrent
)

// lookup looks p up in the short table, then in the current generation; c.mu is
// held for reading (so it fills no slot and promotes nothing: settle does).
func (c *pieceLRU) lookup(p string) (int32, int) {
	if len(p) > pieceCacheMaxBytes {
		return 0, inNeither
	}
	if len(p) <= 8 {
		k := packPiece(p)
		if slot := c.shortSlot(k, len(p)); slot.key == k && int(slot.size) == len(p) {
			return slot.count, inShort
		}
	}
	if n, ok := c.cur[p]; ok {
		return n, inCurrent
	}
	return 0, inNeither
}

// settle does what countSplit's lookups left, under the write lock: each piece of
// fill (counted already) gets its short slot, and each piece of rest is looked up
// again (getLocked: another goroutine may have added it, or it is in the previous
// generation), its count added to *total. It returns the pieces still unknown,
// for the tokenizer.
func (c *pieceLRU) settle(fill []pieceCount, rest []string, total *int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range fill {
		k := packPiece(f.piece)
		*c.shortSlot(k, len(f.piece)) = shortPiece{key: k, count: f.count, size: uint8(len(f.piece))}
	}
	miss := rest[:0]
	for _, p := range rest {
		if n, ok := c.getLocked(p); ok {
			*total += int(n)
			continue
		}
		miss = append(miss, p)
	}
	return miss
}

// pieceCacheMaxBytes is the longest piece pieceCache keeps; longer ones (long words,
// encoded blobs) are counted each time.
const pieceCacheMaxBytes = 48

// pieceCacheEntries bounds each generation of pieceCache (short strings and a count:
// a few MB in all).
const pieceCacheEntries = 1 << 16

// pieceCache holds the tokenizer's count of pre-split pieces.
var pieceCache = &pieceLRU{cur: map[string]int32{}}

// pieceLRU is a two-generation cache like tokenLRU, keyed by the piece itself (at
// most pieceCacheMaxBytes), in front of which pieces of at most 8 bytes (most: words,
// spaces, punctuation) have a direct-mapped table (short): one slot per hash of the
// piece's bytes packed in a word, no probing and no string compare, a colliding piece
// taking the slot over. The map lookups it saves were 60% of counting a text whose
// pieces are all known. Safe for concurrent use.
type pieceLRU struct {
	mu        sync.RWMutex
	cur, prev map[string]int32
	short     [1 << pieceShortBits]shortPiece
}

// pieceShortBits sizes pieceLRU.short: 32,768 slots of 16 bytes (512 KB).
const pieceShortBits = 15

// shortPiece is a slot of pieceLRU.short: a piece of size bytes (0: empty) packed
// into key (packPiece), and its count.
type shortPiece struct {
	key   uint64
	count int32
	size  uint8
}

// packPiece packs p (at most 8 bytes) into a word, little end first.
func packPiece(p string) uint64 {
	var k uint64
	for i := len(p) - 1; i >= 0; i-- {
		k = k<<8 | uint64(p[i])
	}
	return k
}

// shortSlot is the slot of pieceLRU.short for the packed piece k of size bytes
// (Fibonacci hashing: Knuth, TAOCP vol. 3, 6.4).
func (c *pieceLRU) shortSlot(k uint64, size int) *shortPiece {
	h := (k ^ uint64(size)<<61) * 0x9e3779b97f4a7c15
	return &c.short[h>>(64-pieceShortBits)]
}

// getLocked looks p up (promoting it from the previous generation, and giving a
// piece of at most 8 bytes its slot of the short table); c.mu is held for writing.
func (c *pieceLRU) getLocked(p string) (int32, bool) {
	if len(p) > pieceCacheMaxBytes {
		return 0, false
	}
	var slot *shortPiece
	var k uint64
	if len(p) <= 8 {
		k = packPiece(p)
		slot = c.shortSlot(k, len(p))
		if slot.key == k && int(slot.size) == len(p) {
			return slot.count, true
		}
	}
	n, ok := c.cur[p]
	if !ok {
		if n, ok = c.prev[p]; ok {
			c.putLocked(strings.Clone(p), n)
		}
	}
	if ok && slot != nil {
		*slot = shortPiece{key: k, count: n, size: uint8(len(p))}
	}
	return n, ok
}

// put keeps p's count (a copy of p, so the text it was cut from is not held).
func (c *pieceLRU) put(p string, n int32) {
	if len(p) > pieceCacheMaxBytes {
		return
	}
	c.mu.Lock()
	c.putLocked(strings.Clone(p), n)
	c.mu.Unlock()
}

func (c *pieceLRU) putLocked(p string, n int32) {
	if len(c.cur) >= pieceCacheEntries {
		c.prev, c.cur = c.cur, make(map[string]int32, pieceCacheEntries/4)
	}
	c.cur[p] = n
}

// splitO200k returns the end of the o200k_base piece that starts at s[i] (s valid
// UTF-8, i < len(s)), or i when no piece starts there: the engine's character
// classes leave out U+007F (DEL), so a DEL that is not inside a piece matches no
// alternative and the tokenizer skips it, giving it no token (TestSplitO200k). A
// piece found by looking at ASCII bytes only is cut by splitASCII, anything else by
// splitRunes.
func splitO200k(s string, i int) int {
	if e := splitASCII(s, i); e >= 0 {
		return e
	}
	return splitRunes(s, i)
}

// splitRunes is splitO200k on runes: the pattern's alternatives in order, each rune
// decoded and classed (see above).
func splitRunes(s string, i int) int {
	if s[i] == 0x7f {
		return i
	}
	r, w := runeAt(s, i)
	prefix := r != '\r' && r != '\n' && r != 0x7f && !tokLetter(r) && !tokNumber(r)
	// 1 and 2: a word, with one leading character that is no letter, digit or line
	// break when there is one (tried with it first, then without).
	if prefix {
		if e := wordLower(s, i+w); e >= 0 {
			return e
		}
	}
	if e := wordLower(s, i); e >= 0 {
		return e
	}
	if prefix {
		if e := wordUpper(s, i+w); e >= 0 {
			return e
		}
	}
	if e := wordUpper(s, i); e >= 0 {
		return e
	}
	// 3: up to three digits.
	if tokNumber(r) {
		return digitsRun(s, i+w)
	}
	// 4: punctuation, after one optional space, and the line breaks and slashes after it.
	j := i
	if r == ' ' {
		j++
	}
	if e := punctRun(s, j); e > j {
		for e < len(s) && (s[e] == '\r' || s[e] == '\n' || s[e] == '/') {
			e++
		}
		return e
	}
	return spaceRun(s, i)
}

// digitsRun is the end of a piece of up to three digits whose first digit ends at
// j (alternative 3 of splitO200k).
func digitsRun(s string, j int) int {
	for k := 1; k < 3 && j < len(s); k++ {
		r, w := runeAt(s, j)
		if !tokNumber(r) {
			break
		}
		j += w
	}
	return j
}

// spaceRun is the end of the white-space piece at s[i] (alternatives 5, 6 and 7 of
// splitO200k): the run ends at e, its last rune starts at last. 5 is \s*[\r\n]+ as
// the engine runs it: when the run holds a line break, the piece ends after the
// first run of \r and \n in it (the engine backtracks the \s* to the first break,
// not the last); otherwise the run less its last rune, unless the run ends the text
// or is one rune.
func spaceRun(s string, i int) int {
	e, last := i, i
	for e < len(s) {
		r, w := runeAt(s, e)
		if r == '\r' || r == '\n' {
			for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
				e++
			}
			return e
		}
		if !tokSpace(r) {
			break
		}
		last = e
		e += w
	}
	if e == len(s) || last == i {
		return e
	}
	return last
}

// wordLower matches A* B+ C? at s[j] and returns its end, or -1.
func wordLower(s string, j int) int {
	a := j
	for a < len(s) {
		r, w := runeAt(s, a)
		if !inUpperClass(r) {
			break
		}
		a += w
	}
	if a < len(s) {
		if r, w := runeAt(s, a); inLowerClass(r) {
			b := a + w
			for b < len(s) {
				r, w := runeAt(s, b)
				if !inLowerClass(r) {
					break
				}
				b += w
			}
			return contraction(s, b)
		}
	}
	// A* gives back runes from the right until B+ can take one: the rightmost rune
	// of the A run that is also in B (Lm, Lo, M) ends the match.
	for p := a; p > j; {
		r, w := utf8.DecodeLastRuneInString(s[j:p])
		p -= w
		if inLowerClass(r) {
			return contraction(s, p+w)
		}
	}
	return -1
}

// wordUpper matches A+ B* C? at s[j] and returns its end, or -1.
func wordUpper(s string, j int) int {
	a := j
	for a < len(s) {
		r, w := runeAt(s, a)
		if !inUpperClass(r) {
			break
		}
		a += w
	}
	if a == j {
		return -1
	}
	for a < len(s) {
		r, w := runeAt(s, a)
		if !inLowerClass(r) {
			break
		}
		a += w
	}
	return contraction(s, a)
}

// contraction matches C? at s[b]: 's 't 're 've 'm 'll 'd in any case (and 'ſ, which
// folds to s), and returns its end.
func contraction(s string, b int) int {
	if b+1 >= len(s) || s[b] != '\'' {
		return b
	}
	lower := func(c byte) byte { return c | 0x20 }
	switch c := lower(s[b+1]); {
	case c == 's' || c == 't' || c == 'm' || c == 'd':
		if s[b+1] < 0x80 {
			return b + 2
		}
	case (c == 'r' || c == 'v') && s[b+1] < 0x80:
		if b+2 < len(s) && lower(s[b+2]) == 'e' {
			return b + 3
		}
	case c == 'l' && s[b+1] < 0x80:
		if b+2 < len(s) && lower(s[b+2]) == 'l' {
			return b + 3
		}
	}
	if strings.HasPrefix(s[b+1:], "\u017f") {
		return b + 1 + len("\u017f")
	}
	return b
}

// punctRun returns the end of the run of runes at s[j] that are neither white
// space, letters nor numbers ([^\s\p{L}\p{N}]+); j when there is none.
func punctRun(s string, j int) int {
	for j < len(s) {
		r, w := runeAt(s, j)
		if tokSpace(r) || tokLetter(r) || tokNumber(r) || r == 0x7f {
			break
		}
		j += w
	}
	return j
}

func runeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

func tokLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	}
	return unicode.IsLetter(r)
}

func tokNumber(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsNumber(r)
}

func tokSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || '\t' <= r && r <= '\r'
	}
	return unicode.IsSpace(r)
}

// inUpperClass is A: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}].
func inUpperClass(r rune) bool {
	if r < utf8.RuneSelf {
		return 'A' <= r && r <= 'Z'
	}
	return unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
}

// inLowerClass is B: [\p{Ll}\p{Lm}\p{Lo}\p{M}].
func inLowerClass(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z'
	}
	return unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
}

// ASCII byte classes for splitASCII.
const (
	asciiPunct   = iota // [^\s\p{L}\p{N}] but DEL: control characters included
	asciiLower          // a-z: in B
	asciiUpper          // A-Z: in A
	asciiDigit          // 0-9
	asciiSpace          // ' ', \t, \v, \f: \s but no line break
	asciiNewline        // \r, \n
	asciiDEL            // U+007F: in no class of the engine's
)

// asciiClasses classes every byte below 0x80.
var asciiClasses = func() (t [128]uint8) {
	for c := range t {
		switch {
		case 'a' <= c && c <= 'z':
			t[c] = asciiLower
		case 'A' <= c && c <= 'Z':
			t[c] = asciiUpper
		case '0' <= c && c <= '9':
			t[c] = asciiDigit
		case c == '\r' || c == '\n':
			t[c] = asciiNewline
		case c == ' ' || c == '\t' || c == '\v' || c == '\f':
			t[c] = asciiSpace
		case c == 0x7f:
			t[c] = asciiDEL
		default:
			t[c] = asciiPunct
		}
	}
	return t
}()

// asciiClass is the class of s[i] (i < len(s)), or -1 for a byte of a multi-byte
// rune, which the ASCII path leaves to splitRunes.
func asciiClass(s string, i int) int {
	if c := s[i]; c < utf8.RuneSelf {
		return int(asciiClasses[c])
	}
	return -1
}

// splitASCII is splitRunes for a piece decided by ASCII bytes alone: it takes the
// alternatives' steps on the bytes' classes and gives up (-1) on the first byte of
// a multi-byte rune it would have to class, and at a DEL that starts no piece. On
// ASCII the classes do not overlap (A is A-Z, B a-z), so the A* of alternative 1
// never gives a rune back. TestSplitO200k, TestSplitO200kEveryRune and
// FuzzSplitO200k compare its pieces with the regexp engine's.
func splitASCII(s string, i int) int {
	switch asciiClass(s, i) {
	case asciiLower, asciiUpper:
		return asciiWord(s, i)
	case asciiDigit: // 3: up to three digits (-1 at a rune that may be a digit)
		return asciiRun(s[:min(len(s), i+3)], i+1, asciiDigit)
	case asciiNewline:
		return asciiSpaceRun(s, i)
	case asciiPunct, asciiSpace:
		// 1 and 2 with the byte as their leading character.
		if i+1 < len(s) {
			switch asciiClass(s, i+1) {
			case -1:
				return -1
			case asciiLower, asciiUpper:
				return asciiWord(s, i+1)
			}
		}
		// 4: punctuation after one optional space, then line breaks and slashes.
		j := i
		if s[i] == ' ' {
			j++
		}
		e := asciiRun(s, j, asciiPunct)
		if e < 0 {
			return -1
		}
		if e > j {
			for e < len(s) && (s[e] == '\r' || s[e] == '\n' || s[e] == '/') {
				e++
			}
			return e
		}
		return asciiSpaceRun(s, i)
	}
	return -1 // DEL, or a multi-byte rune
}

// asciiWord is alternatives 1 and 2 at the letter s[j]: A* B+ C?, else A+ B* C?.
func asciiWord(s string, j int) int {
	a := asciiRun(s, j, asciiUpper) // -1 at a rune that may be in A or B
	if a < 0 {
		return -1
	}
	b := asciiRun(s, a, asciiLower)
	if b < 0 {
		return -1
	}
	// With lower-case letters after the capitals, 1 matches A* B+; without, 2
	// matches A+ (and an empty B*): either way the word ends at b. contraction
	// reads the C? that may follow on any bytes.
	return contraction(s, b)
}

// asciiRun is the end of the run of bytes of class at s[j:], or -1 when the run
// ends at the first byte of a multi-byte rune, whose class splitRunes decides.
func asciiRun(s string, j, class int) int {
	for ; j < len(s); j++ {
		if cl := asciiClass(s, j); cl != class {
			if cl < 0 {
				return -1
			}
			break
		}
	}
	return j
}

// asciiSpaceRun is spaceRun on ASCII bytes (alternatives 5, 6 and 7), -1 at a
// multi-byte rune inside or after the run (it may be white space).
func asciiSpaceRun(s string, i int) int {
	e, last := i, i
	for e < len(s) {
		switch asciiClass(s, e) {
		case -1:
			return -1
		case asciiNewline:
			for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
				e++
			}
			return e
		case asciiSpace:
			last = e
			e++
			continue
		}
		break
	}
	if e == len(s) || last == i {
		return e
	}
	return last
}
