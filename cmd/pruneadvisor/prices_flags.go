package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/backoff"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/prices"
)

// priceFlags are the price model and regime settings of calibrate and backoff: the
// replay's advisor config gives the defaults (its budget, low-water mark, least
// rewrite, pay factor, remaining-steps estimate, cache TTL and price table), the
// flags override them.
type priceFlags struct {
	provider           string
	input, read, write float64 // dollars per Mtok; used when the flag is given (set)
	recallOverhead     int
	payFactor          float64 // 0 = the replay's
	remainingFactor    float64 // 0 = the replay's
	priceForced        string  // "" = the replay's, else true or false
	lastResort         string  // "" = the replay's, else true or false
	growthSteps        int     // -1 = the replay's
	overBudgetFactor   float64 // -1 = the replay's over_budget_remaining_factor
	overBudgetCutoff   float64 // -1 = the replay's over_budget_cutoff
	hardLowWater       float64 // -1 = the replay's hard_limit_low_water_fraction
	cmd                *cobra.Command
}

func (p *priceFlags) register(c *cobra.Command) {
	p.cmd = c
	c.Flags().StringVar(&p.provider, "provider", "", "price every session as this provider (anthropic, openai, gemini); default: each session's own (its format's provider)")
	c.Flags().Float64Var(&p.input, "price-input", 0, "US dollars per million uncached input tokens (default: the provider's list price, package prices)")
	c.Flags().Float64Var(&p.read, "price-cache-read", 0, "US dollars per million tokens read from the prompt cache (default: the provider's; Anthropic 0.1x input)")
	c.Flags().Float64Var(&p.write, "price-cache-write", 0, "US dollars per million tokens written to the prompt cache (default: the provider's; Anthropic 1.25x input, OpenAI and Gemini the input price)")
	c.Flags().IntVar(&p.recallOverhead, "recall-overhead", calibrate.DefaultOptions().RecallOverheadTokens, "tokens one recall round trip writes beyond the original (the recall call and the result's framing)")
	c.Flags().Float64Var(&p.payFactor, "pay-factor", 0, "the planner's pay factor: a rewrite pays when it saves this many times its cost (default: the replay's config)")
	c.Flags().Float64Var(&p.remainingFactor, "remaining-factor", 0, "the planner's remaining-steps estimate per step so far (default: the replay's config)")
	c.Flags().StringVar(&p.priceForced, "price-forced", "", "true: rewrites forced by the budget must pay too; false: they need not (default: the replay's config)")
	c.Flags().IntVar(&p.growthSteps, "growth-steps", -1, "the steps the hard limit's margin looks back over for the largest one-step growth (0: the whole session; default: the replay's config, growth_steps)")
	c.Flags().Float64Var(&p.overBudgetFactor, "over-budget-remaining-factor", -1, "the planner's remaining-steps estimate per step so far while the context is over the budget (0: --remaining-factor's; default: the replay's config, over_budget_remaining_factor)")
	c.Flags().Float64Var(&p.overBudgetCutoff, "over-budget-cutoff", -1, "a rewrite forced by the budget may also take candidates whose last score is under this (0: never; default: the replay's config, over_budget_cutoff)")
	c.Flags().Float64Var(&p.hardLowWater, "hard-limit-low-water-fraction", -1, "a rewrite forced by the hard limit goes down to this fraction of the hard limit when that is under the low-water mark (0: the low-water mark alone; default: the replay's config, hard_limit_low_water_fraction)")
	c.Flags().StringVar(&p.lastResort, "last-resort", "", "true: a rewrite forced by the hard limit may also stub recent outputs the agent's compaction would drop; false: never (default: the replay's config, last_resort)")
}

// options returns calibrate options from cfg (the replay's advisor config) and the
// flags. Errors name the flag: a negative or non-finite price, an unknown provider,
// a negative recall overhead; or cfg's field: a schedule that does not parse
// (backoff.ErrSyntax), never a silent change of the recall windows.
func (p *priceFlags) options(cfg advisor.Config) (calibrate.Options, error) {
	o := calibrate.DefaultOptions()
	o.Budget, o.HardLimit = cfg.BudgetTokens(), cfg.HardLimitTokens()
	o.LowWaterFraction, o.RewriteFraction, o.PayFactor = cfg.LowWaterFraction, cfg.RewriteFraction, cfg.PayFactor
	o.PriceForced, o.SizeExponent, o.LastResort = cfg.PriceForced, cfg.SizeExponent, cfg.LastResort
	o.GrowthSteps, o.SizeCapTokens = cfg.GrowthSteps, cfg.SizeCapTokens
	o.ProtectedSteps = cfg.ProtectedSteps
	// The recall windows are Schedule's whatever the scorer's ask schedule, as
	// the live advisor's (advisor.Config.Schedule).
	w, err := backoff.Parse(cfg.Schedule)
	if err != nil {
		return o, fmt.Errorf("the replay's config: schedule %q: %w", cfg.Schedule, err)
	}
	o.RecallWindows = w
	switch {
	case p.growthSteps > 1000 || p.growthSteps < -1:
		return o, usageError{fmt.Errorf("--growth-steps %d: want 0 to 1000 steps", p.growthSteps)}
	case p.growthSteps >= 0:
		o.GrowthSteps = p.growthSteps
	}
	o.Estimator, o.CacheTTL = cfg.Estimator(), cfg.CacheTTL.Std()
	o.OverBudgetFactor, o.OverBudgetCutoff = cfg.OverBudgetRemainingFactor, cfg.OverBudgetCutoff
	o.HardLimitLowWaterFraction = cfg.HardLimitLowWaterFraction
	if p.hardLowWater >= 0 {
		if math.IsNaN(p.hardLowWater) || p.hardLowWater > 1 {
			return o, usageError{fmt.Errorf("--hard-limit-low-water-fraction %v: want a fraction from 0 to 1", p.hardLowWater)}
		}
		o.HardLimitLowWaterFraction = p.hardLowWater
	}
	if p.overBudgetFactor >= 0 {
		if math.IsNaN(p.overBudgetFactor) || math.IsInf(p.overBudgetFactor, 0) || p.overBudgetFactor > 100 {
			return o, usageError{fmt.Errorf("--over-budget-remaining-factor %v: want a finite number from 0 to 100", p.overBudgetFactor)}
		}
		o.OverBudgetFactor = p.overBudgetFactor
	}
	if p.overBudgetCutoff >= 0 {
		if math.IsNaN(p.overBudgetCutoff) || p.overBudgetCutoff > 1 {
			return o, usageError{fmt.Errorf("--over-budget-cutoff %v: want a keep-probability from 0 to 1", p.overBudgetCutoff)}
		}
		o.OverBudgetCutoff = p.overBudgetCutoff
	}
	for k, m := range cfg.Prices {
		o.Prices[k] = m
	}
	if p.payFactor != 0 {
		if math.IsNaN(p.payFactor) || p.payFactor < 1 || math.IsInf(p.payFactor, 0) {
			return o, usageError{fmt.Errorf("--pay-factor %v: want a finite number >= 1", p.payFactor)}
		}
		o.PayFactor = p.payFactor
	}
	if p.remainingFactor != 0 {
		if math.IsNaN(p.remainingFactor) || p.remainingFactor <= 0 || math.IsInf(p.remainingFactor, 0) {
			return o, usageError{fmt.Errorf("--remaining-factor %v: want a finite number > 0", p.remainingFactor)}
		}
		o.Estimator.Factor = p.remainingFactor
	}
	for _, b := range []struct {
		flag, v string
		to      *bool
	}{{"price-forced", p.priceForced, &o.PriceForced}, {"last-resort", p.lastResort, &o.LastResort}} {
		switch b.v {
		case "":
		case "true", "false":
			*b.to = b.v == "true"
		default:
			return o, usageError{fmt.Errorf("--%s %q: want true or false", b.flag, b.v)}
		}
	}
	if p.recallOverhead < 0 {
		return o, usageError{fmt.Errorf("--recall-overhead %d: want tokens >= 0", p.recallOverhead)}
	}
	o.RecallOverheadTokens = p.recallOverhead
	targets := prices.Providers()
	if p.provider != "" {
		pr, err := prices.ParseProvider(p.provider)
		if err != nil {
			return o, usageError{fmt.Errorf("--provider: %w", err)}
		}
		targets = []prices.Provider{pr}
	}
	for _, f := range []struct {
		name string
		v    float64
		set  func(*prices.Model, float64)
	}{
		{"--price-input", p.input, func(m *prices.Model, v float64) { m.InputPerMTok = v }},
		{"--price-cache-read", p.read, func(m *prices.Model, v float64) { m.CacheReadPerMTok = v }},
		{"--price-cache-write", p.write, func(m *prices.Model, v float64) {
			m.CacheWritePerMTok, m.CacheWriteLongPerMTok = v, max(v, m.CacheWriteLongPerMTok)
		}},
	} {
		if p.cmd == nil || !p.cmd.Flags().Changed(strings.TrimPrefix(f.name, "--")) {
			continue
		}
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return o, usageError{fmt.Errorf("%s %v: want a finite price >= 0 (US dollars per million tokens)", f.name, f.v)}
		}
		for _, pr := range targets {
			m, _ := o.Prices.For(pr)
			f.set(&m, f.v)
			o.Prices[pr] = m
		}
	}
	if err := o.Validate(); err != nil {
		return o, usageError{err}
	}
	return o, nil
}

// sessionProvider is the provider a session is priced under: --provider, else its
// own.
func (p *priceFlags) sessionProvider(own prices.Provider) prices.Provider {
	if p.provider != "" {
		return prices.Provider(p.provider)
	}
	return own
}
