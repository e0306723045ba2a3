package advisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-playground/validator/v10"

	"github.com/pruneadvisor/pruneadvisor/backoff"
	"github.com/pruneadvisor/pruneadvisor/internal/jsonscan"
	"github.com/pruneadvisor/pruneadvisor/planner"
	"github.com/pruneadvisor/pruneadvisor/prices"
)

// Duration is a time.Duration that reads and writes as a Go duration string ("5m").
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a string such as "5m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts a duration string ("5m", "90s") or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want a string like \"5m\" or \"90s\", or a number of seconds", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration: want a string like \"5m\" or a number of seconds, got %s", b)
	}
	*d = Duration(time.Duration(secs * float64(time.Second)))
	return nil
}

// Config holds every setting of the per-step pipeline. Defaults are docs/DESIGN.md's
// defaults table; each field is validated by Validate (go-playground/validator/v10).
type Config struct {
	// ContextWindow is the agent model's context window in tokens. Default 200,000
	// ("common window of current coding models").
	ContextWindow int `json:"context_window" validate:"gte=1000"`
	// BudgetFraction is the budget as a fraction of the window. Default 0.5 ("beyond
	// about half, agents degrade").
	BudgetFraction float64 `json:"budget_fraction" validate:"gt=0,lte=1"`
	// Budget, when > 0, sets the budget in tokens directly and overrides BudgetFraction.
	// It may not exceed ContextWindow.
	Budget int `json:"budget,omitempty" validate:"gte=0,ltefield=ContextWindow"`
	// HardLimitFraction is the fraction of the window past which pending prunes are
	// applied at once. Default 0.9.
	HardLimitFraction float64 `json:"hard_limit_fraction" validate:"gt=0,lte=1,gtefield=BudgetFraction"`
	// Agent is the coding agent whose compaction point is the hard limit
	// (CompactionPoints, HardLimitFor): "claude", "codex", "pi", "gemini",
	// "opencode" or a name CompactionPoints adds. Default "": the proxy tells the
	// agent per request (wrap's X-Pruneadvisor-Agent header, serve --agent, the
	// User-Agent header), and with none the hard limit is HardLimitFraction of the
	// window. An unknown name is a config error.
	Agent string `json:"agent,omitempty" validate:"max=64"`
	// CompactionPoints overrides rows of the agents' compaction points
	// (advisor.CompactionPoints) or adds agents, by name: for example
	// {"codex": {"fraction": 0.9, "tokens": 200000, "counts": "usage"}} for a
	// model_auto_compact_token_limit of 200,000, or {"claude": {"tokens": 126000}}
	// for CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=70 at a 200,000 window (70% of the window
	// less 20,000). A row replaces the table's row whole (its counts, keep_* and
	// summary_tokens too). Default: none.
	CompactionPoints map[string]CompactionPoint `json:"compaction_points,omitempty" validate:"dive"`
	// CompactionMargin is the least margin, in tokens, kept free below an agent's
	// compaction point: the hard limit is the point less the larger of this and
	// the session's largest growth in one step over the last GrowthSteps steps
	// (HardLimitFor). 0 (the
	// default, left out of the JSON so that settings hashes of replays, which
	// never use it, stay as they were) means DefaultCompactionMargin.
	CompactionMargin int `json:"compaction_margin,omitempty" validate:"gte=0,ltfield=ContextWindow"`
	// AnswerMargin is the margin, in tokens, kept free below the point of an
	// agent that counts its context from its last usage (CompactionPoint.Counts
	// "usage": Codex, Gemini CLI, opencode; "turn": pi): room for the model's answer,
	// with no growth term (HardLimitFor). 0 (the default, left out of the JSON)
	// means DefaultAnswerMargin, 5,000.
	AnswerMargin int `json:"answer_margin,omitempty" validate:"gte=0,ltfield=ContextWindow"`
	// GrowthSteps is how many recent steps the hard limit's margin looks back
	// over: the largest one-step growth of the context in the last GrowthSteps
	// steps; 0 (the default): in the whole session so far. Measured
	// (docs/EVALUATION.md, "The hard limit's margin"): 5 takes ../shared/sessions
	// at a 64,000-token window from 19 to 18 compactions and 59 to 50 stub misses,
	// but at the default window its one compacted session (pi's 368,000-token
	// before-compaction.jsonl) then loses 7 used outputs to it instead of 5
	// (keep-all: 6), which DESIGN's order ranks first; hence 0 by default, and 5
	// for small windows. Left out of the JSON when 0, so that settings hashes stay
	// as they were.
	GrowthSteps int `json:"growth_steps,omitempty" validate:"gte=0,lte=1000"`
	// ProtectedSteps is K: outputs of the last K steps are never candidates. Default 3.
	ProtectedSteps int `json:"protected_steps" validate:"gte=0,lte=1000"`
	// MinCandidateTokens is the minimum size of a candidate in tokens. Default 200
	// ("a stub must be clearly shorter").
	MinCandidateTokens int `json:"min_candidate_tokens" validate:"gte=1"`
	// DigestTokens is the stub digest's budget, in o200k tokens of its names, each
	// with the space before it (evidence.DigestNameTokens; before replay-16 an
	// estimate of 1 + len/4 with a comma): a stub names the output's most specific names
	// (evidence.Tracker.Digest, docs/DESIGN.md step 7) up to this many, so that a
	// later step that needs one finds it without a recall. Default 128 (64 before 5
	// December 2026): with the embedded model refitted under it, every anchor
	// regime is dominated on ../shared/sessions and ../shared/corpus, and the
	// stubs the replays apply come to 8.0% and 3.7% of the tokens they replace
	// (docs/EVALUATION.md, "The digest budget raised to 128"). 0 turns digests off.
	DigestTokens int `json:"digest_tokens" validate:"gte=0,lte=4096"`
	// DigestShare lets a long output's digest grow past DigestTokens: an output
	// of T tokens gets a digest budget of max(DigestTokens, DigestShare x T)
	// (evidence.DigestBudgetFor), still under StubMaxShare. Default 0: every
	// digest is at most DigestTokens, issue 39's 128-token bound. A long read
	// of a source file carries hundreds of new names and 128 tokens hold 30 to
	// 40 of them: replayed at 0.06, the digests of the stubs applied hold
	// 83.9% of their later uses on ../shared/sessions (67.7% at 0) and 87.0%
	// on ../shared/corpus (85.0%), with the stubs at 9.8% and 9.2% of the
	// tokens they replace (8.2% and 6.3% at 0), but one corpus session turns
	// costlier than keep-all at today's cutoff (docs/EVALUATION.md, "A digest
	// that grows with the output"); `calibrate` recommends a share when no
	// fixed budget up to 128 holds 75% of the uses within 10%. Ignored when
	// DigestTokens is 0 (digests off). Left out of the JSON when 0, so that
	// settings hashes stay as they were.
	DigestShare float64 `json:"digest_share,omitempty" validate:"gte=0,lte=1"`
	// StubMaxShare bounds a stub with its digest to this share of the tokens it
	// replaces: the digest shrinks (to nothing) to fit (DigestBudget). Default
	// 0.5 (0.35 before replay-16 costed a digest's names at their real tokens,
	// 0.25 before replay-15 priced each stub with the digest it holds): of 0.35,
	// 0.4 and 0.5, the largest, whose stubs stay within issue 39's 10% of the
	// tokens they replace on ../shared/sessions and ../shared/corpus at 128
	// digest tokens (9.05% and 9.97%), holding 62.8% and 75.8% of the uses
	// against 61.9% and 72.4% at 0.35 (64.9% and 76.9% with the names ordered by
	// their squared cost: docs/EVALUATION.md, "Digest names at their real cost").
	// An output of 400 tokens then carries a digest of up to 128 tokens (0.5 x 400
	// less a stub of about 40 tokens without it), one of 200 tokens about 57; a
	// stub is never longer than what it replaces, whatever the share.
	StubMaxShare float64 `json:"stub_max_share" validate:"gt=0,lte=1"`
	// Cutoff is the keep-probability under which a scored candidate is pruned.
	// Default 0.25 until calibrated ("the small model is only reliable in its low tail").
	Cutoff float64 `json:"cutoff" validate:"gte=0,lte=1"`
	// ScorerCutoffs holds the cutoff of particular scorers, by name (as Scorer.Name
	// says it: "fitted", "lexical", "ollama:qwen2.5:0.5b:p2"), over Cutoff (one per
	// scorer). Default: {"fitted": 0.045}: the embedded model is the miss label's
	// blended with the use label's (fitted.DefaultBlend), whose scores sit lower;
	// replayed at 0.04 to 0.06 with the embedded model (refitted under
	// StubMaxShare 0.35), 0.045 makes the fewest sessions costlier than keep-all
	// at the default window and at 64,000 tokens on both shared sets, and of 0.045
	// to 0.055 at 20,000 and 50,000-token budgets (one corpus session at 20,000 tokens against two
	// at 0.05, `fit`'s own cutoff at a 2% miss target, and three at 0.055, which
	// net more at the default window; from 0.06 the corpus has stub misses there:
	// docs/EVALUATION.md, "Stubs priced with their live digest, and a larger
	// share", and "The default cutoff after the refit" for the model before).
	// CutoffFor looks them up.
	ScorerCutoffs map[string]float64 `json:"scorer_cutoffs,omitempty" validate:"dive,gte=0,lte=1"`
	// SizeExponent scales the cutoff with the candidate's size: a candidate of n
	// tokens is pruned when its keep-probability is under cutoff x (n /
	// 1,000)^SizeExponent (planner.CutoffAt), so large outputs go at higher
	// keep-probabilities than small ones. 0 compares every score with the cutoff
	// itself. Default 0.5 (docs/EVALUATION.md, "Live names and a cutoff that grows
	// with the output").
	SizeExponent float64 `json:"size_exponent" validate:"gte=0,lte=2"`
	// SizeCapTokens is the size, in tokens, past which the cutoff stops growing
	// with the candidate (planner.CutoffAt): a candidate larger than this is pruned
	// under the cutoff of one this size. 0 lets it grow without end. Default 3,000:
	// the misses at 2% miss on ../shared/sessions were all reads of 1,700-12,600
	// tokens used again and again, pruned under up to 3.5 times the cutoff; capped
	// at 3,000 the front keeps 60% of the oracle's token-steps out on both shared
	// sets (docs/EVALUATION.md, "A cutoff that stops growing").
	SizeCapTokens int `json:"size_cap_tokens" validate:"gte=0"`
	// RewriteFraction is the least rewrite, as a fraction of the budget: a rewrite
	// forced by the budget waits until it frees at least this much, unless it reaches
	// the low-water mark, so a session hovering at the budget is not rewritten every
	// step. Default 0.05 ("a rewrite that frees less is not worth its cache write").
	RewriteFraction float64 `json:"rewrite_fraction" validate:"gte=0,lte=1"`
	// LowWaterFraction is the low-water mark as a fraction of the budget: a rewrite
	// forced by the budget goes at least this far down, so the next one is far away.
	// Default 0.5 (docs/DESIGN.md's table says 0.8; measured on both sets, 0.5 to
	// 0.3 net more at every window and budget, with no more stub misses:
	// docs/EVALUATION.md, "Every pruner through the agent's recorded compactions").
	LowWaterFraction float64 `json:"low_water_fraction" validate:"gt=0,lte=1"`
	// HardLimitLowWaterFraction lowers the mark of a rewrite forced by the hard
	// limit (docs/DESIGN.md step 6(c)) to this fraction of the hard limit when
	// that is under the low-water mark; 0: the low-water mark alone. Default 0.5:
	// at a 64,000-token window the budget (32,000) sits close to the agents'
	// points, and 80% of it left room for a few steps, so the hard limit forced
	// a rewrite every few steps, each writing the cache again; at the default
	// window it changes only Gemini CLI's (its point is half the window).
	// Measured in docs/EVALUATION.md, "Small windows: the hard limit's mark and
	// its futile rewrites".
	HardLimitLowWaterFraction float64 `json:"hard_limit_low_water_fraction" validate:"gte=0,lte=1"`
	// PayFactor: under the budget with a warm cache, pending prunes are applied only
	// when the rewrite's saving (tokens removed x cache-read price x expected
	// remaining steps) is at least PayFactor times its cost (tokens after the first
	// changed message x (cache write - cache read)). Default 2 (a margin for the
	// estimate's error; see RemainingFactor); calibrate --pay-factor prices others.
	PayFactor float64 `json:"pay_factor" validate:"gte=1,lte=1000"`
	// PriceForced makes a rewrite forced by the budget wait unless it also pays for
	// itself (planner.Input.PriceForced): the budget bounds the context only as far
	// as that costs no more than doing nothing; past the hard limit every pending
	// prune still goes. Default true: measured on ../shared/sessions and
	// ../shared/corpus, forced rewrites that did not pay were what made sessions
	// costlier than keep-all (docs/EVALUATION.md).
	PriceForced bool `json:"price_forced"`
	// LastResort lets a rewrite forced by the hard limit (docs/DESIGN.md step 6(c))
	// also stub outputs of the last ProtectedSteps steps, protected only as recent,
	// that the agent's compaction would drop (not in the tail its CompactionPoint
	// keeps): last, lowest keep-probability first, when the pending prunes and the
	// kept candidates do not reach the low-water mark (planner.Input.Protected).
	// Their stubs keep them recallable; the compaction they help avoid would
	// drop them for good. Default true: on the same replays at a 64,000-token
	// window it took the compactions from 22 to 19 on ../shared/sessions and 28 to
	// 20 on ../shared/corpus, the used outputs lost to them from 60 to 38 and 35 to
	// 26, for 14 and 22 more stub misses (docs/EVALUATION.md, "The last resort
	// before a compaction").
	LastResort bool `json:"last_resort"`
	// RemainingFactor and RemainingMin estimate a session's remaining steps from its
	// steps so far: max(RemainingMin, RemainingFactor x steps) (planner.Estimator).
	// Defaults 0.15 and 3. The mean remaining length is about 0.5 x steps on
	// ../shared/corpus (planner.FitFactor; calibrate prints it), but a rewrite priced
	// on the mean loses money in every session that ends sooner than average. 0.15
	// (with PayFactor 2) is the largest factor on the grid {0.05, 0.1, 0.15, 0.2}
	// with which no more sessions of ../shared/corpus or ../shared/sessions are
	// costlier than keep-all than 0.05 (the former default) had, at the
	// 100,000-, 50,000- and 20,000-token budgets and the 64,000-token window, under
	// the default scorer and cutoff; 0.2 makes two corpus sessions costlier at the
	// default budget. Against 0.05 it nets $8.44 instead of $7.34 on the sessions
	// and $4.20 instead of $4.06 on the corpus at the default budget
	// (docs/EVALUATION.md, "Choosing the regime, again").
	RemainingFactor float64 `json:"remaining_factor" validate:"gt=0,lte=100"`
	RemainingMin    float64 `json:"remaining_min" validate:"gte=1,lte=100000"`
	// OverBudgetRemainingFactor takes RemainingFactor's place while the context is
	// over the budget: every rewrite then (forced by the budget under
	// PriceForced, or one that pays) is priced on max(RemainingMin,
	// OverBudgetRemainingFactor x steps) remaining steps. A session past its
	// budget has gone on long enough to go on further, and at 0.05 a rewrite
	// over the budget almost never paid: ../shared/sessions' pi session.jsonl
	// stayed over its budget for 58 steps with its pending prunes waiting. 0 uses
	// RemainingFactor. Default 0.2: on a grid of 0.15-0.3 the largest before the
	// sessions lose a used output to a compaction (docs/EVALUATION.md, "Over the
	// budget").
	OverBudgetRemainingFactor float64 `json:"over_budget_remaining_factor" validate:"gte=0,lte=100"`
	// OverBudgetCutoff lets a rewrite forced by the budget (docs/DESIGN.md step
	// 6(b)) also take kept candidates whose last keep-probability is under it
	// (never one not scored yet; the size exponent does not apply), lowest
	// first, after the pending prunes, down to the low-water mark
	// (planner.Input.Extra), priced with them (PriceForced). 0 turns it off.
	// Default 0.1: replayed with the size cap, 0.1 and 0.15 give the fewest stub
	// misses at every budget of the default window on both shared sets and no
	// session costlier than keep-all at the default budget, where 0.3 made pi's
	// before-compaction.jsonl costlier (docs/EVALUATION.md, "Over the budget,
	// again").
	OverBudgetCutoff float64 `json:"over_budget_cutoff" validate:"gte=0,lte=1"`
	// Provider is the provider whose prices and cache rules apply ("anthropic",
	// "openai", "gemini"); "" chooses by the session's format (ProviderOf). The
	// proxy sets it per route to the route's provider (the one its ledger bills),
	// whatever the configuration says; it applies to session files and the sidecar.
	Provider string `json:"provider,omitempty" validate:"omitempty,oneof=anthropic openai gemini"`
	// Prices overrides the default price model of any provider (prices.Default), keyed
	// by provider name; each entry is read over that provider's default
	// (prices.Table.UnmarshalJSON), so an entry may give only the prices that differ.
	Prices prices.Table `json:"prices,omitempty"`
	// CacheTTL is how long the provider keeps a prompt cache warm; with no call for
	// longer than this, a rewrite is free. Default 5m.
	CacheTTL Duration `json:"cache_ttl" validate:"gte=0"`
	// Schedule is the ask back-off in backoff.Parse syntax. Default "3,6,12,24":
	// re-asks 3, 6, 12, 24 steps after the previous ask, only while over budget.
	// It also sets the windows a recalled or re-read output is protected for (its
	// n-th gap for the n-th recall), whatever ScorerSchedules says.
	Schedule string `json:"schedule" validate:"required"`
	// ScorerSchedules holds the ask back-off of particular scorers, by name as in
	// ScorerCutoffs, over Schedule. Default: {"fitted": "1,1,2,3,6,12,24"}: the
	// fitted scorer costs about 2 µs a card (docs/PERFORMANCE.md), so it is
	// re-asked sooner while an output is young, which prunes sooner at the same
	// miss rate (docs/EVALUATION.md, "The fitted scorer's own back-off"), and like
	// Schedule every 24 steps once it is old; a small model through Ollama keeps
	// Schedule. ScheduleFor looks them up; --schedule on the command line replaces
	// both.
	ScorerSchedules map[string]string `json:"scorer_schedules,omitempty"`
	// ReaskUnderBudget makes re-asks follow Schedule whatever the context size.
	// Default false (docs/DESIGN.md step 5: re-asks only while over the budget, or when
	// the cache is cold and a rewrite is free): scores of a model barely move between
	// asks, and asks cost. The fitted scorer's do move (the use history changes) and
	// cost microseconds; training replays set it to see every output at many ages.
	ReaskUnderBudget bool `json:"reask_under_budget,omitempty"`
	// ExcludedTools are tool names or globs (path.Match syntax, case-insensitive)
	// whose outputs are never candidates. Default: memory, todo, skill and
	// task/subagent tools of the agents pruneadvisor reads. A caller unprotects one
	// output of an excluded tool by attaching the retention class "disposable" to its
	// message (transcript.Message.Retention), or all of them by leaving the tool out
	// of this list; "keep" protects any output.
	ExcludedTools []string `json:"excluded_tools" validate:"dive,required"`
	// ModelFile is the fitted scorer's model file (written by `pruneadvisor fit`);
	// "" means the weights embedded in the binary. The advisor itself does not read
	// it: the commands build the scorer from it when --model-file is not given, and
	// `fit --write-config` sets it, so a model fitted on the user's own sessions
	// becomes their scorer. A relative path is taken from the working directory.
	ModelFile string `json:"model_file,omitempty" validate:"max=4096"`
	// RecallTool is the recall tool's name as the agent sees it, named in every stub.
	// Default "recall"; "mcp__pruneadvisor__recall" for Claude Code over MCP.
	RecallTool string `json:"recall_tool" validate:"required,max=128"`
}

// DefaultExcludedTools is the default for Config.ExcludedTools: memory, todo, skill
// and task/subagent tools of Claude Code, pi, Codex, Gemini CLI and OpenHands.
var DefaultExcludedTools = []string{
	"*memory*", "todowrite", "todoread", "write_todos", "update_plan", "*todo*",
	"skill", "task", "agent", "*subagent*", "think",
}

// DefaultConfig returns the defaults of docs/DESIGN.md's table.
func DefaultConfig() Config {
	return Config{
		ContextWindow:             200_000,
		BudgetFraction:            0.5,
		HardLimitFraction:         0.9,
		ProtectedSteps:            3,
		MinCandidateTokens:        200,
		DigestTokens:              128,
		StubMaxShare:              0.5,
		Cutoff:                    0.25,
		ScorerCutoffs:             map[string]float64{"fitted": 0.045},
		ScorerSchedules:           map[string]string{"fitted": "1,1,2,3,6,12,24"},
		SizeExponent:              0.5,
		SizeCapTokens:             3000,
		RewriteFraction:           0.05,
		LowWaterFraction:          0.5,
		HardLimitLowWaterFraction: 0.5,
		PayFactor:                 2,
		PriceForced:               true,
		LastResort:                true,
		RemainingFactor:           0.15,
		RemainingMin:              3,

		OverBudgetRemainingFactor: 0.2,
		OverBudgetCutoff:          0.1,
		CacheTTL:                  Duration(5 * time.Minute),
		Schedule:                  "3,6,12,24",
		ExcludedTools:             append([]string(nil), DefaultExcludedTools...),
		RecallTool:                "recall",
	}
}

// validate checks Config's tags; errors name fields by their JSON keys.
var validate = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			return f.Name
		}
		return name
	})
	return v
}()

// ruleWords says what a validate tag asks of a field, in words ("must be at most
// 1", "must be at most context_window"); a tag it does not know, as the tag
// itself ("breaks \"dive\"").
func ruleWords(tag, param string) string {
	switch tag {
	case "gte", "gtefield":
		return "must be at least " + param
	case "lte", "ltefield":
		return "must be at most " + param
	case "gt", "gtfield":
		return "must be more than " + param
	case "lt", "ltfield":
		return "must be less than " + param
	case "max":
		return "must be at most " + param + " long"
	case "oneof":
		return "must be one of " + strings.Join(strings.Fields(param), ", ")
	case "required":
		return "must be set"
	}
	if param != "" {
		tag += "=" + param
	}
	return fmt.Sprintf("breaks %q", tag)
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("invalid config")

// tagErrors words the validator's errors of a Config in field order ("cutoff = 2:
// must be at most 1"), leaving out a field compared with another field that broke a
// rule of its own; an error that is not the validator's is returned wrapping
// ErrConfig.
func tagErrors(err error) ([]string, error) {
	if err == nil {
		return nil, nil
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var msgs []string
	failed := map[string]bool{} // struct fields that broke a rule of their own
	for _, fe := range verrs {
		if !strings.HasSuffix(fe.Tag(), "field") {
			failed[fe.StructField()] = true
		}
	}
	for _, fe := range verrs {
		rule, param := fe.Tag(), fe.Param()
		if strings.HasSuffix(rule, "field") && failed[param] {
			continue // said of the field it is compared with ("budget = 0" of a bad context_window)
		}
		if strings.HasSuffix(rule, "field") {
			if f, ok := reflect.TypeFor[Config]().FieldByName(param); ok {
				param, _, _ = strings.Cut(f.Tag.Get("json"), ",")
			}
		}
		value := fe.Value()
		if d, ok := value.(Duration); ok {
			value = time.Duration(d)
		}
		// The namespace names a nested field whole
		// ("compaction_points[codex].fraction"), less the struct's own name.
		_, field, _ := strings.Cut(fe.Namespace(), ".")
		msgs = append(msgs, fmt.Sprintf("%s = %v: %s", field, value, ruleWords(rule, param)))
	}
	return msgs, nil
}

// Validate checks every field and returns an error wrapping ErrConfig that names
// each bad field by its JSON key (for example "cache_ttl", "excluded_tools[2]") with
// its value and the rule it broke in words ("cutoff = 2: must be at most 1"), all
// bad fields in one message, in field order. A field compared with another one
// (budget with context_window) is not named when that other field is bad itself.
// Besides the tags it checks that Schedule parses (backoff.Parse) and that every
// excluded-tool glob is valid path.Match syntax.
func (c Config) Validate() error {
	msgs, err := tagErrors(validate.Struct(c))
	if err != nil {
		return err
	}
	msgs = append(msgs, c.scheduleErrors()...)
	if err := c.Prices.Validate(); err != nil {
		msgs = append(msgs, fmt.Sprintf("prices: %v", err))
	}
	if err := c.CheckAgent(c.Agent); err != nil {
		msgs = append(msgs, fmt.Sprintf("agent: %v", err))
	} else if p, ok := c.PointOf(c.Agent); ok && c.ContextWindow > 0 {
		name, margin := "compaction_margin", c.Margin()
		if p.CountsLastUsage() {
			name, margin = "answer_margin", c.AnswerMarginTokens()
		}
		if p.At(c.ContextWindow) <= margin {
			msgs = append(msgs, fmt.Sprintf("agent: %s compacts at %d tokens of a context_window of %d, not above %s %d",
				c.Agent, p.At(c.ContextWindow), c.ContextWindow, name, margin))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.CompactionPoints)) {
		if why := c.CompactionPoints[k].check(c.ContextWindow); why != "" {
			msgs = append(msgs, fmt.Sprintf("compaction_points[%s]: %s", k, why))
		}
	}
	for i, g := range c.ExcludedTools {
		if _, err := path.Match(strings.ToLower(g), ""); err != nil {
			msgs = append(msgs, fmt.Sprintf("excluded_tools[%d]: bad glob %q: %v", i, g, err))
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(msgs, "; "))
	}
	return nil
}

// BudgetTokens returns the budget in tokens: Budget when set, else the window times
// BudgetFraction.
func (c Config) BudgetTokens() int {
	if c.Budget > 0 {
		return c.Budget
	}
	return int(float64(c.ContextWindow) * c.BudgetFraction)
}

// HardLimitTokens returns the hard limit in tokens (window times HardLimitFraction),
// never below the budget.
func (c Config) HardLimitTokens() int {
	return max(int(float64(c.ContextWindow)*c.HardLimitFraction), c.BudgetTokens())
}

// CutoffFor returns the cutoff of the scorer named name: ScorerCutoffs[name], else
// the entry for the part of name before its first ':' ("ollama" for
// "ollama:qwen2.5:0.5b:p2", "fitted" for "fitted:mine.json"), else Cutoff. It is
// the one rule that resolves a scorer's cutoff (before planner.CutoffAt scales it
// by an output's size): the advisor (CutoffOf), backoff (CutoffOf) and the
// calibrate reports of a stored replay, by the name it recorded
// (tuning.Group.Cutoff), all read it here.
func (c Config) CutoffFor(name string) float64 { return byScorer(c.ScorerCutoffs, name, c.Cutoff) }

// byScorer returns m's entry for scorer name, else for the part of name before its
// first ':', else def: the lookup of CutoffFor and ScheduleFor.
func byScorer[V any](m map[string]V, name string, def V) V {
	if v, ok := m[name]; ok {
		return v
	}
	if head, _, found := strings.Cut(name, ":"); found {
		if v, ok := m[head]; ok {
			return v
		}
	}
	return def
}

// scheduleErrors returns what is wrong with Schedule (when set: an empty one is
// the validator's) and ScorerSchedules, one message each, in backoff.Parse's words.
func (c Config) scheduleErrors() []string {
	var msgs []string
	if strings.TrimSpace(c.Schedule) != "" {
		if _, err := backoff.Parse(c.Schedule); err != nil {
			msgs = append(msgs, fmt.Sprintf("schedule: %v", err))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.ScorerSchedules)) {
		if _, err := backoff.Parse(c.ScorerSchedules[k]); err != nil {
			msgs = append(msgs, fmt.Sprintf("scorer_schedules[%s]: %v", k, err))
		}
	}
	return msgs
}

// ScheduleFor returns the ask back-off of the scorer named name, by the same rule
// as CutoffFor: ScorerSchedules[name], else the entry for the part of name before
// its first ':', else Schedule.
func (c Config) ScheduleFor(name string) string {
	return byScorer(c.ScorerSchedules, name, c.Schedule)
}

// ScheduleOf returns the ask back-off scorer is asked by: ScheduleFor its name;
// Schedule for a nil scorer.
func (c Config) ScheduleOf(scorer Scorer) string {
	if scorer == nil {
		return c.Schedule
	}
	return c.ScheduleFor(scorer.Name())
}

// WithScorerCutoff returns a copy of c whose scorer named name has cutoff cut
// (ScorerCutoffs[name], in a map of the copy's own: c's is left as it was).
func (c Config) WithScorerCutoff(name string, cut float64) Config {
	c.ScorerCutoffs = maps.Clone(c.ScorerCutoffs)
	if c.ScorerCutoffs == nil {
		c.ScorerCutoffs = map[string]float64{}
	}
	c.ScorerCutoffs[name] = cut
	return c
}

// CutoffOf returns the cutoff scorer's keep-probabilities are pruned under:
// CutoffFor its name; Cutoff for a nil scorer (rules only: no score is compared
// with it).
func (c Config) CutoffOf(scorer Scorer) float64 {
	if scorer == nil {
		return c.Cutoff
	}
	return c.CutoffFor(scorer.Name())
}

// LowWaterTokens returns the low-water mark in tokens: LowWaterFraction x budget.
func (c Config) LowWaterTokens() int {
	return int(c.LowWaterFraction * float64(c.BudgetTokens()))
}

// LeastRewriteTokens returns the least a forced rewrite frees, in tokens:
// ceil(RewriteFraction x budget).
func (c Config) LeastRewriteTokens() int {
	return int(math.Ceil(c.RewriteFraction * float64(c.BudgetTokens())))
}

// Estimator returns the remaining-steps estimator of RemainingFactor and
// RemainingMin.
func (c Config) Estimator() planner.Estimator {
	return planner.Estimator{Factor: c.RemainingFactor, Min: c.RemainingMin}
}

// EstimatorOver returns the remaining-steps estimator while the context is over
// the budget: OverBudgetRemainingFactor (RemainingFactor when 0) and RemainingMin.
func (c Config) EstimatorOver() planner.Estimator {
	e := c.Estimator()
	if c.OverBudgetRemainingFactor > 0 {
		e.Factor = c.OverBudgetRemainingFactor
	}
	return e
}

// PriceModel returns the price model of provider p: the Prices entry, else the
// default. An unknown provider gets Anthropic's (Validate refuses one in Provider).
func (c Config) PriceModel(p prices.Provider) prices.Model {
	m, err := c.Prices.For(p)
	if err != nil {
		return prices.MustDefault(prices.Anthropic)
	}
	return m
}

// LoadConfig reads a JSON config file over the defaults: fields the file omits keep
// their defaults. Errors name the file: an empty file (wrapping ErrConfig), an unknown field (json's `unknown field
// "name"`), a value of the wrong type, data after the object (wrapping ErrConfig),
// or a Validate failure (wrapping ErrConfig); on error the Config is the zero value.
func LoadConfig(file string) (Config, error) {
	cfg := DefaultConfig()
	data, err := os.ReadFile(file)
	if err != nil {
		return cfg, fmt.Errorf("load config: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Config{}, fmt.Errorf("load config %s: %w: the file is empty; want a JSON object of the fields to change, e.g. {\"budget\": 100000}", file, ErrConfig)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		if k := failingField(data); k != "" {
			return Config{}, fmt.Errorf("load config %s: field %q: %w", file, k, err)
		}
		if at := jsonErrorAt(data, err); at != "" {
			return Config{}, fmt.Errorf("load config %s:%s: %w", file, at, err)
		}
		return Config{}, fmt.Errorf("load config %s: %w", file, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, fmt.Errorf("load config %s: %w: data after the JSON object", file, ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("load config %s: %w", file, err)
	}
	return cfg, nil
}

// jsonErrorAt is where in data a JSON decoding error lies, as "LINE:COLUMN"
// (1-based, columns in bytes: jsonscan.ErrorOffset and Position): a syntax
// error's offending byte, a type error's value end, one past the last byte for a
// document cut short; "" for any other error.
func jsonErrorAt(data []byte, err error) string {
	off, ok := jsonscan.ErrorOffset(data, err)
	if !ok {
		return ""
	}
	line, col := jsonscan.Position(data, off)
	return fmt.Sprintf("%d:%d", line, col)
}

// failingField names the top-level field of the JSON object data whose value alone
// fails to decode into a Config (encoding/json does not name the field when a
// field's own UnmarshalJSON fails, e.g. a cache_ttl of "forever"); "" when data is
// not an object or no single field fails, or when json's error names it already.
func failingField(data []byte) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return ""
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		one, err := json.Marshal(map[string]json.RawMessage{k: fields[k]})
		if err != nil {
			return ""
		}
		cfg := DefaultConfig()
		err = json.Unmarshal(one, &cfg)
		var typeErr *json.UnmarshalTypeError
		if err != nil && !errors.As(err, &typeErr) {
			return k
		}
	}
	return ""
}

// WriteConfig writes cfg as indented JSON to file (used by `calibrate --write-config`).
func WriteConfig(file string, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}

// Excluded reports whether a tool name matches one of the excluded globs
// (case-insensitive).
func (c Config) Excluded(tool string) bool {
	t := strings.ToLower(tool)
	for _, g := range c.ExcludedTools {
		if ok, _ := path.Match(strings.ToLower(g), t); ok {
			return true
		}
	}
	return false
}
