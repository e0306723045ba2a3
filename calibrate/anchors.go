package calibrate

import (
	"fmt"
	"math"
	"time"
)

// The anchors: the regimes of the tools people use instead of pruneadvisor, each at
// its published defaults, replayed over the same sessions and priced the same way
// (docs/DESIGN.md "Calibration, baselines, back-off"). Each clears old tool outputs by
// its own rule, without scores or recall, and ignores pruneadvisor's protection
// (only outputs whose placeholder would not be shorter stay). A cleared output used
// later is priced as a miss, like any pruner's: the agent fetches it again.

// AnchorPlaceholderTokens is the size of the text the anchors put in place of a
// cleared output ("[Old tool result content cleared]" and the like: under a dozen
// tokens).
const AnchorPlaceholderTokens = 10

// Anthropic's tool-result clearing (the Messages API's context editing,
// clear_tool_uses_20250919, https://docs.claude.com/en/docs/build-with-claude/context-editing):
// when the input passes the trigger (default 100,000 input tokens) the oldest tool
// results are cleared, all but the `keep` most recent tool uses (default 3);
// `clear_at_least` (no default) makes it clear only when it frees that many tokens,
// "so that the cache invalidation is worth it".
const (
	AnthropicTrigger = 100_000
	AnthropicKeep    = 3
)

// gemini-cli's tool-output masking: the newest tool outputs, up to 50,000 tokens,
// are protected; the older ones are masked together, only once at least 30,000
// tokens of them can be masked (its defaults, as issue 9 quotes them from
// packages/core's tool-output masking service).
const (
	GeminiProtectTokens  = 50_000
	GeminiPrunableTokens = 30_000
)

// GeminiPreviewTokens is the size of gemini-cli's masked output in tokens: the
// first and last evidence.PreviewChars (250) characters it keeps, 141 tokens on
// average over the corpus's prunable outputs (issue 39's table), plus its
// placeholder's own words (AnchorPlaceholderTokens). Its later uses are misses
// only when the head and tail do not hold their names (Output.Previewed).
const GeminiPreviewTokens = 141 + AnchorPlaceholderTokens

// opencode's prune (packages/opencode/src/session/compaction.ts, PRUNE_PROTECT and
// PRUNE_MINIMUM): walking back from the newest output, the first 40,000 tokens of
// tool output are protected; older outputs are pruned together once they add up to
// at least 20,000 tokens.
const (
	OpencodeProtectTokens = 40_000
	OpencodeMinimumTokens = 20_000
)

// Claude Code's time-based clearing: after 60 idle minutes (the cache is long cold)
// it clears every tool result but the 5 newest.
const (
	ClaudeCodeIdle = 60 * time.Minute
	ClaudeCodeKeep = 5
)

// ClearAtLeastShare is the share of the budget the clear_at_least variant of
// Anthropic's clearing asks a clearing to free (issue 9: 5% of the budget, the API
// having no default).
const ClearAtLeastShare = 0.05

// ClearAtLeast is the clear_at_least, in tokens, the anchors are evaluated with at
// a budget of budget tokens: ClearAtLeastShare of it, rounded up.
func ClearAtLeast(budget int) int { return int(math.Ceil(ClearAtLeastShare * float64(budget))) }

// AnchorNames lists the anchor regimes Anchors evaluates, in its order.
func AnchorNames(clearAtLeast int) []string {
	names := []string{"anthropic-clearing"}
	if clearAtLeast > 0 {
		names = append(names, "anthropic-clearing-at-least")
	}
	return append(names, "gemini-cli-masking", "opencode-prune", "claude-code-idle-clearing")
}

// Anchors evaluates the anchor regimes: Anthropic's clearing at its defaults, the
// same with clear_at_least = clearAtLeast tokens when clearAtLeast > 0 (issue 9
// asks for 5% of the budget), gemini-cli's masking, opencode's prune and Claude
// Code's idle clearing. Both levels are the regime itself (an anchor has no
// pending prunes); the flat prune figures count each output at the step it was
// cleared.
func (e *Evaluator) Anchors(clearAtLeast int) []Result {
	var out []Result
	run := func(name string, p policy) {
		out = append(out, e.evaluatePolicy(name, func(*sessionData) policy { return p }))
	}
	run("anthropic-clearing", &keepNewestP{trigger: AnthropicTrigger, keep: AnthropicKeep})
	if clearAtLeast > 0 {
		run("anthropic-clearing-at-least", &keepNewestP{trigger: AnthropicTrigger, keep: AnthropicKeep, atLeast: clearAtLeast})
	}
	run("gemini-cli-masking", &protectWindowP{protect: GeminiProtectTokens, minimum: GeminiPrunableTokens, preview: true})
	run("opencode-prune", &protectWindowP{protect: OpencodeProtectTokens, minimum: OpencodeMinimumTokens})
	run("claude-code-idle-clearing", &keepNewestP{idle: ClaudeCodeIdle, keep: ClaudeCodeKeep})
	return out
}

// Applied evaluates the pruner that stubbed outputs[i] at step apply[i] (0 =
// never), as a replay of the advisor recorded it (replay.OutputFacts.PrunedAt): both
// levels are those steps. Errors: ErrInvalid for a length mismatch or a step before
// the output is visible.
func (e *Evaluator) Applied(name string, apply []int) (Result, error) {
	if len(apply) != len(e.outs) {
		return Result{}, fmt.Errorf("%w: applied %s: %d steps for %d outputs", ErrInvalid, name, len(apply), len(e.outs))
	}
	for i, st := range apply {
		if st != 0 && st <= e.outs[i].Step {
			return Result{}, fmt.Errorf("%w: applied %s: output %q of session %q stubbed at step %d, before it was visible", ErrInvalid, name, e.outs[i].Key, e.outs[i].Session, st)
		}
	}
	ds := make([]PruneAt, len(apply))
	for i, st := range apply {
		ds[i].Step = st
	}
	return e.evaluatePolicy(name, func(sd *sessionData) policy { return &appliedP{decide(e, sd, ds)} }), nil
}

// evaluatePolicy prices a regime at both levels and derives the flat prune figures
// from the steps at which it cleared each output.
func (e *Evaluator) evaluatePolicy(name string, mk func(*sessionData) policy) Result {
	cleared := make([]PruneAt, len(e.outs))
	rec := func(sd *sessionData) policy { return &recordingP{inner: mk(sd), sd: sd, into: cleared} }
	r := Result{Name: name, Cutoff: -1}
	e.price(&r, mk, rec)
	h := holdDigest // the advisor's own stubs, unless the policy's are placeholders
	if len(e.sessions) > 0 {
		if ph, ok := mk(e.sessions[0]).(placeholderer); ok {
			_, h = ph.placeholder()
		}
	}
	flat := e.pruneFigures(name, -1, cleared, h)
	r.Outputs, r.Pruned, r.Misses, r.PruneRate, r.MissRate = flat.Outputs, flat.Pruned, flat.Misses, flat.PruneRate, flat.MissRate
	r.TokenSteps, r.TotalTokenSteps, r.StubTokenSteps = flat.TokenSteps, flat.TotalTokenSteps, flat.StubTokenSteps
	return r
}

// recordingP notes the step at which its inner policy stubs each output.
type recordingP struct {
	inner policy
	sd    *sessionData
	into  []PruneAt
}

func (p *recordingP) stub(v *view) []int {
	out := p.inner.stub(v)
	for _, j := range out {
		if j < 0 {
			continue // a copy (appendAt), not an output of its own
		}
		if i := p.sd.outs[j]; p.into[i].Step == 0 {
			p.into[i].Step = v.s
		}
	}
	return out
}

func (p *recordingP) placeholder() (int, hold) {
	if ph, ok := p.inner.(placeholderer); ok {
		return ph.placeholder()
	}
	return -1, holdDigest
}

// keepNewestP clears every visible output but the keep newest, when the context
// passes trigger (> 0) or the call comes after more than idle (> 0) without one; with
// atLeast > 0 only when the outputs cleared hold at least atLeast tokens (the API's
// cleared_input_tokens).
type keepNewestP struct {
	trigger, keep, atLeast int
	idle                   time.Duration
}

func (p *keepNewestP) placeholder() (int, hold) { return AnchorPlaceholderTokens, holdNothing }

func (p *keepNewestP) stub(v *view) []int {
	switch {
	case p.trigger > 0 && v.ctx <= p.trigger:
		return nil
	case p.idle > 0 && v.sd.gap[v.s-1] <= p.idle:
		return nil
	}
	// The keep newest tool results still in the context (a compaction drops the
	// others), a recall's copy among them (view.sequence).
	seq := v.sequence()
	if len(seq) < p.keep {
		return nil
	}
	var out []int
	cleared := 0
	for _, pos := range seq[:len(seq)-p.keep] {
		if !v.stubbedAt(pos) && v.savesAt(pos) > 0 {
			out = append(out, pos)
			cleared += v.tokensAt(pos)
		}
	}
	if p.atLeast > 0 && cleared < p.atLeast {
		return nil
	}
	return out
}

// protectWindowP protects the newest outputs up to protect tokens (counting outputs
// not cleared yet) and clears all older ones together once they hold at least
// minimum tokens (both tools count the outputs' own sizes); with preview set its
// placeholder keeps the output's head and tail (Gemini CLI's), else nothing
// (opencode's).
type protectWindowP struct {
	protect, minimum int
	preview          bool
}

func (p *protectWindowP) placeholder() (int, hold) {
	if p.preview {
		return GeminiPreviewTokens, holdPreview
	}
	return AnchorPlaceholderTokens, holdNothing
}

func (p *protectWindowP) stub(v *view) []int {
	// Every tool result still in the context, a recall's copy among them
	// (view.sequence), newest first.
	seq := v.sequence()
	window, k := 0, len(seq)-1
	for ; k >= 0 && window < p.protect; k-- {
		if !v.stubbedAt(seq[k]) {
			window += v.tokensAt(seq[k])
		}
	}
	var out []int
	prunable := 0
	for ; k >= 0; k-- {
		if pos := seq[k]; !v.stubbedAt(pos) && v.savesAt(pos) > 0 {
			out = append(out, pos)
			prunable += v.tokensAt(pos)
		}
	}
	if prunable < p.minimum {
		return nil
	}
	return out
}
