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
// issue 13 sets for replaying a session of 10^6 messages.
const defaultMaxMemory = "2GiB"

// memoryFlag is --max-memory of replay and backoff: a soft limit on the memory of
// the Go runtime (runtime/debug.SetMemoryLimit). Near it the garbage collector runs
// more often, so the process stays close to what it really holds instead of
// growing to about twice that (GOGC=100) while it reads and replays a large
// session. It is no hard bound: a replay that holds more keeps going, collecting
// more often (the runtime caps that at about half the CPU). "0" or "off" leaves the
// runtime's default; with GOMEMLIMIT set and the flag not given, GOMEMLIMIT rules.
type memoryFlag struct {
	text    string
	changed func() bool // the flag was given on the command line
}

func (m *memoryFlag) register(c *cobra.Command) {
	c.Flags().StringVar(&m.text, "max-memory", defaultMaxMemory, `soft limit on the process's memory (e.g. 2GiB, 1500MB; "off": none); GOMEMLIMIT wins when set and the flag is not given`)
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
	prev := debug.SetMemoryLimit(int64(n))
	return func() { debug.SetMemoryLimit(prev) }, nil
}
