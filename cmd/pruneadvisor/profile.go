package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// startProfile starts a CPU profile into the file $PRUNEADVISOR_CPUPROFILE names (a
// developer's tool: docs/PERFORMANCE.md reads profiles of the real commands with
// `go tool pprof`). It returns the function that stops and closes it; with the
// variable unset both are no-ops. A profile that cannot start is said on stderr and
// the command runs without it.
func startProfile(stderr io.Writer) func() {
	path := os.Getenv("PRUNEADVISOR_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pruneadvisor: PRUNEADVISOR_CPUPROFILE: %v\n", err)
		if f != nil {
			_ = f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
