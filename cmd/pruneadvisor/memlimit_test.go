package main

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"
)

// TestMemoryFlag: --max-memory sets the runtime's soft memory limit (the size less
// a tenth, or less 64 MiB, at least half of it) and restore puts the previous one back; "off" leaves
// it; GOMEMLIMIT wins over the default but not over the flag given; a malformed
// size is a usage error.
func TestMemoryFlag(t *testing.T) {
	const none = math.MaxInt64
	tests := []struct {
		text    string
		changed bool
		env     string
		want    int64 // limit while applied
		bad     bool
	}{
		{text: defaultMaxMemory, want: 1_800_000_000},
		{text: "2GiB", want: 2<<30 - 2<<30/10},
		{text: "500MB", changed: true, want: 500_000_000 - 64<<20},
		{text: "100MiB", changed: true, want: 50 << 20}, // at least half the size
		{text: "off", changed: true, want: none},
		{text: "0", changed: true, want: none},
		{text: "2GB", env: "3GiB", want: none}, // left to the runtime, which read GOMEMLIMIT at start
		{text: "1GiB", changed: true, env: "3GiB", want: 1<<30 - 1<<30/10},
		{text: "2XB", changed: true, bad: true},
		{text: "-1GB", changed: true, bad: true},
	}
	prev := debug.SetMemoryLimit(none)
	defer debug.SetMemoryLimit(prev)
	for _, tc := range tests {
		t.Setenv("GOMEMLIMIT", tc.env)
		m := memoryFlag{text: tc.text, changed: func() bool { return tc.changed }}
		restore, err := m.apply()
		if tc.bad {
			var u usageError
			if !errors.As(err, &u) {
				t.Errorf("%q: err %v, want a usage error", tc.text, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		if got := debug.SetMemoryLimit(-1); got != tc.want {
			t.Errorf("%q (env %q): limit %d, want %d", tc.text, tc.env, got, tc.want)
		}
		restore()
		if got := debug.SetMemoryLimit(-1); got != none {
			t.Errorf("%q: after restore the limit is %d", tc.text, got)
		}
	}
}
