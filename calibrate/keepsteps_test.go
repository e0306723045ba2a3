package calibrate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A compaction that keeps the messages of the last call (KeepSteps 1, as opencode
// keeps its last turns), on TestCompactionHand's session, worked by hand. Call 5
// would send 50,000: the agent compacts; the tail starts at output 4 (step 4 =
// 5 - 1, offset 41,000), which stays, and outputs 1-3 go: the context becomes the
// 1,000-token summary and 9,000 of tail, 10,000 (cut 40,000). Calls 6 and 7 send
// 20,000 and 30,000; output 2, gone, is used at 7: a compaction miss, 9,100 written
// again. Call 8 would send 80,000 + 9,100 - 40,000 = 49,100: a second compaction,
// whose tail starts at output 7 (step 7 = 8 - 1, at 71,000 + 9,100 - 40,000 =
// 40,100): 1,000 + 9,000 = 10,000 again. Calls 9 and 10 send 20,000 and 30,000.
// Two compactions, one compaction miss, peak 50,000 (call 5's summarising call).
func TestCompactionKeepsTheLastCalls(t *testing.T) {
	outs, sessions := growingSession()
	opts := DefaultOptions()
	opts.Budget, opts.HardLimit = 100_000, 180_000
	opts.CompactionOf = func(string, int) Compaction {
		return Compaction{Point: 45_000, Margin: 5_000, SummaryTokens: 1000, KeepSteps: 1}
	}
	ka := mustEval(t, outs, sessions, opts).KeepAll()
	got := Level{Compactions: ka.Decision.Compactions, CompactionMisses: ka.Decision.CompactionMisses, PeakContext: ka.Decision.PeakContext}
	if d := cmp.Diff(Level{Compactions: 2, CompactionMisses: 1, PeakContext: 50_000}, got); d != "" {
		t.Errorf("keep-all (-want +got):\n%s", d)
	}
}
