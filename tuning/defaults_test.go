package tuning

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
)

// calibrate.DefaultOptions prices the planner's regime as the live advisor runs it
// by default (its doc says so; calibrate cannot import advisor): every constant of
// the regime equals advisor.DefaultConfig's. The remaining-steps factor drifted once
// (0.05 left in calibrate after the advisor's default became 0.15).
func TestCalibrateDefaultsAreTheAdvisors(t *testing.T) {
	cfg := advisor.DefaultConfig()
	o := calibrate.DefaultOptions()
	type regime struct {
		Budget, HardLimit, Window, ProtectedSteps, GrowthSteps                 int
		LowWater, HardLowWater, Rewrite, Pay, Factor, Min, OverFactor, OverCut float64
		PriceForced, LastResort                                                bool
		CacheTTL                                                               time.Duration
	}
	want := regime{
		Budget: cfg.BudgetTokens(), HardLimit: cfg.HardLimitTokens(), Window: cfg.ContextWindow,
		ProtectedSteps: cfg.ProtectedSteps, GrowthSteps: cfg.GrowthSteps,
		LowWater: cfg.LowWaterFraction, HardLowWater: cfg.HardLimitLowWaterFraction, Rewrite: cfg.RewriteFraction,
		Pay: cfg.PayFactor, Factor: cfg.RemainingFactor, Min: cfg.RemainingMin,
		OverFactor: cfg.OverBudgetRemainingFactor, OverCut: cfg.OverBudgetCutoff,
		PriceForced: cfg.PriceForced, LastResort: cfg.LastResort, CacheTTL: time.Duration(cfg.CacheTTL),
	}
	got := regime{
		Budget: o.Budget, HardLimit: o.HardLimit, Window: o.Window, ProtectedSteps: o.ProtectedSteps, GrowthSteps: o.GrowthSteps,
		LowWater: o.LowWaterFraction, HardLowWater: o.HardLimitLowWaterFraction, Rewrite: o.RewriteFraction,
		Pay: o.PayFactor, Factor: o.Estimator.Factor, Min: o.Estimator.Min,
		OverFactor: o.OverBudgetFactor, OverCut: o.OverBudgetCutoff,
		PriceForced: o.PriceForced, LastResort: o.LastResort, CacheTTL: o.CacheTTL,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("calibrate.DefaultOptions against advisor.DefaultConfig (-advisor +calibrate):\n%s", d)
	}
}
