package advisor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Agent names, as `wrap` names the agents it starts, `serve --agent` takes them and
// Config.Agent holds them.
const (
	AgentClaude   = "claude"
	AgentCodex    = "codex"
	AgentPi       = "pi"
	AgentGemini   = "gemini"
	AgentOpencode = "opencode"
)

// CompactionPoint is where an agent compacts its context (docs/DESIGN.md "Compaction:
// what pruning is for"), as a function of the model's context window W: the lowest
// of W x Fraction (when Fraction > 0), W - Reserve (when Reserve > 0) and Tokens
// (when Tokens > 0). A zero field takes no part; at least one must be set.
type CompactionPoint struct {
	// Fraction of the window at which the agent compacts, in (0, 1]; 0: none.
	Fraction float64 `json:"fraction,omitempty" validate:"gte=0,lte=1"`
	// Reserve is the tokens the agent keeps free below the window; 0: none.
	Reserve int `json:"reserve_tokens,omitempty" validate:"gte=0"`
	// Tokens is a fixed point in tokens (Codex's model_auto_compact_token_limit,
	// Claude Code's CLAUDE_CODE_AUTO_COMPACT_WINDOW less its reserve); 0: none.
	Tokens int `json:"tokens,omitempty" validate:"gte=0"`
	// Source says where the row's numbers come from (documentation only).
	Source string `json:"source,omitempty"`
	// Keeps says what the agent keeps when it compacts, in words.
	Keeps string `json:"keeps,omitempty"`
	// SummaryTokens is the size in tokens of the summary a compaction of this
	// agent leaves, for the compaction model of replay and calibrate; 0 takes
	// MeanSummaryTokens.
	SummaryTokens int `json:"summary_tokens,omitempty" validate:"gte=0"`
	// KeepTokens, KeepFraction and KeepSteps are Keeps for the compaction model
	// (calibrate.Compaction): the newest KeepTokens tokens, the newest KeepFraction
	// of the context, the messages of the last KeepSteps model calls; 0: none.
	KeepTokens   int     `json:"keep_tokens,omitempty" validate:"gte=0"`
	KeepFraction float64 `json:"keep_fraction,omitempty" validate:"gte=0,lte=1"`
	KeepSteps    int     `json:"keep_steps,omitempty" validate:"gte=0"`
	// Counts says what the agent compares with its point before a request:
	// CountsUsage, the usage the provider reported for its last request (what
	// it was sent plus its answer; the tool outputs that came since are not
	// counted); CountsTurn, the same only between turns; or CountsEstimate (""
	// too), its next request as it will send it. The hard limit's margin follows
	// it (HardLimitFor): the answer alone for usage and turn (CountsLastUsage),
	// one step's growth for an estimate.
	Counts string `json:"counts,omitempty" validate:"omitempty,oneof=usage turn estimate"`
}

// What an agent compares with its compaction point (CompactionPoint.Counts):
// CountsTurn is CountsUsage checked only between turns (when its run ends and
// before a new prompt: pi); the live hard limit treats it as CountsUsage (the
// proxy cannot tell which request ends a turn), replay and calibrate count only
// at the calls that start one.
const (
	CountsUsage    = "usage"
	CountsTurn     = "turn"
	CountsEstimate = "estimate"
)

// CountsLastUsage reports whether the agent counts its context from its last
// usage (CountsUsage or CountsTurn): its hard limit's margin is then the answer
// margin (Config.AnswerMarginTokens), not a step's growth.
func (p CompactionPoint) CountsLastUsage() bool {
	return p.Counts == CountsUsage || p.Counts == CountsTurn
}

// Summary sizes measured on the real compacted sessions in ../shared/sessions
// (TestCompactionSummarySizes reads them again): Claude Code's one compaction
// (claude-code/3af9b1a7-…, 4,369 tokens), pi's three (session.jsonl 1,064,
// before-compaction.jsonl 1,113 and 963; mean 1,047). MeanSummaryTokens, the mean
// of those four, stands for the agents with no compacted session to measure
// (Codex, Gemini CLI, opencode) and for unknown agents. ../shared/corpus holds no
// compacted session.
const (
	ClaudeSummaryTokens = 4_369
	PiSummaryTokens     = 1_047
	MeanSummaryTokens   = 1_877
)

// At returns the point in tokens for a window of window tokens (never below 1).
func (p CompactionPoint) At(window int) int {
	at := window
	if p.Fraction > 0 {
		at = min(at, int(float64(window)*p.Fraction))
	}
	if p.Reserve > 0 {
		at = min(at, window-p.Reserve)
	}
	if p.Tokens > 0 {
		at = min(at, p.Tokens)
	}
	return max(at, 1)
}

// check reports what is wrong with p for a window of window tokens ("" when
// nothing): no field set, or a point under 1 token.
func (p CompactionPoint) check(window int) string {
	switch {
	case p.Fraction <= 0 && p.Reserve <= 0 && p.Tokens <= 0:
		return "sets none of fraction, reserve_tokens, tokens"
	case p.Reserve > 0 && p.Reserve >= window:
		return fmt.Sprintf("reserve_tokens %d leaves nothing of the context_window %d", p.Reserve, window)
	}
	return ""
}

// CompactionPoints is the one table of the agents' compaction points (docs/DESIGN.md
// "Compaction: what pruning is for"). Config.CompactionPoints overrides or adds
// rows by agent name. Each row's Source names where its numbers come from.
var CompactionPoints = map[string]CompactionPoint{
	// Claude Code: window - min(max output, 20k) - 13k; every current Claude
	// model's max output is over 20k, so 33k below the window: 167k of 200k,
	// 967k of 1M. CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=P lowers it to P% of the window
	// less 20k (2.1.332; a tokens row), CLAUDE_CODE_AUTO_COMPACT_WINDOW /
	// autoCompactWindow set the window it counts from, 100k at least (a tokens
	// row of that less 33k, or context_window).
	AgentClaude: {Reserve: 33_000,
		Source: "Claude Code autoCompact: effective window = window - min(max output, 20,000); threshold = effective - 13,000 (AUTOCOMPACT_BUFFER_TOKENS)",
		Keeps:  "the summary (and the files it re-reads)", SummaryTokens: ClaudeSummaryTokens,
		// Before every model call, the last usage plus its estimate of the
		// messages since (e2e TestClaudeCompaction).
		Counts: CountsEstimate},
	// Codex: the lower of model_auto_compact_token_limit and 90% of the window
	// (244,800 of 272,000); set the limit with a tokens override.
	AgentCodex: {Fraction: 0.9,
		Source: "codex-rs core: auto_compact_token_limit = min(model_auto_compact_token_limit, 90% of the context window)",
		Keeps:  "the summary and recent user messages (up to 20k tokens)",
		// After every response, its total tokens (e2e TestCodexCompaction).
		Counts: CountsUsage},
	// pi: window - reserveTokens (16,384).
	AgentPi: {Reserve: 16_384,
		Source: "pi-coding-agent compaction settings: reserveTokens 16384 (keepRecentTokens 20000)",
		Keeps:  "the summary and the last keepRecentTokens (20,000)", SummaryTokens: PiSummaryTokens, KeepTokens: 20_000,
		// The last answer's usage, when the agent's run ends and before a new
		// prompt (0.73.1 agent-session.js _checkCompaction; e2e TestPiCompaction;
		// the two real compactions of ../shared/sessions/pi/before-compaction.jsonl
		// came between turns).
		Counts: CountsTurn},
	// Gemini CLI: compressionThreshold (default 0.5) of the model's limit.
	AgentGemini: {Fraction: 0.5,
		Source: "gemini-cli chatCompressionService: DEFAULT_COMPRESSION_TOKEN_THRESHOLD 0.5 of tokenLimit(model) (model.compressionThreshold)",
		Keeps:  "the summary and the latest 30% of the history", KeepFraction: 0.3,
		// The last prompt's token count, before every request (0.61.0 compress:
		// getLastPromptTokenCount; e2e TestGeminiCompaction).
		Counts: CountsUsage},
	// opencode: input limit - compaction.reserved (default min(20,000, the model's
	// output limit): 20,000 for current coding models).
	AgentOpencode: {Reserve: 20_000,
		Source: "opencode session/compaction: overflow when tokens > input limit - compaction.reserved (default min(20000, output limit))",
		Keeps:  "the summary and the last tail_turns (2)", KeepSteps: 2,
		// The last finished answer's tokens, before every step (1.18.33 session
		// loop: isOverflow; e2e TestOpencodeCompaction).
		Counts: CountsUsage},
}

// Agents returns the agent names the configuration knows: the table's and
// Config.CompactionPoints', sorted.
func (c Config) Agents() []string {
	names := slices.Collect(maps.Keys(CompactionPoints))
	for k := range c.CompactionPoints {
		if _, ok := CompactionPoints[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// PointOf returns agent's compaction point: Config.CompactionPoints[agent] over
// the table's row; false for an agent neither knows (and for "").
func (c Config) PointOf(agent string) (CompactionPoint, bool) {
	if p, ok := c.CompactionPoints[agent]; ok {
		return p, true
	}
	p, ok := CompactionPoints[agent]
	return p, ok
}

// KnownAgent reports whether agent names a row of the table or of
// Config.CompactionPoints.
func (c Config) KnownAgent(agent string) bool {
	_, ok := c.PointOf(agent)
	return ok
}

// ErrUnknownAgent is returned for an agent no compaction point is known for.
var ErrUnknownAgent = fmt.Errorf("unknown agent")

// CheckAgent returns nil for "" and a known agent, else an error wrapping
// ErrUnknownAgent that lists the known ones.
func (c Config) CheckAgent(agent string) error {
	if agent == "" || c.KnownAgent(agent) {
		return nil
	}
	return fmt.Errorf("%w %q; known agents: %s", ErrUnknownAgent, agent, strings.Join(c.Agents(), ", "))
}

// DefaultCompactionMargin is Config.CompactionMargin's default, in tokens: 10,000,
// 5% of a 200,000 window. The agent checks its point against the context of its
// next request, which adds the model's answer and the tool outputs it gets to this
// one, and a session's first steps have no growth to go by; a session whose steps
// grow more gets its own largest step as the margin (HardLimitFor).
const DefaultCompactionMargin = 10_000

// DefaultAnswerMargin is Config.AnswerMargin's default, in tokens: the room the
// hard limit keeps below the point of an agent that counts its last usage
// (CompactionPoint.Counts), for the model's answer, which that usage includes.
// The tool outputs that come after the answer are not counted before the next
// request, which the proxy sees and rewrites before it goes out. 5,000: at a
// 64,000-token window on ../shared/sessions and ../shared/corpus it saved two
// and one compactions and half the stub misses against the growth margin
// (docs/EVALUATION.md, "When the agent decides to compact").
const DefaultAnswerMargin = 5_000

// AnswerMarginTokens returns AnswerMargin, or DefaultAnswerMargin when it is 0.
func (c Config) AnswerMarginTokens() int {
	if c.AnswerMargin > 0 {
		return c.AnswerMargin
	}
	return DefaultAnswerMargin
}

// Margin returns CompactionMargin, or DefaultCompactionMargin when it is 0.
func (c Config) Margin() int {
	if c.CompactionMargin > 0 {
		return c.CompactionMargin
	}
	return DefaultCompactionMargin
}

// Limit is a session's hard limit and where it comes from.
type Limit struct {
	// Point is the compaction point in tokens (the agent's, or the request's
	// trigger); 0 when the agent is unknown.
	Point int
	// Margin is one step's growth kept free below Point.
	Margin int
	// Tokens is the hard limit: Point - Margin, or the window fraction's when the
	// agent is unknown; never below 1. The advisor takes Tools off it.
	Tokens int
	// Tools is the request's tool definitions in tokens
	// (transcript.Session.ToolTokens), taken off Tokens by the advisor (0 from
	// HardLimitFor): the point counts them, the context does not.
	Tools int
	// Source names it: "agent:claude", "trigger", or "window-fraction" (with why
	// when the agent is known but its point is not above the margin).
	Source string
}

// HardLimitFor returns the hard limit of a session of agent ("" when unknown),
// with the compaction trigger its request asked the provider for (0: none) and
// the largest growth of its context in one step seen so far. A trigger is the
// compaction point (it is where the context really gets compacted); else the
// agent's point (PointOf) for the window; else, for an unknown agent, the window
// fraction (HardLimitTokens). The margin is the larger of growth and Margin(): an
// agent that estimates its next request checks its point against it, one step's
// growth above the one sent now; for an agent that counts its last usage
// (CompactionPoint.Counts) it is AnswerMarginTokens(), the room for the answer
// that usage includes.
func (c Config) HardLimitFor(agent string, trigger, growth int) Limit {
	var l Limit
	l.Margin = max(c.Margin(), growth)
	switch p, ok := c.PointOf(agent); {
	case trigger > 0:
		l.Point, l.Source = trigger, "trigger"
	case ok && p.CountsLastUsage() && p.At(c.ContextWindow) > c.AnswerMarginTokens():
		l.Point, l.Source, l.Margin = p.At(c.ContextWindow), "agent:"+agent, c.AnswerMarginTokens()
	case ok && p.At(c.ContextWindow) > l.Margin:
		l.Point, l.Source = p.At(c.ContextWindow), "agent:"+agent
	case ok:
		// The agent's point is not above the margin for this window (a reserve
		// as large as a small window): the window fraction, and the plan says why.
		return Limit{Tokens: c.HardLimitTokens(), Source: fmt.Sprintf("window-fraction (%s compacts at %d, under the margin)", agent, p.At(c.ContextWindow))}
	default:
		return Limit{Tokens: c.HardLimitTokens(), Source: "window-fraction"}
	}
	l.Tokens = max(l.Point-l.Margin, 1)
	return l
}

// AgentOf returns the agent that writes sessions of format f ("" when the format
// does not say: chat-completions lists, Anthropic request bodies, the SWE-agent
// family): Claude Code's, Codex CLI's (rollouts and Responses bodies), pi's and
// Gemini CLI's (chat files and API bodies).
func AgentOf(f transcript.Format) string {
	switch f {
	case transcript.FormatClaudeCode:
		return AgentClaude
	case transcript.FormatCodex, transcript.FormatResponses:
		return AgentCodex
	case transcript.FormatPi:
		return AgentPi
	case transcript.FormatGemini, transcript.FormatGeminiAPI:
		return AgentGemini
	}
	return ""
}
