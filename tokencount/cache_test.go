package tokencount

import (
	"strings"
	"testing"
)

// Count remembers long texts' counts: the cached answer is the tokenizer's, and
// a full generation rolls over without losing the newest entries.
func TestCountTokensCache(t *testing.T) {
	long := strings.Repeat("func main() { fmt.Println(\"héllo\") }\n", 40)
	want := countTokens(long)
	if got := Count(long); got != want {
		t.Fatalf("first count %d; want %d", got, want)
	}
	if got := Count(long); got != want {
		t.Fatalf("cached count %d; want %d", got, want)
	}
	c := &tokenLRU{cur: map[tokenKey]int{}}
	for i := range tokenCacheEntries + 10 {
		c.put(tokenKey{uint64(i), 1}, i)
	}
	if len(c.cur) != 10 || len(c.prev) != tokenCacheEntries {
		t.Fatalf("generations %d + %d; want 10 + %d", len(c.cur), len(c.prev), tokenCacheEntries)
	}
	if n, ok := c.get(tokenKey{5, 1}); !ok || n != 5 {
		t.Errorf("old-generation entry: %d, %v", n, ok)
	}
	if _, ok := c.cur[tokenKey{5, 1}]; !ok {
		t.Error("a hit in the old generation is not promoted")
	}
}

// A piece the piece cache holds in its previous generation only (the current
// one rolled over since it was counted) still counts: countSplit's lookups miss
// it, and settle finds it there and adds its count. " Supercalifragilistic"
// is one piece of the pre-split, longer than the short table's 8 bytes; its count is
// the tokenizer's, asked directly.
func TestCountSplitPreviousGeneration(t *testing.T) {
	if err := loadCodec(); err != nil {
		t.Fatal(err)
	}
	const piece = " Supercalifragilistic"
	want, err := codec.Count(piece)
	if err != nil {
		t.Fatal(err)
	}
	ResetCaches()
	defer ResetCaches()
	if got := countSplit(piece); got != want {
		t.Fatalf("first count %d; want %d", got, want)
	}
	pieceCache.mu.Lock()
	if _, ok := pieceCache.cur[piece]; !ok {
		pieceCache.mu.Unlock()
		t.Fatalf("%q is not in the current generation after its first count", piece)
	}
	pieceCache.prev, pieceCache.cur = pieceCache.cur, map[string]int32{}
	pieceCache.mu.Unlock()
	if got := countSplit(piece); got != want {
		t.Errorf("count from the previous generation %d; want %d", got, want)
	}
}
