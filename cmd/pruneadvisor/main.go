// Command pruneadvisor keeps coding agents' context lean: it inspects sessions,
// advises which old tool outputs to swap for recallable stubs, replays old sessions
// to calibrate, and serves recall. Run `pruneadvisor help` for the commands.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
