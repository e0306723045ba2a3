// Package calibrate turns replay records into the numbers docs/DESIGN.md's "Calibration,
// baselines, back-off" asks for: a reliability table, Brier score and AUC per scorer;
// for every cutoff the prune rate, miss rate and token-steps saved; and, for every
// pruner, what it costs in dollars against doing nothing, priced the way the
// planner prices a rewrite. The same figures are given for the baselines (keep-all,
// rules only, recency masking, random at equal prune rate, the oracle) and for the
// regimes of the tools people use instead (anchors.go), over the same outputs. Every
// function here is pure: the caller (the calibrate and backoff commands) reads the
// replay store and builds the records.
//
// # Steps
//
// Step numbers are the advisor's: the plan for step T is made before model call T and
// sees the messages written before it. An output produced by the call of step s is
// visible from step s+1. An ask at step T and a prune at step T both happen before
// call T, so a prune at step T removes the output from calls T, T+1, …, and it
// *misses* when the output is used at a step u >= T (the assistant message of call T
// was written without it). With evidence.Tracker that is UsedAfter(key, T-1).
//
// # Two levels
//
// A pruner is a decision per output: the step at which it would prune it. At the
// decision level every decision is applied at its step (a rewrite at every step with
// a new decision). At the applied level the decisions become pending prunes and the
// planner (package planner, the regime the advisor runs) decides when they are
// applied, from each step's context, the cache's state (cold after a pause longer
// than the TTL), the budget and the price model. The anchors apply their own rules.
//
// # Money
//
// Every call is priced as the provider bills it (prices.Model.Call): the tokens that
// match the previous call's up to the first changed message are cache reads, the rest
// cache writes; after a pause longer than the cache TTL everything is written. So a
// rewrite costs the cache premium of everything after its first changed message, and
// a removed token saves a cache read at every later call. Keep-all (doing nothing) is
// priced the same way over the unpruned context; NetUSD is keep-all's price minus the
// pruner's, so positive means cheaper than doing nothing. A miss is priced as the
// round trip that repairs it: one more call that reads the context from the cache and
// writes the recalled original and RecallOverheadTokens, after which the original
// is in the context as a copy beside its stub (the stub stays too: docs/DESIGN.md
// "Recall"). A copy is an output like any other: a compaction drops it (a later use
// is lost again), and once past its protection (Options.ProtectedSteps,
// Options.RecallWindows) a pruner may stub it again, a later use its stub does not
// hold then missing again: an anchor by its own rule, any other as it decided the
// original, at the same age, and a scorer's rewrite forced by the hard limit as a
// last candidate.
package calibrate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/pruneadvisor/pruneadvisor/backoff"
	"github.com/pruneadvisor/pruneadvisor/planner"
	"github.com/pruneadvisor/pruneadvisor/prices"
)

// Sentinel errors, wrapped with the offending session, key and field.
var (
	// ErrInvalid means a record, session or option breaks a documented constraint.
	ErrInvalid = errors.New("calibrate: invalid input")
	// ErrNoSession means an output names a session with no Calls record (its
	// context sizes are needed to simulate rewrites).
	ErrNoSession = errors.New("calibrate: no session record")
	// ErrNoCutoff means no cutoff of a sweep meets the target miss rate.
	ErrNoCutoff = errors.New("calibrate: no cutoff meets the target miss rate")
)

// Ask is one scorer answer about one output.
type Ask struct {
	Step int     // plan step the ask was made for (>= the output's CandidateFrom)
	Keep float64 // keep-probability in [0,1]; meaningful only when OK
	OK   bool    // false: "no score", nothing is pruned on its account
}

// Output is the replay record of one tool output under one scorer (and one ask
// schedule). The same outputs under another scorer or schedule differ only in Asks.
type Output struct {
	Session string // session id
	Key     string // output key within the session (transcript.ToolOutput.Key)
	Tokens  int    // o200k_base tokens of the output text
	Step    int    // step of the call that produced it; it is visible from Step+1
	// CandidateFrom is the first step at which the output is a candidate (old, large
	// and unprotected enough to be pruned by a score); 0 = never a candidate.
	CandidateFrom int
	EndStep       int   // last step of the session (the same for all its outputs)
	Asks          []Ask // scorer asks, in step order
	// RuleDeadAt is the first step at which the rules mark the output dead
	// (superseded or duplicate); 0 = never.
	RuleDeadAt int
	// Uses are the steps at which the output was used (counting uses of the
	// evidence package), ascending, each after Step.
	Uses []int
	// Held, nil or one per use, says that the stub the advisor gives the output
	// holds Uses[i] in its digest (its names are in the stub: evidence.Use.Digest
	// within the stub's digest budget), so that the use is no miss of a pruner
	// whose stubs are the advisor's (MissFrom); the anchors' placeholders hold
	// nothing (UsedFrom).
	Held []bool
	// Previewed, nil or one per use, says that the output's first and last 250
	// characters hold Uses[i] (evidence.Use.Preview): no miss of Gemini CLI's
	// masking, whose placeholder keeps them.
	Previewed []bool
	// Offset is the number of tokens before the output's message in the session as
	// sent with nothing pruned; outputs of a session are ordered by it.
	Offset int
	// StubTokens is the size of the stub that replaces it; a prune removes Tokens -
	// StubTokens (nothing when that is not positive).
	StubTokens int
}

// EligibleFrom returns the first step at which any pruner may prune the output under
// the advisor's protection: the earlier of CandidateFrom and RuleDeadAt, ignoring
// zeros; 0 when it may never be pruned.
func (o *Output) EligibleFrom() int {
	switch {
	case o.CandidateFrom == 0:
		return o.RuleDeadAt
	case o.RuleDeadAt == 0:
		return o.CandidateFrom
	}
	return min(o.CandidateFrom, o.RuleDeadAt)
}

// UsedFrom returns the first use at a step >= step, or 0 when there is none: the
// step at which an output pruned at step would have to be recalled.
func (o *Output) UsedFrom(step int) int {
	i := sort.SearchInts(o.Uses, step)
	if i < len(o.Uses) {
		return o.Uses[i]
	}
	return 0
}

// MissFrom returns the first use at a step >= step that the advisor's stub does not
// hold (Held), or 0 when there is none: the step at which an output pruned at step
// with the advisor's stub would have to be recalled.
func (o *Output) MissFrom(step int) int {
	for i := sort.SearchInts(o.Uses, step); i < len(o.Uses); i++ {
		if i >= len(o.Held) || !o.Held[i] {
			return o.Uses[i]
		}
	}
	return 0
}

// saves is what a stub of o removes, in tokens (>= 0).
func (o *Output) saves() int { return max(o.Tokens-o.StubTokens, 0) }

// Validate checks one record: Session and Key set; Tokens, Offset, StubTokens >= 0;
// 0 <= Step <= EndStep; CandidateFrom and RuleDeadAt 0 or in (Step, EndStep]; asks
// in non-decreasing step order within [CandidateFrom, EndStep] (so no asks when
// CandidateFrom is 0), OK asks with Keep finite in [0,1]; Uses strictly ascending
// within (Step, EndStep]. Errors wrap ErrInvalid and name session, key and field.
func (o *Output) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: output %q of session %q: %s: %s", ErrInvalid, o.Key, o.Session, field, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Session == "":
		return bad("Session", "empty")
	case o.Key == "":
		return bad("Key", "empty")
	case o.Tokens < 0:
		return bad("Tokens", "%d < 0", o.Tokens)
	case o.Offset < 0:
		return bad("Offset", "%d < 0", o.Offset)
	case o.StubTokens < 0:
		return bad("StubTokens", "%d < 0", o.StubTokens)
	case o.Step < 0:
		return bad("Step", "%d < 0", o.Step)
	case o.EndStep < o.Step:
		return bad("EndStep", "%d before the output's step %d", o.EndStep, o.Step)
	case o.CandidateFrom != 0 && (o.CandidateFrom <= o.Step || o.CandidateFrom > o.EndStep):
		return bad("CandidateFrom", "%d outside (%d, %d]", o.CandidateFrom, o.Step, o.EndStep)
	case o.RuleDeadAt != 0 && (o.RuleDeadAt <= o.Step || o.RuleDeadAt > o.EndStep):
		return bad("RuleDeadAt", "%d outside (%d, %d]", o.RuleDeadAt, o.Step, o.EndStep)
	}
	prev := 0
	for i, a := range o.Asks {
		f := fmt.Sprintf("Asks[%d]", i)
		switch {
		case o.CandidateFrom == 0:
			return bad(f, "ask at step %d but the output is never a candidate", a.Step)
		case a.Step < o.CandidateFrom || a.Step > o.EndStep:
			return bad(f+".Step", "%d outside [%d, %d]", a.Step, o.CandidateFrom, o.EndStep)
		case a.Step < prev:
			return bad(f+".Step", "%d before the previous ask's step %d", a.Step, prev)
		case a.OK && (math.IsNaN(a.Keep) || a.Keep < 0 || a.Keep > 1):
			return bad(f+".Keep", "%v outside [0,1]", a.Keep)
		}
		prev = a.Step
	}
	if o.Held != nil && len(o.Held) != len(o.Uses) {
		return bad("Held", "%d values for %d uses", len(o.Held), len(o.Uses))
	}
	if o.Previewed != nil && len(o.Previewed) != len(o.Uses) {
		return bad("Previewed", "%d values for %d uses", len(o.Previewed), len(o.Uses))
	}
	prev = o.Step
	for i, u := range o.Uses {
		if u <= prev || u > o.EndStep {
			return bad(fmt.Sprintf("Uses[%d]", i), "%d not in (%d, %d] or not ascending", u, prev, o.EndStep)
		}
		prev = u
	}
	return nil
}

// Calls is what the simulation needs from one session: the model calls it made,
// each with the context it sent with nothing pruned, when, and priced by whom.
// (A transcript.Session is the messages themselves; this is the series of calls
// a pruner is priced over.)
type Calls struct {
	Name string // session id, as in Output.Session
	// Context[s-1] is the size in tokens of the context sent at model call s with
	// nothing pruned, for s = 1..EndStep (len(Context) >= EndStep).
	Context []int
	// At[s-1] is the time of call s (zero when unknown); nil when the session has
	// no timestamps. A call more than Options.CacheTTL after the previous one finds
	// the cache cold.
	At []time.Time
	// Provider names the price model (Options.Prices) the session is priced under;
	// "" means Anthropic.
	Provider prices.Provider
	// Agent names the agent that wrote the session ("claude", "codex", "pi",
	// "gemini", "opencode"; "" when unknown), for Options.CompactionOf.
	Agent string
	// TurnStart[s-1] reports that a user prompt came before call s: the call
	// starts a turn (replay.StepFacts.Prompt). An agent that counts only between
	// turns (Compaction.Decides DecidesTurn) decides at these calls; nil, or no
	// call marked, when unknown: it then decides at every call, as DecidesUsage.
	TurnStart []bool
	// Recorded are the compactions the transcript records (the agent's own, or a
	// provider's), ascending by call: the context really was compacted before
	// those calls and every later step was taken on it, so every pruner, keep-all
	// included, goes through them (RecordedCompaction). nil: none.
	Recorded []RecordedCompaction
}

// RecordedCompaction is one compaction the transcript records
// (replay.StepFacts.CompactionDropped): before Call the agent replaced the messages
// before its kept tail, Dropped tokens of the unpruned context (as Context counts
// it), by a summary of SummaryTokens tokens (or a provider's compaction block or
// item did: the provider reads from it on). Every pruner prices it as the
// modelled compaction (the summarising call over the context it sends, the
// summary as output tokens, the next call's cache write), with its own context;
// it counts in Level.RecordedCompactions, not Level.Compactions: no pruner could
// have spared the agent a compaction whose later steps the transcript holds.
type RecordedCompaction struct {
	// Call is the model call (1 = the first) the compaction came before.
	Call int
	// Dropped is what it dropped, in tokens of the unpruned context as
	// Calls.Context counts it (the whole history): everything before its kept
	// tail; at least 1 and at most Context[Call-1] (ErrInvalid otherwise).
	Dropped int
	// SummaryTokens is the size of its summary (or compaction block), in tokens,
	// priced as the summarising call's output; >= 0.
	SummaryTokens int
}

// Options are the simulation settings. Build them with DefaultOptions and change
// fields; Validate reports bad values.
type Options struct {
	// Budget is the context size in tokens the agent should stay under; default
	// 100,000 (50% of a 200,000-token window, docs/DESIGN.md defaults).
	Budget int
	// HardLimit in tokens: past it pending prunes are applied at once; default
	// 180,000 (90% of the window).
	HardLimit int
	// LowWaterFraction and RewriteFraction (of Budget) are the planner's low-water
	// mark and least forced rewrite; defaults 0.5 and 0.05
	// (advisor.Config.LowWaterFraction).
	LowWaterFraction, RewriteFraction float64
	// HardLimitLowWaterFraction lowers the mark of a rewrite forced by the hard
	// limit to this fraction of the hard limit when that is under the low-water
	// mark (planner.Input.HardLowWater), as the live advisor's
	// advisor.Config.HardLimitLowWaterFraction; 0: the low-water mark alone.
	// Default 0.5.
	HardLimitLowWaterFraction float64
	// PayFactor is the planner's: a rewrite under budget with a warm cache must save
	// at least PayFactor times its cost; default 2.
	PayFactor float64
	// PriceForced makes rewrites forced by the budget pay for themselves too (the
	// planner's Input.PriceForced); default true.
	PriceForced bool
	// LastResort lets a rewrite forced by the hard limit also stub outputs that
	// are still protected (CandidateFrom not reached) and that the agent's
	// compaction would drop, last, when nothing else reaches the low-water mark
	// (planner.Input.Protected), as the live advisor's advisor.Config.LastResort;
	// default true.
	LastResort bool
	// GrowthSteps is how many recent steps the hard limit's margin looks back
	// over (the largest one-step growth of the context in them; 0: the whole
	// session so far), as the live advisor's advisor.Config.GrowthSteps; default
	// 0.
	GrowthSteps int
	// Estimator estimates the remaining steps for the planner; default Factor 0.15,
	// Min 3. The defaults are advisor.DefaultConfig's (tuning's
	// TestCalibrateDefaultsAreTheAdvisors holds them together).
	Estimator planner.Estimator
	// OverBudgetFactor takes Estimator.Factor's place while the context is over
	// the budget, as the live advisor's advisor.Config.OverBudgetRemainingFactor;
	// 0 keeps Estimator.Factor. Default 0.2.
	OverBudgetFactor float64
	// OverBudgetCutoff lets a scorer's rewrite forced by the budget also take
	// candidates not pending whose last score is under it, lowest first, down to
	// the low-water mark (planner.Input.Extra), as the live advisor's
	// advisor.Config.OverBudgetCutoff; 0: never. Default 0.1, as the advisor's.
	OverBudgetCutoff float64
	// CacheTTL is how long a cache stays warm between calls; default 5 minutes.
	CacheTTL time.Duration
	// Prices holds the price model of each provider; nil entries take
	// prices.Default.
	Prices prices.Table
	// ProtectedSteps is K, the live advisor's advisor.Config.ProtectedSteps: a copy
	// a recall brought back (or a compaction miss's fetch) is not a candidate in the
	// K steps after it; default 3.
	ProtectedSteps int
	// RecallWindows is the back-off schedule whose Gap(n) is how many steps the
	// n-th recall of an original protects its copy: the live advisor's recall
	// windows, advisor.Config.Schedule whatever the scorer's ask schedule (its
	// ScorerSchedules entry). The zero value is backoff.Default() (3, 6, 12, 24).
	RecallWindows backoff.Schedule
	// RecallOverheadTokens is what one recall round trip writes beyond the original
	// itself (the model's recall call, the result's framing); default 100, an
	// estimate: a tool call and its result envelope run to a few dozen tokens.
	RecallOverheadTokens int
	// Bins is the number of equal-width score bins of the reliability table;
	// default 10.
	Bins int
	// Seed seeds the random baseline; default 1.
	Seed uint64
	// PerSession keeps every Result's per-session rows (Result.Sessions).
	PerSession bool
	// SizeExponent scales a scorer's cutoff with each output's size: an output of
	// n tokens is pruned under planner.CutoffAt(cutoff, n, SizeExponent), as the
	// live advisor prunes under its config's size_exponent. Default 0 (every
	// score against the cutoff itself); calibrate sets the replay's.
	SizeExponent float64
	// SizeCapTokens is the size, in tokens, past which the cutoff stops growing
	// (planner.CutoffAt's capTokens, advisor.Config.SizeCapTokens); 0: no cap.
	// Default 0; calibrate sets the replay's.
	SizeCapTokens int
	// Window is the modelled context window in tokens (`calibrate --window`);
	// default 200,000 (advisor.DefaultConfig's). It only matters through
	// CompactionOf.
	Window int
	// CompactionOf, when set, gives how a session of agent (Calls.Agent) compacts
	// in a window of Window tokens; nil: no session compacts (nothing modelled).
	CompactionOf func(agent string, window int) Compaction `json:"-"`
	// CompactionCount names, for the report only, what CompactionOf makes the
	// agents count (`calibrate --compaction-decides`): "" or "agent" for each
	// agent's own count, else one count for every agent (Compaction.Decides's
	// names, "sent" for DecidesSent).
	CompactionCount string `json:"compaction_count,omitempty"`
	// OnRewrite, when set, is told of every rewrite the planner makes at the applied
	// level of a decision pruner: the session, the call, and the planner's decision
	// (what `calibrate --trace` prints to explain a session's cost).
	OnRewrite func(session string, step int, d planner.Rewrite) `json:"-"`
}

// estimatorAt returns the remaining-steps estimator: Estimator, with
// OverBudgetFactor in place of its Factor over the budget (when set).
func (o Options) estimatorAt(overBudget bool) planner.Estimator {
	e := o.Estimator
	if overBudget && o.OverBudgetFactor > 0 {
		e.Factor = o.OverBudgetFactor
	}
	return e
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{
		Budget: 100_000, HardLimit: 180_000, LowWaterFraction: 0.5, HardLimitLowWaterFraction: 0.5, RewriteFraction: 0.05, PayFactor: 2, PriceForced: true, LastResort: true,
		Estimator: planner.Estimator{Factor: 0.15, Min: 3}, OverBudgetFactor: 0.2, OverBudgetCutoff: 0.1, CacheTTL: 5 * time.Minute,
		Prices: prices.DefaultTable(), RecallOverheadTokens: 100, Bins: 10, Seed: 1, Window: 200_000, ProtectedSteps: 3,
	}
}

// Validate reports the first bad option (wrapping ErrInvalid).
func (o Options) Validate() error {
	bad := func(field string, v any) error {
		return fmt.Errorf("%w: option %s = %v", ErrInvalid, field, v)
	}
	frac := func(f float64) bool { return !math.IsNaN(f) && f >= 0 && f <= 1 }
	switch {
	case o.Budget <= 0:
		return bad("Budget", o.Budget)
	case math.IsNaN(o.SizeExponent) || o.SizeExponent < 0 || o.SizeExponent > 2:
		return bad("SizeExponent", o.SizeExponent)
	case o.SizeCapTokens < 0:
		return bad("SizeCapTokens", o.SizeCapTokens)
	case o.HardLimit < o.Budget:
		return bad("HardLimit", o.HardLimit)
	case !frac(o.LowWaterFraction) || o.LowWaterFraction == 0:
		return bad("LowWaterFraction", o.LowWaterFraction)
	case !frac(o.HardLimitLowWaterFraction):
		return bad("HardLimitLowWaterFraction", o.HardLimitLowWaterFraction)
	case !frac(o.RewriteFraction):
		return bad("RewriteFraction", o.RewriteFraction)
	case math.IsNaN(o.PayFactor) || math.IsInf(o.PayFactor, 0) || o.PayFactor < 1:
		return bad("PayFactor", o.PayFactor)
	case math.IsNaN(o.Estimator.Factor) || o.Estimator.Factor <= 0 || math.IsInf(o.Estimator.Factor, 0):
		return bad("Estimator.Factor", o.Estimator.Factor)
	case math.IsNaN(o.Estimator.Min) || o.Estimator.Min < 1 || math.IsInf(o.Estimator.Min, 0):
		return bad("Estimator.Min", o.Estimator.Min)
	case math.IsNaN(o.OverBudgetFactor) || o.OverBudgetFactor < 0 || math.IsInf(o.OverBudgetFactor, 0):
		return bad("OverBudgetFactor", o.OverBudgetFactor)
	case !frac(o.OverBudgetCutoff):
		return bad("OverBudgetCutoff", o.OverBudgetCutoff)
	case o.CacheTTL <= 0:
		return bad("CacheTTL", o.CacheTTL)
	case o.RecallOverheadTokens < 0:
		return bad("RecallOverheadTokens", o.RecallOverheadTokens)
	case o.GrowthSteps < 0:
		return bad("GrowthSteps", o.GrowthSteps)
	case o.ProtectedSteps < 0:
		return bad("ProtectedSteps", o.ProtectedSteps)
	case o.Bins < 1 || o.Bins > 1000:
		return bad("Bins", o.Bins)
	case o.CompactionOf != nil && o.Window <= 0:
		return bad("Window", o.Window)
	}
	if err := o.Prices.Validate(); err != nil {
		return fmt.Errorf("%w: option Prices: %v", ErrInvalid, err)
	}
	return nil
}

// Level is what a pruner costs and does at one level (decision or applied), over a
// set of sessions or for one. JSON names are those of `calibrate --json`.
type Level struct {
	// NetUSD is keep-all's price minus the pruner's, recalls included, in dollars:
	// positive means cheaper than doing nothing.
	NetUSD float64 `json:"net_usd"`
	// PaidUSD is the pruner's input price, recalls included, in dollars.
	PaidUSD float64 `json:"paid_usd"`
	// StepsOverBudget counts the calls whose context, as sent, exceeded the budget.
	StepsOverBudget int `json:"steps_over_budget"`
	// PeakContext is the largest context sent, in tokens.
	PeakContext int `json:"peak_context"`
	// Rewrites counts the calls at which the pruner changed bytes already sent.
	Rewrites int `json:"rewrites"`
	// SessionsCostlier counts sessions where the pruner paid more than keep-all
	// (NetUSD < 0); 0 in a per-session row.
	SessionsCostlier int `json:"sessions_costlier"`
	// Misses counts pruned outputs used again (stub misses, each repaired by a
	// recall round trip).
	Misses int `json:"misses"`
	// Compactions counts the agent's compactions (Compaction): calls before which
	// the context passed the agent's compaction point.
	Compactions int `json:"compactions"`
	// RecordedCompactions counts the compactions the transcripts record
	// (Calls.Recorded), the same for every pruner, priced like Compactions but
	// not counted among them.
	RecordedCompactions int `json:"recorded_compactions"`
	// CompactionMisses counts outputs a compaction dropped and the agent used
	// later: lost, not recallable; each priced as the agent fetching the output
	// again (a round trip writing it, like a recall).
	CompactionMisses int `json:"compaction_misses"`
	// TokenSteps is the context kept out of the calls by the pruner's stubs: the
	// sum over calls of the tokens removed, net of what repairs put back; what
	// compactions remove is not counted.
	TokenSteps int64 `json:"token_steps"`
}

// SessionResult is one session's figures under one pruner.
type SessionResult struct {
	Session  string `json:"session"`
	Decision Level  `json:"decision"`
	Applied  Level  `json:"applied"`
}

// Result is what one pruner (a scorer at a cutoff, a baseline or an anchor regime)
// does over the sessions. The flat fields are the decision-level prune figures of the
// sweep: an output is pruned at its decision step p (1 <= p <= EndStep); it misses
// when used at a step >= p, and saves Tokens x (r - p) token-steps if it misses at r,
// else Tokens x (EndStep + 1 - p). These are what the miss-rate target and the
// oracle bound refer to. Decision and Applied price the pruner at both levels.
type Result struct {
	Name string `json:"name"` // "scorer:<name>", "keep-all", "rules", "recency-10", "random", "oracle", an anchor
	// Cutoff is the scorer cutoff for scorer results and for the random baseline
	// matched to one; -1 otherwise.
	Cutoff  float64 `json:"cutoff"`
	Outputs int     `json:"outputs"` // outputs considered
	Pruned  int     `json:"pruned"`  // outputs with a decision step in [1, EndStep]
	Misses  int     `json:"misses"`  // pruned outputs used at or after their decision step
	// PruneRate = Pruned / Outputs; MissRate = Misses / Pruned (0 when nothing is
	// pruned).
	PruneRate  float64 `json:"prune_rate"`
	MissRate   float64 `json:"miss_rate"`
	TokenSteps int64   `json:"token_steps"` // decision-level token-steps saved (see above)
	// TotalTokenSteps = sum of Tokens x (EndStep - Step): every output's presence
	// in the context from its first visible call to the end.
	TotalTokenSteps int64 `json:"total_token_steps"`
	// StubTokenSteps is what the stubs cost in the same currency: each pruned
	// output's stub tokens (the advisor's with its digest, an anchor's placeholder
	// or preview) times the calls it stands in for, up to the miss when it misses;
	// TokenSteps - StubTokenSteps is what the pruner keeps out net of its stubs.
	StubTokenSteps int64           `json:"stub_token_steps"`
	Decision       Level           `json:"decision"`
	Applied        Level           `json:"applied"`
	Sessions       []SessionResult `json:"sessions,omitempty"`
}

// SavedShare returns TokenSteps / TotalTokenSteps (0 when there is nothing to save).
func (r Result) SavedShare() float64 {
	if r.TotalTokenSteps == 0 {
		return 0
	}
	return float64(r.TokenSteps) / float64(r.TotalTokenSteps)
}

// PruneAt is a pruner's choice for one output: the step at which it prunes it,
// with the keep-probability that decided it (the planner applies the lowest first
// when the budget forces a rewrite), or as a rule (rule-dead outputs go first).
// (An advisor.Decision is the advisor's state of an output at a step, a
// planner.Decision a rewrite; this is one output's prune step under a pruner.)
type PruneAt struct {
	Step int     // the step at which the output is pruned; 0 = never
	Keep float64 // the keep-probability that decided it (0 without a score)
	Rule bool    // a rule (superseded, duplicate) decided it, not a score
}

// Evaluator holds validated outputs and sessions and evaluates pruners over them.
// It is immutable after NewEvaluator and safe for concurrent use.
type Evaluator struct {
	opts     Options
	outs     []Output
	sessions []*sessionData // in order of first appearance in outs
}

type sessionData struct {
	name    string
	end     int
	context []int
	cold    []bool          // cold[s-1]: call s found the cache cold
	gap     []time.Duration // gap[s-1]: time since call s-1 (0 when unknown)
	timed   bool            // some call has a time: without any, priced warm throughout
	price   prices.Model
	outs    []int // indexes into Evaluator.outs, in (Offset, input) order
	keepAll Level // keep-all's figures (its PaidUSD is the reference price)
	// compaction is how the session's agent compacts (Options.CompactionOf; zero:
	// never); growth[s-1] is the largest growth of the unpruned context in one
	// call over the Options.GrowthSteps calls up to call s, in tokens (the hard
	// limit's margin).
	compaction Compaction
	growth     []int
	// turn[s-1]: call s starts a turn (Calls.TurnStart); nil when unknown.
	turn []bool
	// recorded[s] is the compaction the transcript records before call s
	// (Calls.Recorded); nil when none.
	recorded map[int]RecordedCompaction
}

// NewEvaluator validates opts, every output (Output.Validate, unique (Session,
// Key), one EndStep per session) and the sessions (each output's session present,
// Context covering its EndStep with sizes >= 0, a known provider), and returns an
// Evaluator. The outputs are copied. Errors wrap ErrInvalid or ErrNoSession.
func NewEvaluator(outputs []Output, sessions []Calls, opts Options) (*Evaluator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	byName, err := callsByName(sessions)
	if err != nil {
		return nil, err
	}
	e := &Evaluator{opts: opts, outs: make([]Output, len(outputs))}
	if err := e.addOutputs(outputs, byName); err != nil {
		return nil, err
	}
	for _, sd := range e.sessions {
		sort.SliceStable(sd.outs, func(a, b int) bool { return e.outs[sd.outs[a]].Offset < e.outs[sd.outs[b]].Offset })
		sd.keepAll = e.simulate(sd, nil)
	}
	return e, nil
}

// callsByName indexes the sessions by name, checking each is named once and its
// context sizes are >= 0 (ErrInvalid).
func callsByName(sessions []Calls) (map[string]*Calls, error) {
	byName := map[string]*Calls{}
	for i := range sessions {
		s := &sessions[i]
		if s.Name == "" {
			return nil, fmt.Errorf("%w: sessions[%d]: empty Name", ErrInvalid, i)
		}
		if _, dup := byName[s.Name]; dup {
			return nil, fmt.Errorf("%w: sessions[%d]: session %q given twice", ErrInvalid, i, s.Name)
		}
		for j, c := range s.Context {
			if c < 0 {
				return nil, fmt.Errorf("%w: session %q: Context[%d] = %d < 0", ErrInvalid, s.Name, j, c)
			}
		}
		byName[s.Name] = s
	}
	return byName, nil
}

// addOutputs copies and validates every output into e.outs, each (Session, Key)
// once, and gathers them by session, preparing each session at its first output
// (newSessionData) and checking that all its outputs share one EndStep.
func (e *Evaluator) addOutputs(outputs []Output, byName map[string]*Calls) error {
	data := map[string]*sessionData{}
	keys := map[[2]string]bool{}
	for i := range outputs {
		o := outputs[i]
		o.Asks = append([]Ask(nil), o.Asks...)
		o.Uses = append([]int(nil), o.Uses...)
		o.Held = append([]bool(nil), o.Held...)
		o.Previewed = append([]bool(nil), o.Previewed...)
		if err := o.Validate(); err != nil {
			return fmt.Errorf("outputs[%d]: %w", i, err)
		}
		k := [2]string{o.Session, o.Key}
		if keys[k] {
			return fmt.Errorf("%w: outputs[%d]: output %q of session %q given twice", ErrInvalid, i, o.Key, o.Session)
		}
		keys[k] = true
		sd := data[o.Session]
		if sd == nil {
			s, ok := byName[o.Session]
			if !ok {
				return fmt.Errorf("outputs[%d]: %w: %q", i, ErrNoSession, o.Session)
			}
			var err error
			if sd, err = e.newSessionData(s, o.EndStep); err != nil {
				return err
			}
			data[o.Session] = sd
			e.sessions = append(e.sessions, sd)
		}
		if o.EndStep != sd.end {
			return fmt.Errorf("%w: outputs[%d]: output %q of session %q: EndStep %d, other outputs of the session say %d", ErrInvalid, i, o.Key, o.Session, o.EndStep, sd.end)
		}
		sd.outs = append(sd.outs, i)
		e.outs[i] = o
	}
	return nil
}

// newSessionData prepares one session: its context sizes, cold calls and prices.
func (e *Evaluator) newSessionData(s *Calls, end int) (*sessionData, error) {
	if len(s.Context) < end {
		return nil, fmt.Errorf("%w: session %q: Context has %d steps, EndStep is %d", ErrInvalid, s.Name, len(s.Context), end)
	}
	p := s.Provider
	if p == "" {
		p = prices.Anthropic
	}
	price, err := e.opts.Prices.For(p)
	if err != nil {
		return nil, fmt.Errorf("%w: session %q: %v", ErrInvalid, s.Name, err)
	}
	sd := &sessionData{name: s.Name, end: end, context: s.Context, price: price,
		cold: make([]bool, end), gap: make([]time.Duration, end), growth: make([]int, end)}
	if f := e.opts.CompactionOf; f != nil {
		sd.compaction = f(s.Agent, e.opts.Window)
		if err := sd.compaction.Validate(); err != nil {
			return nil, fmt.Errorf("session %q (agent %q): %w", s.Name, s.Agent, err)
		}
	}
	sd.growth = growths(s.Context[:end], e.opts.GrowthSteps)
	if slices.Contains(s.TurnStart, true) {
		sd.turn = make([]bool, end)
		copy(sd.turn, s.TurnStart)
	}
	for _, rc := range s.Recorded {
		if rc.Call > end {
			continue // after the session's last step: nothing to price
		}
		if rc.Call < 1 || rc.Dropped <= 0 || rc.Dropped > s.Context[rc.Call-1] || rc.SummaryTokens < 0 {
			return nil, fmt.Errorf("%w: session %q: recorded compaction before call %d (dropped %d tokens of %d, summary %d)", ErrInvalid, s.Name, rc.Call, rc.Dropped, s.Context[min(max(rc.Call, 1), end)-1], rc.SummaryTokens)
		}
		if sd.recorded == nil {
			sd.recorded = map[int]RecordedCompaction{}
		}
		sd.recorded[rc.Call] = rc
	}
	var prev time.Time
	for i := 0; i < end && i < len(s.At); i++ {
		t := s.At[i]
		if !t.IsZero() && !prev.IsZero() && !t.Before(prev) {
			sd.gap[i] = t.Sub(prev)
			sd.cold[i] = sd.gap[i] > e.opts.CacheTTL
		}
		if !t.IsZero() {
			prev, sd.timed = t, true
		}
	}
	return sd, nil
}

// Options returns the evaluator's options.
func (e *Evaluator) Options() Options { return e.opts }

// Timing counts the sessions with no call time at all (their transcripts carry no
// timestamps, as mini-swe-agent's and OpenHands' do not: every call is priced on a
// warm cache) and the calls that found the cache cold (a pause longer than
// Options.CacheTTL since the previous call: a rewrite there is free).
func (e *Evaluator) Timing() (untimed, coldCalls int) {
	for _, sd := range e.sessions {
		if !sd.timed {
			untimed++
		}
		for _, c := range sd.cold {
			if c {
				coldCalls++
			}
		}
	}
	return untimed, coldCalls
}

// Outputs returns a copy of the evaluator's outputs, in input order.
func (e *Evaluator) Outputs() []Output { return append([]Output(nil), e.outs...) }

// KeepAllUSD returns what keep-all (doing nothing) pays for input over every
// session, in dollars.
func (e *Evaluator) KeepAllUSD() float64 {
	total := 0.0
	for _, sd := range e.sessions {
		total += sd.keepAll.PaidUSD
	}
	return total
}

// check fails (ErrInvalid) when len(ds) != number of outputs or a decision step lies
// before the output's EligibleFrom: every pruner works under the same protection.
func (e *Evaluator) check(name string, ds []PruneAt) error {
	if len(ds) != len(e.outs) {
		return fmt.Errorf("%w: evaluate %s: %d decisions for %d outputs", ErrInvalid, name, len(ds), len(e.outs))
	}
	for i, d := range ds {
		o := &e.outs[i]
		if d.Step == 0 || d.Step > o.EndStep {
			continue
		}
		if el := o.EligibleFrom(); el == 0 || d.Step < el || d.Step < 0 {
			return fmt.Errorf("%w: evaluate %s: output %q of session %q pruned at step %d, eligible from %d (0 = never)", ErrInvalid, name, o.Key, o.Session, d.Step, el)
		}
	}
	return nil
}

// Evaluate computes the Result of the pruner that decides to prune outputs[i] at
// ds[i] (Step 0 = never; a step past the output's EndStep also means never): the
// decision-level prune figures, and both levels' prices (the applied level under
// the planner). A copy a miss brings back is decided as its original was, at the
// same age (decisions.decided). Errors: see check.
func (e *Evaluator) Evaluate(name string, cutoff float64, ds []PruneAt) (Result, error) {
	if err := e.check(name, ds); err != nil {
		return Result{}, err
	}
	return e.evaluate(name, cutoff, ds), nil
}

// evaluate is Evaluate without the checks.
func (e *Evaluator) evaluate(name string, cutoff float64, ds []PruneAt) Result {
	r := e.pruneFigures(name, cutoff, ds, holdDigest)
	e.price(&r, func(sd *sessionData) policy { return &immediateP{decide(e, sd, ds)} },
		func(sd *sessionData) policy { return e.regime(sd, ds) })
	return r
}

// pruneFigures computes the flat, decision-level prune figures of Result; digest
// says the pruner's stubs are the advisor's, whose digests hold some uses
// (Output.MissFrom), Gemini CLI's previews hold those their head and tail name,
// placeholders none (Output.UsedFrom).
func (e *Evaluator) pruneFigures(name string, cutoff float64, ds []PruneAt, h hold) Result {
	r := Result{Name: name, Cutoff: cutoff, Outputs: len(e.outs)}
	for _, t := range e.tallies(ds, h) {
		r.TotalTokenSteps += t.totalSteps
		r.Pruned += t.pruned
		r.Misses += t.misses
		r.TokenSteps += t.tokenSteps
		r.StubTokenSteps += t.stubSteps
	}
	if r.Outputs > 0 {
		r.PruneRate = float64(r.Pruned) / float64(r.Outputs)
	}
	if r.Pruned > 0 {
		r.MissRate = float64(r.Misses) / float64(r.Pruned)
	}
	return r
}

// tally is one session's decision-level prune figures (pruneFigures sums them):
// outputs pruned and missed, token-steps kept out and paid in stubs, and the
// token-steps of every output.
type tally struct {
	pruned, misses                    int
	tokenSteps, stubSteps, totalSteps int64
}

// tallies returns each session's decision-level prune figures under ds with stubs
// holding h, in e.sessions' order: an output pruned at step p (1 <= p <= EndStep)
// keeps Tokens x (stop - p) token-steps out, stop being its first use its stub
// does not hold (a miss) or EndStep + 1, and pays its stub's tokens over the same
// steps.
func (e *Evaluator) tallies(ds []PruneAt, h hold) []tally {
	out := make([]tally, len(e.sessions))
	for si, sd := range e.sessions {
		t := &out[si]
		for _, i := range sd.outs {
			o := &e.outs[i]
			t.totalSteps += int64(o.Tokens) * int64(o.EndStep-o.Step)
			p := ds[i].Step
			if p < 1 || p > o.EndStep {
				continue
			}
			t.pruned++
			stop := o.EndStep + 1
			if u := o.missFrom(p, h); u != 0 {
				t.misses++
				stop = u
			}
			t.tokenSteps += int64(o.Tokens) * int64(stop-p)
			t.stubSteps += int64(min(h.stubTokens(o), o.Tokens)) * int64(stop-p)
		}
	}
	return out
}

// price simulates every session under the decision-level and the applied-level
// policy and adds both levels (and the per-session rows when asked) to r.
func (e *Evaluator) price(r *Result, decision, applied func(*sessionData) policy) {
	for _, sd := range e.sessions {
		row := SessionResult{Session: sd.name, Decision: e.simulate(sd, decision(sd)), Applied: e.simulate(sd, applied(sd))}
		r.Decision.add(row.Decision)
		r.Applied.add(row.Applied)
		if e.opts.PerSession {
			r.Sessions = append(r.Sessions, row)
		}
	}
}

// add sums one session's level s into a total; the session counts as costlier
// when its net dollars are negative.
func (l *Level) add(s Level) {
	s.SessionsCostlier = 0
	if s.NetUSD < 0 {
		s.SessionsCostlier = 1
	}
	l.Merge(s)
}

// Merge adds o, a level already summed over other sessions, into l: every count,
// token-step and dollar figure summed (SessionsCostlier too), PeakContext the
// larger of the two.
func (l *Level) Merge(o Level) {
	l.NetUSD += o.NetUSD
	l.PaidUSD += o.PaidUSD
	l.StepsOverBudget += o.StepsOverBudget
	l.PeakContext = max(l.PeakContext, o.PeakContext)
	l.Rewrites += o.Rewrites
	l.SessionsCostlier += o.SessionsCostlier
	l.Misses += o.Misses
	l.Compactions += o.Compactions
	l.RecordedCompactions += o.RecordedCompactions
	l.CompactionMisses += o.CompactionMisses
	l.TokenSteps += o.TokenSteps
}

// stubTokens is the size in tokens of the stub that holds h for o: its own
// StubTokens for the advisor's, an anchor's placeholder or Gemini CLI's preview.
func (h hold) stubTokens(o *Output) int {
	switch h {
	case holdNothing:
		return AnchorPlaceholderTokens
	case holdPreview:
		return GeminiPreviewTokens
	}
	return o.StubTokens
}

// missFrom is the first use at or after step that a stub holding h does not hold:
// MissFrom for the advisor's digests, the first use not Previewed for Gemini CLI's
// preview, UsedFrom for a placeholder.
func (o *Output) missFrom(step int, h hold) int {
	switch h {
	case holdDigest:
		return o.MissFrom(step)
	case holdPreview:
		for i := sort.SearchInts(o.Uses, step); i < len(o.Uses); i++ {
			if i >= len(o.Previewed) || !o.Previewed[i] {
				return o.Uses[i]
			}
		}
		return 0
	}
	return o.UsedFrom(step)
}

// growths returns, for each call s (index s-1), the largest growth of the unpruned
// context from one call to the next over the last n calls up to s (0: over every
// call so far; 0 for the first call).
func growths(context []int, n int) []int {
	out := make([]int, len(context))
	for i := 1; i < len(context); i++ {
		if n == 0 {
			out[i] = max(out[i-1], context[i]-context[i-1])
			continue
		}
		for j := max(1, i-n+1); j <= i; j++ {
			out[i] = max(out[i], context[j]-context[j-1])
		}
	}
	return out
}
