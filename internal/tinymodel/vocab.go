package tinymodel

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/tiktoken-go/tokenizer"
)

// Special tokens appended after the byte-pair tokens, in this order (Qwen2's
// ChatML names: the chat template wraps each message in im_start/im_end).
var Specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// Token types (llama.cpp llama_token_type / gguf-py TokenType).
const (
	tokenNormal  = 1
	tokenControl = 3
)

// Vocab is a byte-level BPE vocabulary as GGUF's "gpt2" tokenizer model stores it.
type Vocab struct {
	Tokens []string // by id; byte-pair tokens in GPT-2's byte-to-unicode form, then Specials
	Types  []int32  // by id: 1 normal, 3 control
	Merges []string // "left right" in priority order, both sides in the byte-to-unicode form
}

// ID returns the id of token s (as stored), or -1.
func (v Vocab) ID(s string) int {
	for i, t := range v.Tokens {
		if t == s {
			return i
		}
	}
	return -1
}

// O200kPrefix returns the first n tokens of OpenAI's o200k_base encoding (the
// one the proxy counts tokens with, shipped in github.com/tiktoken-go/tokenizer)
// as a GGUF vocabulary, with Specials after them. Ranks 0-255 are the single
// bytes. tiktoken merges the adjacent pair whose concatenation has the lowest
// rank; as merges that is every split of each longer token into two tokens of
// the prefix, ranked by the token's own rank (Hugging Face's tiktoken conversion,
// transformers' TikTokenConverter.extract_vocab_merges_from_model), so a server
// using them splits text as o200k does wherever o200k's tokens are in the prefix
// and into smaller pieces elsewhere. n must be from 256 to 199,997.
func O200kPrefix(n int) (Vocab, error) {
	if n < 256 || n > 199997 {
		return Vocab{}, fmt.Errorf("vocabulary size %d: want 256 to 199997", n)
	}
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return Vocab{}, fmt.Errorf("loading o200k_base: %w", err)
	}
	raw := make([]string, n)
	rank := make(map[string]int, n)
	for i := range raw {
		s, err := codec.Decode([]uint{uint(i)})
		if err != nil {
			return Vocab{}, fmt.Errorf("o200k_base token %d: %w", i, err)
		}
		raw[i] = s
		rank[s] = i
	}
	enc := byteEncoder()
	v := Vocab{}
	for i, s := range raw {
		v.Tokens = append(v.Tokens, encodeBytes(enc, s))
		v.Types = append(v.Types, tokenNormal)
		if i < 256 && len(s) != 1 {
			return Vocab{}, fmt.Errorf("o200k_base token %d is %q, not one byte", i, s)
		}
		for _, m := range splits(s, rank) {
			v.Merges = append(v.Merges, encodeBytes(enc, m[0])+" "+encodeBytes(enc, m[1]))
		}
	}
	for _, s := range Specials {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, tokenControl)
	}
	return v, nil
}

// splits returns every split of token into two tokens both in rank, ordered by
// the left part's rank and then the right's.
func splits(token string, rank map[string]int) [][2]string {
	var out [][2]string
	for k := 1; k < len(token); k++ {
		l, r := token[:k], token[k:]
		if _, ok := rank[l]; !ok {
			continue
		}
		if _, ok := rank[r]; ok {
			out = append(out, [2]string{l, r})
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(rank[a[0]], rank[b[0]]), cmp.Compare(rank[a[1]], rank[b[1]]))
	})
	return out
}

// byteEncoder returns GPT-2's byte-to-unicode table (openai/gpt-2 encoder.py
// bytes_to_unicode): printable Latin-1 bytes map to themselves, the other 68 to
// U+0100 upwards in byte order, so every byte is one visible rune.
func byteEncoder() [256]rune {
	var enc [256]rune
	printable := func(b int) bool {
		return b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF
	}
	next := rune(256)
	for b := range 256 {
		if printable(b) {
			enc[b] = rune(b)
		} else {
			enc[b] = next
			next++
		}
	}
	return enc
}

func encodeBytes(enc [256]rune, s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(enc[s[i]])
	}
	return b.String()
}
