// Package memtest is the tests' reading of the live heap, for the memory bounds
// the server, transcript and replay tests assert.
package memtest

import "runtime"

// LiveHeap returns the bytes of live heap objects (runtime.MemStats.HeapAlloc)
// after two full collections: the second frees what the first only unlinked (the
// objects a finalizer or a weak reference held through the first).
func LiveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
