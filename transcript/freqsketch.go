package transcript

import "math/bits"

// freqSketch estimates how often each key was asked for, recently, in fixed
// memory: a count-min sketch (Cormode and Muthukrishnan, "An improved data stream
// summary: the count-min sketch and its applications", Journal of Algorithms 55(1),
// 2005) of freqDepth rows of byte counters capped at freqMax, all halved after every
// freqSample x width additions so that old popularity fades (the reset of TinyLFU,
// Einziger, Friedman and Manes, ACM Transactions on Storage 13(4), 2017, section
// 3.3). A key's estimate is the smallest of its counters: not below its recent count
// (up to the cap and the halvings), above it only when other keys share all of its
// counters.
type freqSketch struct {
	rows  [freqDepth][]uint8
	mask  uint64
	adds  int
	reset int // additions between halvings
}

const (
	freqDepth  = 4
	freqMax    = 15 // TinyLFU's 4-bit counters
	freqSample = 10 // halve after freqSample x width additions (TinyLFU's W = 10 x the cache's entries)
	// freqBytesPerCounter is the cache bound one counter of a row stands for: a row
	// has one counter per 4 KiB of bound (about one entry of decoded messages),
	// rounded up to a power of two, at least 1,024.
	freqBytesPerCounter = 4 << 10
)

// newFreqSketch sizes a sketch for a cache of maxBytes (freqBytesPerCounter).
func newFreqSketch(maxBytes int64) *freqSketch {
	width := uint64(1024)
	if n := uint64(maxBytes / freqBytesPerCounter); n > width {
		width = 1 << bits.Len64(n-1)
	}
	f := &freqSketch{mask: width - 1, reset: freqSample * int(width)}
	for i := range f.rows {
		f.rows[i] = make([]uint8, width)
	}
	return f
}

// size is the sketch's memory, in bytes.
func (f *freqSketch) size() int64 { return int64(freqDepth * (f.mask + 1)) }

// slot is key k's counter in row i (double hashing on the key's two hashes).
func (f *freqSketch) slot(k bodyKey, i int) uint64 {
	return (k.h1 + uint64(i)*(k.h2|1)) & f.mask
}

// add counts one ask for k.
func (f *freqSketch) add(k bodyKey) {
	for i := range f.rows {
		if c := &f.rows[i][f.slot(k, i)]; *c < freqMax {
			*c++
		}
	}
	if f.adds++; f.adds >= f.reset {
		f.adds = 0
		for i := range f.rows {
			for j := range f.rows[i] {
				f.rows[i][j] >>= 1
			}
		}
	}
}

// estimate is k's recent count (the smallest of its counters).
func (f *freqSketch) estimate(k bodyKey) uint8 {
	m := uint8(freqMax)
	for i := range f.rows {
		m = min(m, f.rows[i][f.slot(k, i)])
	}
	return m
}
