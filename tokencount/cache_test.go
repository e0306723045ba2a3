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
