package replay_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Step the advisor through a recorded session from Go, as `pruneadvisor advise`
// does: the agent of the session's format sets the hard limit, the embedded fitted
// scorer and its word statistics judge, and the clock is the session's own call
// times (replay.CallTimes), so a pause longer than the cache TTL makes a rewrite
// free as it was live; with time.Now the cache would never be cold. The figures are
// the ones `pruneadvisor advise testdata/sessions/fix-port.jsonl` prints.
func ExampleSimulate() {
	ctx := context.Background()
	s, err := transcript.ReadFile("../testdata/sessions/fix-port.jsonl", transcript.Options{})
	if err != nil {
		log.Fatal(err)
	}
	cfg := advisor.DefaultConfig()
	cfg.Agent = advisor.AgentOf(s.Format) // "claude": its compaction point sets the hard limit
	scorer, err := fitted.NewDefault()
	if err != nil {
		log.Fatal(err)
	}
	adv, err := advisor.New(cfg, scorer, advisor.NewMemoryStore()) // storage.Open(ctx, path) keeps the originals on disk
	if err != nil {
		log.Fatal(err)
	}
	adv.Background = fitted.DefaultBackground()
	times, _, _ := replay.CallTimes(s, time.Duration(cfg.CacheTTL), time.Now())
	step := 0
	adv.Clock = func() time.Time {
		if step < len(times) {
			return times[step]
		}
		return time.Time{}
	}
	rewrites := 0
	plan, err := replay.Simulate(ctx, adv, s, "fix-port", true, func(p advisor.Plan, _ []*transcript.Message) error {
		step++
		if p.Rewrite {
			rewrites++
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d steps, %d rewrites, %d stubs, %d tokens saved, hard limit %d (%s)\n",
		s.Steps(), rewrites, len(plan.Stubs), plan.SavedTokens, plan.HardLimit, plan.HardLimitSource)
	// Output:
	// 19 steps, 1 rewrites, 4 stubs, 4840 tokens saved, hard limit 157000 (agent:claude)
}
