package advisor

import (
	"context"
	"errors"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

// Sentinel errors.
var (
	// ErrNotFound means no pruned output has the given recall id.
	ErrNotFound = errors.New("no pruned output with this id")
	// ErrNoSession means Advise was given a nil session, or one with a nil message.
	ErrNoSession = errors.New("no session")
	// ErrInvalidScores means a scorer returned no error but an unusable answer: not
	// one score per card, or a keep-probability outside [0,1] or not finite. The
	// cards get no score (failure kind "invalid").
	ErrInvalidScores = errors.New("scorer returned invalid scores")
	// ErrConflict means Store.SavePrunes stored nothing because the store already
	// holds another stub (or original) for one of the outputs: another process
	// sharing the store pruned it first. The stored stub wins; read it back with
	// SessionStubs.
	ErrConflict = errors.New("another stub is stored for this output")
)

// Decision is what the advisor decided for one tool output at one step.
type Decision string

// Decisions, as they appear in plans and the store.
const (
	DecisionKeep      Decision = "keep"      // a candidate scored at or above the cutoff, or not yet scored
	DecisionProtected Decision = "protected" // not a candidate (see Reason for which protection)
	DecisionPending   Decision = "pending"   // will be pruned at the next rewrite
	DecisionPruned    Decision = "pruned"    // replaced by a stub (frozen)
	DecisionRecalled  Decision = "recalled"  // pruned, and its original was recalled: the stub stays (frozen)
)

// Scorer returns a keep-probability per card. Implementations: advisor/fitted (the
// default: fitted.NewDefault, the embedded model), advisor/ollama, advisor/lexical,
// and the CLI's auto choice between Ollama and the fitted scorer. Score returns one Score per card,
// in order; a failed request returns all-not-OK scores and a non-nil error
// describing the failure (the advisor counts it and prunes nothing on its account).
type Scorer interface {
	Name() string
	Score(ctx context.Context, b cards.Batch) ([]cards.Score, error)
}

// Plan is the advisor's answer for one step.
type Plan struct {
	SessionID string `json:"session_id"`
	Step      int    `json:"step"`       // the step being prepared (assistant messages so far + 1)
	Budget    int    `json:"budget"`     // tokens
	HardLimit int    `json:"hard_limit"` // tokens
	// HardLimitSource says where HardLimit comes from (Config.HardLimitFor):
	// "agent:NAME" (the agent's compaction point less a step's growth), "trigger"
	// (the compaction trigger the request asked the provider for, less the same
	// margin) or "window-fraction" (no agent known: hard_limit_fraction).
	HardLimitSource string `json:"hard_limit_source,omitempty"`
	// ToolTokens is the request's tool definitions in tokens, already taken off
	// HardLimit (the agent's point counts them, ContextTokens does not); 0 for
	// session files, which record none.
	ToolTokens int `json:"tool_tokens,omitempty"`
	// ContextTokens is the session's size in tokens with every applied stub,
	// after this step's rewrite.
	ContextTokens int `json:"context_tokens"`
	// SavedTokens is how many tokens the applied stubs remove from the context now
	// (originals minus stubs); summed over steps it gives token-steps saved.
	SavedTokens int  `json:"saved_tokens"`
	OverBudget  bool `json:"over_budget"` // ContextTokens before the rewrite exceeded Budget
	// Cold reports that the prompt cache had expired before this step (no call for
	// longer than the cache TTL): a rewrite was free.
	Cold bool `json:"cold,omitempty"`
	// Rewrite is true when pending prunes were applied at this step; RewriteReason
	// says which rule of the planner allowed it: "cold-cache", "over-budget",
	// "hard-limit" or "pays" (package planner). Between two rewrites the bytes sent
	// do not change; a recall does not change them either (the stub stays).
	Rewrite       bool   `json:"rewrite"`
	RewriteReason string `json:"rewrite_reason,omitempty"`
	// RewriteCostUSD and RewriteSavingUSD are the planner's prices of this step's
	// rewrite, in dollars: the cache-write premium of the tokens after its first
	// changed message (0 when the cache was cold), and the tokens it removed times
	// the cache-read price times the expected remaining steps.
	RewriteCostUSD   float64 `json:"rewrite_cost_usd,omitempty"`
	RewriteSavingUSD float64 `json:"rewrite_saving_usd,omitempty"`
	// Waiting says why pending prunes were not applied at this step ("" when there
	// were none, or they were applied).
	Waiting       string `json:"waiting,omitempty"`
	Pruned        int    `json:"pruned"`         // outputs newly stubbed at this step
	PendingTokens int    `json:"pending_tokens"` // tokens a rewrite would free, after this step
	// Asked counts the cards sent to the scorer at this step (with asks off the
	// step's path, Advisor.Asks: sent in the ask made at this step, answered later).
	Asked int `json:"asked"`
	// ScorerFailures counts cards that got no score at this step, by failure kind
	// (with asks off the step's path: the cards of the answer folded in at this
	// step, whichever step asked).
	ScorerFailures map[string]int `json:"scorer_failures,omitempty"`
	// StorageError is set when storage failed at this step: nothing new was pruned.
	StorageError string `json:"storage_error,omitempty"`
	// Items lists every tool output, in session order. It is the advisor's own
	// table for the session, updated in place (so a step costs no copy of it): it is
	// complete when Advise returns and valid until the next Advise call for the same
	// session. Use Clone to keep a plan across steps or to read it while another
	// step of the same session may run.
	Items []Item `json:"items"`
	// Changed lists the indexes into Items of the outputs whose decision or reason
	// changed at this step, new outputs included, ascending: what a caller that
	// follows the plan step by step (replay) needs to look at, so that a step costs
	// no pass over every item.
	Changed []int `json:"-"`
	// Stubs maps the output key of every output whose stub is applied to the stub
	// text: exactly what transcript.Session.Rewrite takes. Like Items it is the
	// advisor's own (valid until the next Advise of the session; Clone copies it).
	Stubs map[string]string `json:"-"`
	// PrevFullTokens is the context of the session's previous step with nothing
	// pruned (its ContextTokens + SavedTokens), by whichever process advised it
	// (read from the store's step record when another one did), when PrevKnown: what
	// the proxy's ledger counts the agent's additions from. PrevKnown is false at a
	// session's first step and when no step record of the one before could be read.
	PrevFullTokens int  `json:"-"`
	PrevKnown      bool `json:"-"`
}

// Clone returns a deep copy of p that later steps do not change.
func (p Plan) Clone() Plan {
	c := p
	c.Items = append([]Item{}, p.Items...)
	c.Changed = append([]int(nil), p.Changed...)
	if p.Stubs != nil {
		c.Stubs = make(map[string]string, len(p.Stubs))
		for k, v := range p.Stubs {
			c.Stubs[k] = v
		}
	}
	if p.ScorerFailures != nil {
		c.ScorerFailures = make(map[string]int, len(p.ScorerFailures))
		for k, v := range p.ScorerFailures {
			c.ScorerFailures[k] = v
		}
	}
	return c
}

// Item is one tool output's decision.
type Item struct {
	Key      string   `json:"key"` // transcript.ToolOutput.Key
	Tool     string   `json:"tool"`
	Summary  string   `json:"summary"`
	Step     int      `json:"step"`   // step the output was produced at
	Tokens   int      `json:"tokens"` // the original's tokens
	Decision Decision `json:"decision"`
	// Reason explains the decision: the rule and superseding call, the score and
	// cutoff, or which protection applies.
	Reason    string  `json:"reason"`
	By        string  `json:"by,omitempty"` // call id that made the output dead (rules)
	Score     float64 `json:"score"`        // latest keep-probability, -1 when never scored
	DecidedAt int     `json:"decided_at"`   // step of the latest decision change
	// RecallID is the id its stub names (for a recall's result, the recalled
	// output's id: both restore the same bytes).
	RecallID string `json:"recall_id"`
	// Uses is the use history so far: how many of the agent's messages named one of
	// its distinctive names, re-read its file, re-ran its call, or recalled it.
	Uses int    `json:"uses"`
	Stub string `json:"stub,omitempty"` // the stub text, when pruned
	// Final reports that the advisor will not read the output's text again: it is
	// pruned or recalled (its stub is frozen), or protected for good (the caller's
	// keep, an excluded tool, too small, a stub not shorter). Advise may then be
	// given the session without the message that carries it (see Advise).
	Final bool `json:"-"`
}
