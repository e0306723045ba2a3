// Package calibrate turns replay records into the numbers DESIGN.md's "Calibration,
// baselines, back-off" asks for: a reliability table, Brier score and AUC per scorer;
// for every cutoff the prune rate, miss rate, token-steps saved, cache rewrites and
// net cost under a stated price model; the recommended cutoff; and the same figures
// for the baselines (keep-all, rules only, recency masking, random at equal prune
// rate, the oracle) over the same outputs. Every function here is pure: the caller
// (the calibrate and backoff commands) reads the replay store and builds the records.
//
// # Steps
//
// Step numbers are the advisor's: the plan for step T is made before model call T and
// sees the messages written before it. An output produced by the call of step s is
// visible from step s+1. An ask at step T and a prune at step T both happen before
// call T, so a prune at step T removes the output from calls T, T+1, …, and it
// *misses* when the output is used at a step u >= T (the assistant message of call T
// was written without it). With replay.Tracker that is UsedAfter(key, T-1).
package calibrate

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Sentinel errors, wrapped with the offending session, key and field.
var (
	// ErrInvalid means a record, session or option breaks a documented constraint.
	ErrInvalid = errors.New("calibrate: invalid input")
	// ErrNoSession means an output names a session with no Session record (its
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
	// (superseded or duplicate); 0 = never. It is taken as given: the replay
	// already applied the rules' own conditions.
	RuleDeadAt int
	// Uses are the steps at which the output was used (counting uses from
	// replay.Tracker.UseSteps), ascending, each after Step.
	Uses []int
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

// Validate checks one record: Session and Key set; Tokens >= 0; 0 <= Step <=
// EndStep; CandidateFrom and RuleDeadAt 0 or in (Step, EndStep]; asks in
// non-decreasing step order within [CandidateFrom, EndStep] (so no asks when
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
	prev = o.Step
	for i, u := range o.Uses {
		if u <= prev || u > o.EndStep {
			return bad(fmt.Sprintf("Uses[%d]", i), "%d not in (%d, %d] or not ascending", u, prev, o.EndStep)
		}
		prev = u
	}
	return nil
}

// Session holds what the rewrite simulation needs from one session.
type Session struct {
	Name string // session id, as in Output.Session
	// Context[s-1] is the size in tokens of the context sent at model call s with
	// nothing pruned, for s = 1..EndStep (len(Context) >= EndStep).
	Context []int
}

// Prices is the price model, in US dollars per million tokens, after Anthropic's
// published prompt-caching prices (cache writes at 1.25x the input price, cache
// reads at 0.1x); the defaults are Claude Sonnet's input price.
type Prices struct {
	InputPerMTok       float64 // uncached input; default 3.00
	CachedInputPerMTok float64 // cache read; default 0.30
	CacheWriteFactor   float64 // cache write price = factor x input; default 1.25
	// RecallOverheadTokens is the fixed cost of one recall round trip beyond the
	// output itself (the recall call, its framing, the extra turn's new tokens),
	// priced at the input price; default 1,000, a round stand-in, not measured.
	RecallOverheadTokens int
}

// DefaultPrices returns the defaults documented on Prices.
func DefaultPrices() Prices {
	return Prices{InputPerMTok: 3.00, CachedInputPerMTok: 0.30, CacheWriteFactor: 1.25, RecallOverheadTokens: 1000}
}

// Options are the simulation settings. Build them with DefaultOptions and change
// fields; Validate reports bad values.
type Options struct {
	// Budget is the context size in tokens the agent should stay under; default
	// 100,000 (50% of a 200,000-token window, DESIGN.md defaults).
	Budget int
	// HardLimit in tokens: past it pending prunes are applied at once; default
	// 180,000 (90% of the window).
	HardLimit int
	// RewriteFraction: pending prunes are applied together once they add up to at
	// least this fraction of Budget; default 0.05.
	RewriteFraction float64
	Prices          Prices
	// Bins is the number of equal-width score bins of the reliability table;
	// default 10.
	Bins int
	// Seed seeds the random baseline; default 1.
	Seed uint64
}

// DefaultOptions returns the DESIGN.md defaults described on Options.
func DefaultOptions() Options {
	return Options{Budget: 100_000, HardLimit: 180_000, RewriteFraction: 0.05, Prices: DefaultPrices(), Bins: 10, Seed: 1}
}

// Validate reports the first bad option (wrapping ErrInvalid): Budget and HardLimit
// must be positive, RewriteFraction in [0,1], prices finite and >= 0 with the
// cached price at most the cache-write price, Bins in [1,1000].
func (o Options) Validate() error {
	bad := func(field string, v any) error {
		return fmt.Errorf("%w: option %s = %v", ErrInvalid, field, v)
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0 }
	p := o.Prices
	switch {
	case o.Budget <= 0:
		return bad("Budget", o.Budget)
	case o.HardLimit <= 0:
		return bad("HardLimit", o.HardLimit)
	case !finite(o.RewriteFraction) || o.RewriteFraction > 1:
		return bad("RewriteFraction", o.RewriteFraction)
	case !finite(p.InputPerMTok):
		return bad("Prices.InputPerMTok", p.InputPerMTok)
	case !finite(p.CachedInputPerMTok):
		return bad("Prices.CachedInputPerMTok", p.CachedInputPerMTok)
	case !finite(p.CacheWriteFactor) || p.CacheWriteFactor*p.InputPerMTok < p.CachedInputPerMTok:
		return bad("Prices.CacheWriteFactor", p.CacheWriteFactor)
	case p.RecallOverheadTokens < 0:
		return bad("Prices.RecallOverheadTokens", p.RecallOverheadTokens)
	case o.Bins < 1 || o.Bins > 1000:
		return bad("Bins", o.Bins)
	}
	return nil
}

// RewriteThreshold is the pending-prune size in tokens from which a rewrite is
// made: ceil(RewriteFraction x Budget).
func (o Options) RewriteThreshold() int64 {
	return int64(math.Ceil(o.RewriteFraction * float64(o.Budget)))
}

// Result is what one pruner (a scorer at a cutoff, or a baseline) does over the
// outputs. Two levels are reported:
//
// Decision level (the pruner's choices, no batching): an output is pruned at its
// decision step p when 1 <= p <= EndStep. It misses when used at a step >= p; it is
// then assumed recalled at its first such use r. It saves Tokens x (r - p) token-
// steps if it misses, else Tokens x (EndStep + 1 - p): one per model call it is
// absent from (calls p..EndStep; DESIGN.md "tokens removed times the steps they
// stay removed"). These figures are what the miss-rate target and the oracle bound
// refer to.
//
// Applied level (the advisor's rewrite batching): pending prunes of a session are
// applied together, at the first step at which they add up to at least
// RewriteThreshold tokens or the context (Session.Context minus what is already
// pruned) exceeds HardLimit. The applied step replaces p above. Prunes still pending
// at the end are never applied. Cold-cache rewrites (free after the cache TTL) are
// not simulated: replay has no wall clock, so rewrite costs are an upper bound.
//
// Costs, in US dollars, from the applied level (per = per token, from Prices):
//
//	SavedUSD   = AppliedTokenSteps x cached            (a token not re-sent would have been a cache read)
//	RecallUSD  = sum over applied misses of Tokens x cached + RecallOverheadTokens x input
//	RewriteUSD = RewriteTokens x (CacheWriteFactor x input - cached)
//	NetUSD     = SavedUSD - RecallUSD - RewriteUSD
//
// RewriteTokens sums, over rewrites, the context at the rewrite step after the
// rewrite: the cache must be written again from the first changed message on, and
// the whole context bounds that suffix from above; without the rewrite those tokens
// would have been cache reads, hence write minus cached.
type Result struct {
	Name string `json:"name"` // "scorer:<name>", "keep-all", "rules", "recency-10", "random", "oracle"
	// Cutoff is the scorer cutoff for scorer results and for the random baseline
	// matched to one; -1 otherwise.
	Cutoff  float64 `json:"cutoff"`
	Outputs int     `json:"outputs"` // outputs considered
	Pruned  int     `json:"pruned"`  // outputs with a decision step in [1, EndStep]
	Misses  int     `json:"misses"`  // pruned outputs used at or after their prune step
	// PruneRate = Pruned / Outputs; 0 with no outputs.
	PruneRate float64 `json:"prune_rate"`
	// MissRate = Misses / Pruned: the share of pruned outputs the agent needed
	// again (denominator: pruned outputs, not all outputs); 0 when nothing is pruned.
	MissRate   float64 `json:"miss_rate"`
	TokenSteps int64   `json:"token_steps"` // decision-level token-steps saved
	// TotalTokenSteps = sum of Tokens x (EndStep - Step): every output's presence
	// in the context from its first visible call to the end; TokenSteps divided by
	// it is the share of tool-output token-steps saved.
	TotalTokenSteps   int64   `json:"total_token_steps"`
	Rewrites          int     `json:"rewrites"`            // rewrites made (applied level)
	Applied           int     `json:"applied"`             // outputs pruned by a rewrite
	AppliedMisses     int     `json:"applied_misses"`      // applied outputs used at or after their applied step
	AppliedTokenSteps int64   `json:"applied_token_steps"` // token-steps saved at the applied level
	RewriteTokens     int64   `json:"rewrite_tokens"`      // context tokens written to cache by rewrites
	SavedUSD          float64 `json:"saved_usd"`
	RecallUSD         float64 `json:"recall_usd"`
	RewriteUSD        float64 `json:"rewrite_usd"`
	NetUSD            float64 `json:"net_usd"`
}

// SavedShare returns TokenSteps / TotalTokenSteps (0 when there is nothing to save).
func (r Result) SavedShare() float64 {
	if r.TotalTokenSteps == 0 {
		return 0
	}
	return float64(r.TokenSteps) / float64(r.TotalTokenSteps)
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
	outs    []int // indexes into Evaluator.outs, in (Step, input) order
}

// NewEvaluator validates opts, every output (Output.Validate, unique (Session,
// Key), one EndStep per session) and the sessions (each output's session present,
// Context covering its EndStep with sizes >= 0), and returns an Evaluator. The
// outputs are copied. Errors wrap ErrInvalid or ErrNoSession.
func NewEvaluator(outputs []Output, sessions []Session, opts Options) (*Evaluator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ctx := map[string][]int{}
	for i, s := range sessions {
		if s.Name == "" {
			return nil, fmt.Errorf("%w: sessions[%d]: empty Name", ErrInvalid, i)
		}
		if _, dup := ctx[s.Name]; dup {
			return nil, fmt.Errorf("%w: sessions[%d]: session %q given twice", ErrInvalid, i, s.Name)
		}
		for j, c := range s.Context {
			if c < 0 {
				return nil, fmt.Errorf("%w: session %q: Context[%d] = %d < 0", ErrInvalid, s.Name, j, c)
			}
		}
		ctx[s.Name] = s.Context
	}
	e := &Evaluator{opts: opts, outs: make([]Output, len(outputs))}
	byName := map[string]*sessionData{}
	keys := map[[2]string]bool{}
	for i := range outputs {
		o := outputs[i]
		o.Asks = append([]Ask(nil), o.Asks...)
		o.Uses = append([]int(nil), o.Uses...)
		if err := o.Validate(); err != nil {
			return nil, fmt.Errorf("outputs[%d]: %w", i, err)
		}
		k := [2]string{o.Session, o.Key}
		if keys[k] {
			return nil, fmt.Errorf("%w: outputs[%d]: output %q of session %q given twice", ErrInvalid, i, o.Key, o.Session)
		}
		keys[k] = true
		sd := byName[o.Session]
		if sd == nil {
			c, ok := ctx[o.Session]
			if !ok {
				return nil, fmt.Errorf("outputs[%d]: %w: %q", i, ErrNoSession, o.Session)
			}
			sd = &sessionData{name: o.Session, end: o.EndStep, context: c}
			if len(c) < o.EndStep {
				return nil, fmt.Errorf("%w: session %q: Context has %d steps, EndStep is %d", ErrInvalid, o.Session, len(c), o.EndStep)
			}
			byName[o.Session] = sd
			e.sessions = append(e.sessions, sd)
		}
		if o.EndStep != sd.end {
			return nil, fmt.Errorf("%w: outputs[%d]: output %q of session %q: EndStep %d, other outputs of the session say %d", ErrInvalid, i, o.Key, o.Session, o.EndStep, sd.end)
		}
		sd.outs = append(sd.outs, i)
		e.outs[i] = o
	}
	for _, sd := range e.sessions {
		sort.SliceStable(sd.outs, func(a, b int) bool { return e.outs[sd.outs[a]].Step < e.outs[sd.outs[b]].Step })
	}
	return e, nil
}

// Options returns the evaluator's options.
func (e *Evaluator) Options() Options { return e.opts }

// Outputs returns a copy of the evaluator's outputs, in input order.
func (e *Evaluator) Outputs() []Output { return append([]Output(nil), e.outs...) }

// Evaluate computes the Result of the pruner that decides to prune outputs[i] at
// step prune[i] (0 = never; a step past the output's EndStep also means never). It
// fails (ErrInvalid) when len(prune) != number of outputs or a decision step lies
// before the output's EligibleFrom (or the output is never eligible): every pruner
// works under the same protection.
func (e *Evaluator) Evaluate(name string, cutoff float64, prune []int) (Result, error) {
	if len(prune) != len(e.outs) {
		return Result{}, fmt.Errorf("%w: evaluate %s: %d decisions for %d outputs", ErrInvalid, name, len(prune), len(e.outs))
	}
	for i, p := range prune {
		o := &e.outs[i]
		if p == 0 || p > o.EndStep {
			continue
		}
		if el := o.EligibleFrom(); el == 0 || p < el || p < 0 {
			return Result{}, fmt.Errorf("%w: evaluate %s: output %q of session %q pruned at step %d, eligible from %d (0 = never)", ErrInvalid, name, o.Key, o.Session, p, el)
		}
	}
	return e.evaluate(name, cutoff, prune), nil
}

// evaluate is Evaluate without the checks.
func (e *Evaluator) evaluate(name string, cutoff float64, prune []int) Result {
	r := Result{Name: name, Cutoff: cutoff, Outputs: len(e.outs)}
	for i := range e.outs {
		o := &e.outs[i]
		r.TotalTokenSteps += int64(o.Tokens) * int64(o.EndStep-o.Step)
		p := prune[i]
		if p < 1 || p > o.EndStep {
			continue
		}
		r.Pruned++
		stop := o.EndStep + 1
		if u := o.UsedFrom(p); u != 0 {
			r.Misses++
			stop = u
		}
		r.TokenSteps += int64(o.Tokens) * int64(stop-p)
	}
	if r.Outputs > 0 {
		r.PruneRate = float64(r.Pruned) / float64(r.Outputs)
	}
	if r.Pruned > 0 {
		r.MissRate = float64(r.Misses) / float64(r.Pruned)
	}
	pr := e.opts.Prices
	cached := pr.CachedInputPerMTok / 1e6
	input := pr.InputPerMTok / 1e6
	write := pr.CacheWriteFactor * input
	for _, sd := range e.sessions {
		e.rewrites(sd, prune, &r)
	}
	r.SavedUSD = float64(r.AppliedTokenSteps) * cached
	r.RewriteUSD = float64(r.RewriteTokens) * (write - cached)
	r.NetUSD = r.SavedUSD - r.RecallUSD - r.RewriteUSD
	return r
}

// rewrites simulates the advisor's rewrite batching for one session (see Result)
// and adds the applied-level figures and recall costs to r.
func (e *Evaluator) rewrites(sd *sessionData, prune []int, r *Result) {
	pr := e.opts.Prices
	cached := pr.CachedInputPerMTok / 1e6
	input := pr.InputPerMTok / 1e6
	threshold := e.opts.RewriteThreshold()
	decided := map[int][]int{}
	for _, i := range sd.outs {
		if p := prune[i]; p >= 1 && p <= sd.end {
			decided[p] = append(decided[p], i)
		}
	}
	if len(decided) == 0 {
		return
	}
	back := make([]int64, sd.end+2) // tokens returning to the context at each step (recalls)
	var removed int64               // tokens pruned from the context at the current step
	var pending []int
	var pendTok int64
	for s := 1; s <= sd.end; s++ {
		removed -= back[s]
		for _, i := range decided[s] {
			pending = append(pending, i)
			pendTok += int64(e.outs[i].Tokens)
		}
		if len(pending) == 0 {
			continue
		}
		ctx := int64(sd.context[s-1]) - removed
		if pendTok < threshold && ctx <= int64(e.opts.HardLimit) {
			continue
		}
		for _, i := range pending {
			o := &e.outs[i]
			r.Applied++
			stop := o.EndStep + 1
			if u := o.UsedFrom(s); u != 0 {
				r.AppliedMisses++
				r.RecallUSD += float64(o.Tokens)*cached + float64(pr.RecallOverheadTokens)*input
				stop = u
			}
			r.AppliedTokenSteps += int64(o.Tokens) * int64(stop-s)
			if stop > s {
				removed += int64(o.Tokens)
				back[stop] += int64(o.Tokens)
			}
		}
		r.Rewrites++
		r.RewriteTokens += max(int64(sd.context[s-1])-removed, 0)
		pending, pendTok = pending[:0], 0
	}
}
