package transcript

import (
	"hash/maphash"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// ExactTokenLimit is the text length, in bytes, up to which CountTokens runs the
// o200k_base tokenizer over the whole text. Longer texts are tokenized over their
// first ExactTokenLimit bytes and the count is scaled by length; the tokenizer runs at
// roughly a few MB/s, and a 50 MB output would otherwise stall indexing for tens of
// seconds for a figure that only needs to be close.
const ExactTokenLimit = 256 << 10

var (
	codecOnce sync.Once
	codec     tokenizer.Codec
	codecErr  error
)

// CountTokens returns the number of o200k_base tokens in s (github.com/tiktoken-go/
// tokenizer, encoding shipped in the module). Texts over ExactTokenLimit bytes are
// estimated from their prefix (see ExactTokenLimit). If the tokenizer fails it falls
// back to len(s)/4, the usual bytes-per-token rule of thumb for English and code.
// Counts of texts of at least tokenCacheMinBytes are remembered (see tokenCache), so
// a proxy that reads the whole history on every request tokenizes each output once.
func CountTokens(s string) int {
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

// countTokens is CountTokens without the cache.
func countTokens(s string) int {
	codecOnce.Do(func() { codec, codecErr = tokenizer.Get(tokenizer.O200kBase) })
	if codecErr != nil {
		return (len(s) + 3) / 4
	}
	if len(s) <= ExactTokenLimit {
		return countChunked(s)
	}
	prefix := truncateValid(s, ExactTokenLimit)
	if len(prefix) == 0 {
		return (len(s) + 3) / 4
	}
	n := countChunked(prefix)
	return int(float64(n) * float64(len(s)) / float64(len(prefix)))
}

// tokenChunk is the largest piece countChunked hands the tokenizer at once. The
// tokenizer's pre-split pattern (a regexp2 look-ahead over whitespace) is quadratic
// in the length of a whitespace run: 64 KB of " \n" took 4 s whole, 0.3 s for 128 KB in
// 1 KB pieces.
const tokenChunk = 1 << 10

// countChunked counts s in pieces of at most tokenChunk bytes, each cut just after a
// newline where the piece has one (else on a rune boundary). o200k_base never merges
// a token across a newline followed by other text, so the sum equals the whole-text
// count except where a cut falls inside a run of blank lines or a line longer than
// tokenChunk, where it may differ by a token per cut.
func countChunked(s string) int {
	total := 0
	for len(s) > 0 {
		piece := s
		if len(piece) > tokenChunk {
			piece = truncateValid(s, tokenChunk)
			if i := strings.LastIndexByte(piece, '\n'); i > 0 {
				piece = piece[:i+1]
			}
			if piece == "" { // a single rune longer than the chunk cannot happen; guard anyway
				piece = s[:tokenChunk]
			}
		}
		n, err := codec.Count(piece)
		if err != nil {
			n = (len(piece) + 3) / 4
		}
		total += n
		s = s[len(piece):]
	}
	return total
}

// truncateValid cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncateValid(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// tokenCacheMinBytes is the text size from which CountTokens remembers counts:
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
