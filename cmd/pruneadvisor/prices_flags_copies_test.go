package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/backoff"
)

// The calibrate options take K and the recall windows from the replay's config
// (priceFlags.options): a config with K 5 and the schedule 4, 8 gives
// ProtectedSteps 5 and recall windows of 4 then 8 steps, whatever the ask
// schedules of particular scorers (the fitted one's 1, 1, 2, …), as the live
// advisor's (advisor.Config.Schedule).
func TestPriceFlagsCopyOptions(t *testing.T) {
	var p priceFlags
	p.register(&cobra.Command{})
	cfg := advisor.DefaultConfig()
	cfg.ProtectedSteps, cfg.Schedule = 5, "4,8"
	o, err := p.options(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.ProtectedSteps != 5 {
		t.Errorf("ProtectedSteps %d, want 5", o.ProtectedSteps)
	}
	if d := cmp.Diff([]int{4, 8}, o.RecallWindows.Gaps()); d != "" {
		t.Errorf("recall windows (-want +got):\n%s", d)
	}
	// A schedule that does not parse is an error naming it, not the default
	// windows in its place.
	cfg.Schedule = "3,x"
	if _, err := p.options(cfg); !errors.Is(err, backoff.ErrSyntax) || !strings.Contains(err.Error(), `schedule "3,x"`) {
		t.Errorf("options with schedule 3,x: %v; want a backoff.ErrSyntax naming the schedule", err)
	}
}
