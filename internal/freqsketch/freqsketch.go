// Package freqsketch estimates how often each key was asked for, recently, in
// fixed memory (Sketch). Package transcript's message cache admits an entry over
// the one it would evict by these estimates. Keys are given as two independent
// 64-bit hashes.
package freqsketch

import "math/bits"

// Sketch estimates how often each key was asked for, recently, in fixed memory: a count-min sketch (Cormode and Muthukrishnan, "An improved data stream
// summary: the count-min sketch and its applications", Journal of Algorithms 55(1),
// 2005) of freqDepth rows of byte counters capped at freqMax, all halved after every
// freqSample x width additions so that old popularity fades (the reset of TinyLFU,
// Einziger, Friedman and Manes, ACM Transactions on Storage 13(4), 2017, section
// 3.3). A key's estimate is the smallest of its counters: not below its recent count
// (up to the cap and the halvings), above it only when other keys share all of its
// counters.
type Sketch struct {
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

// New sizes a sketch for a cache of maxBytes (freqBytesPerCounter): 4 rows of at
// least 1,024 byte counters.
func New(maxBytes int64) *Sketch {
	width := uint64(1024)
	if n := uint64(maxBytes / freqBytesPerCounter); n > width {
		width = 1 << bits.Len64(n-1)
	}
	f := &Sketch{mask: width - 1, reset: freqSample * int(width)}
	for i := range f.rows {
		f.rows[i] = make([]uint8, width)
	}
	return f
}

// Size is the sketch's memory, in bytes.
func (f *Sketch) Size() int64 { return int64(freqDepth * (f.mask + 1)) }

// slot is the counter in row i of the key whose hashes are h1 and h2 (double
// hashing).
func (f *Sketch) slot(h1, h2 uint64, i int) uint64 {
	return (h1 + uint64(i)*(h2|1)) & f.mask
}

// Add counts one ask for the key whose hashes are h1 and h2.
func (f *Sketch) Add(h1, h2 uint64) {
	for i := range f.rows {
		if c := &f.rows[i][f.slot(h1, h2, i)]; *c < freqMax {
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

// Estimate is the recent count of the key whose hashes are h1 and h2 (the smallest
// of its counters), from 0 to 15.
func (f *Sketch) Estimate(h1, h2 uint64) uint8 {
	m := uint8(freqMax)
	for i := range f.rows {
		m = min(m, f.rows[i][f.slot(h1, h2, i)])
	}
	return m
}
