package transcript

import (
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
func CountTokens(s string) int {
	if s == "" {
		return 0
	}
	codecOnce.Do(func() { codec, codecErr = tokenizer.Get(tokenizer.O200kBase) })
	if codecErr != nil {
		return (len(s) + 3) / 4
	}
	if len(s) <= ExactTokenLimit {
		n, err := codec.Count(s)
		if err != nil {
			return (len(s) + 3) / 4
		}
		return n
	}
	prefix := truncateValid(s, ExactTokenLimit)
	n, err := codec.Count(prefix)
	if err != nil || len(prefix) == 0 {
		return (len(s) + 3) / 4
	}
	return int(float64(n) * float64(len(s)) / float64(len(prefix)))
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
