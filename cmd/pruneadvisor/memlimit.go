package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

// defaultMaxMemory is --max-memory's default for the offline commands: the bound
// issue 13 sets for replaying a session of 10^6 messages (2 GB, 10^9 bytes each, as
// docs/PERFORMANCE.md counts peak RSS).
const defaultMaxMemory = "2GB"

// memoryFlag is --max-memory of replay and backoff: the memory the process is to
// stay under. The Go runtime's soft limit (runtime/debug.SetMemoryLimit) is that
// less a reserve (goLimit): the limit does not count SQLite's allocations outside
// the Go heap nor the program's own pages, and the collector overshoots it while
// it marks a large live heap. Near the limit the garbage collector runs more often, so the process
// stays close to what it really holds instead of growing to about twice that
// (GOGC=100) while it reads and replays a large session. It is no hard bound: a
// replay that holds more keeps going, collecting more often (the runtime caps that
// at about half the CPU). "0" or "off" leaves the runtime's default; with
// GOMEMLIMIT set and the flag not given, GOMEMLIMIT rules (as the Go limit itself).
type memoryFlag struct {
	text    string
	changed func() bool // the flag was given on the command line
}

func (m *memoryFlag) register(c *cobra.Command) {
	c.Flags().StringVar(&m.text, "max-memory", defaultMaxMemory, `memory the process stays under (e.g. 2GB, 1500MiB; "off": no limit): the Go runtime's soft limit is this less a tenth (at least 64 MiB) for what it does not count; GOMEMLIMIT wins when set and the flag is not given`)
	m.changed = func() bool { return c.Flags().Changed("max-memory") }
}

// apply sets the limit and returns a function that puts the previous one back
// (commands also run inside tests, in one process). A malformed size is a usage
// error naming the flag.
func (m *memoryFlag) apply() (restore func(), err error) {
	restore = func() {}
	if !m.changed() && os.Getenv("GOMEMLIMIT") != "" {
		return restore, nil
	}
	if m.text == "0" || m.text == "off" {
		return restore, nil
	}
	n, err := humanize.ParseBytes(m.text)
	if err != nil || n == 0 || n > math.MaxInt64 {
		return restore, usageError{fmt.Errorf("--max-memory %q: want a size such as 2GiB or 1500MB, or off", m.text)}
	}
	prev := debug.SetMemoryLimit(goLimit(int64(n)))
	return func() { debug.SetMemoryLimit(prev) }, nil
}

// goLimit is the Go runtime's soft limit for an offline command meant to stay under
// maxMemory bytes of RSS: maxMemory less a tenth, or less 64 MiB when that is more,
// and at least half of maxMemory. Measured (docs/PERFORMANCE.md, "A session of 10^6
// messages"): replays of generated sessions of 200,000 and 500,000 messages peaked
// 66 and 76 MiB of RSS above the Go limit, the part growing with the live heap the
// collector marks; serve's fixed 64 MiB (server.NonGoReserve) is for a smaller heap.
func goLimit(maxMemory int64) int64 {
	return max(maxMemory-max(maxMemory/10, 64<<20), maxMemory/2)
}
