package transcript

import (
	"testing"

	"github.com/pruneadvisor/pruneadvisor/internal/freqsketch"
)

// cycle asks c for keys [from, to) in order, putting each one it misses, rounds
// times, and returns the hit rate of the last `last` rounds.
func cycle(c *MessageCache, from, to, rounds, last int, size int64) float64 {
	hits, asks := 0, 0
	for r := range rounds {
		for i := from; i < to; i++ {
			k := bodyKey{kind: kindValid, h1: uint64(i) * 0x9e3779b97f4a7c15, h2: uint64(i)*0xc2b2ae3d27d4eb4f + 1, size: i}
			hit := c.get(k) != nil
			if !hit {
				c.put(k, &msgTemplate{size: size})
			}
			if r >= rounds-last {
				asks++
				if hit {
					hits++
				}
			}
		}
	}
	return float64(hits) / float64(asks)
}

// The cache's policy on the access patterns of a proxy, with entries of 4 KiB in a
// cache of 500 (plus its sketch):
//   - a cycle over 1,000 entries (more live sessions than fit) hits about as often as
//     the cache holds entries, 0.49 (the main part's 495 of 1,000), where LRU never
//     hits (each entry is evicted just before it comes round again);
//   - then a cycle over 400 other entries, which fit, comes to hit every time once
//     the sketch's halvings let the old entries' counts fade (by round 70: 2.7
//     halvings, each after 10,240 asks);
//   - and a working set that fits is held whole from its second round.
func TestMessageCachePolicy(t *testing.T) {
	const size = 4 << 10
	bound := 500*size + freqsketch.New(500*size).Size()
	c := NewMessageCache(bound)
	if got := c.freq.Size(); got != 4*1024 {
		t.Fatalf("sketch of %d bytes; want 4 rows of 1,024 counters", got)
	}
	if rate := cycle(c, 0, 1000, 10, 7, size); rate < 0.45 || rate > 0.5 {
		t.Errorf("hit rate %.3f over a cycle of twice the cache; want about 0.49 (0.45 to 0.5)", rate)
	}
	if st := c.Stats(); st.Bytes > bound || st.Entries < 495 || st.Entries > 500 {
		t.Errorf("stats %+v; want 495 to 500 entries within the bound %d", st, bound)
	}
	if rate := cycle(c, 1000, 1400, 80, 5, size); rate != 1 {
		t.Errorf("hit rate %.3f on a new set that fits, after 75 rounds; want 1", rate)
	}
	fresh := NewMessageCache(bound)
	if rate := cycle(fresh, 0, 400, 3, 2, size); rate != 1 {
		t.Errorf("hit rate %.3f on a set that fits, from its second round; want 1", rate)
	}
}
