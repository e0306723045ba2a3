package transcript

import (
	"runtime"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/internal/memtest"
)

// The cache's accounted bytes are what its entries really hold on the heap
// (measured as the live heap it adds, the sessions and bodies read through it
// dropped): within 15% over or 10% under, and a cache whose bound is smaller than
// what is read through it adds no more to the heap than its bound (plus 15%).
func TestMessageCacheAccountsHeap(t *testing.T) {
	read := func(c *MessageCache, sessions int) {
		for s := range sessions {
			if _, err := Read("body", bodyBig(s, 40), Options{Format: FormatAnthropic, Cache: c}); err != nil {
				t.Fatal(err)
			}
		}
	}
	read(nil, 1) // the tokenizer's tables and caches, before the baseline
	for _, tc := range []struct {
		name     string
		bound    int64
		sessions int
	}{{"unbounded", 1 << 30, 8}, {"bounded", 2 << 20, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			base := memtest.LiveHeap()
			c := NewMessageCache(tc.bound)
			read(c, tc.sessions)
			held := memtest.LiveHeap() - base
			st := c.Stats()
			runtime.KeepAlive(c)
			t.Logf("%d entries: accounted %d bytes, heap %d bytes", st.Entries, st.Bytes, held)
			if st.Bytes > tc.bound {
				t.Errorf("accounted %d bytes; bound %d", st.Bytes, tc.bound)
			}
			if float64(held) > 1.15*float64(st.Bytes) || float64(held) < 0.9*float64(st.Bytes) {
				t.Errorf("the cache holds %d bytes of heap; it accounts %d", held, st.Bytes)
			}
		})
	}
}
