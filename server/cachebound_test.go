package server_test

import (
	"testing"

	"github.com/pruneadvisor/pruneadvisor/server"
)

// The message cache's bound: 3/8 of the Go memory limit of MaxMemory (of
// DefaultMaxMemory, 384 MiB, when zero), MessageCacheBytes when set, none when
// negative. The expected bounds are worked out by hand from GoMemoryLimit's rule
// (MaxMemory less 64 MiB, at least half of it).
func TestMessageCacheBound(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name       string
		maxMemory  int64
		cacheBytes int64
		want       int64
	}{
		{"defaults", 0, 0, 120 * mib},               // (384 - 64) * 3/8
		{"1 GiB", 1024 * mib, 0, 360 * mib},         // (1024 - 64) * 3/8
		{"100 MiB", 100 * mib, 0, 50 * mib * 3 / 8}, // half of 100 MiB is more than 100 - 64
		{"set", 1024 * mib, 5 * mib, 5 * mib},
		{"off", 0, -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newProxy(t, server.Options{MaxMemory: c.maxMemory, MessageCacheBytes: c.cacheBytes})
			if got := env.srv.MessageCacheStats().Max; got != c.want {
				t.Errorf("message cache bound %d bytes (%.2f MiB), want %d (%.2f MiB)", got, float64(got)/mib, c.want, float64(c.want)/mib)
			}
		})
	}
}
