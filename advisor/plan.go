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
)

// Decision is what the advisor decided for one tool output at one step.
type Decision string

// Decisions, as they appear in plans and the store.
const (
	DecisionKeep      Decision = "keep"      // a candidate scored at or above the cutoff, or not yet scored
	DecisionProtected Decision = "protected" // not a candidate (see Reason for which protection)
	DecisionPending   Decision = "pending"   // will be pruned at the next rewrite
	DecisionPruned    Decision = "pruned"    // replaced by a stub (frozen)
	DecisionRecalled  Decision = "recalled"  // was pruned, then recalled: the original is back
)

// Scorer returns a keep-probability per card. Implementations: advisor/ollama,
// advisor/lexical, and the auto choice between them. Score returns one Score per card,
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
	// ContextTokens is the session's size in tokens with every applied stub,
	// after this step's rewrite.
	ContextTokens int `json:"context_tokens"`
	// SavedTokens is how many tokens the applied stubs remove from the context now
	// (originals minus stubs); summed over steps it gives token-steps saved.
	SavedTokens int  `json:"saved_tokens"`
	OverBudget  bool `json:"over_budget"` // ContextTokens before the rewrite exceeded Budget
	// Rewrite is true when pending prunes were applied at this step; RewriteReason
	// says which condition allowed it ("pending >= 5% of budget", "cache cold",
	// "hard limit").
	// A recall that brings an original back into its slot also changes the bytes
	// sent; it sets Rewrite with RewriteReason "recall" (prefixed "recall; " to the
	// prune reason when both happen at one step).
	Rewrite       bool   `json:"rewrite"`
	RewriteReason string `json:"rewrite_reason,omitempty"`
	Pruned        int    `json:"pruned"`         // outputs newly stubbed at this step
	PendingTokens int    `json:"pending_tokens"` // tokens a rewrite would free, after this step
	Asked         int    `json:"asked"`          // cards sent to the scorer at this step
	// ScorerFailures counts cards that got no score at this step, by failure kind.
	ScorerFailures map[string]int `json:"scorer_failures,omitempty"`
	// StorageError is set when storage failed at this step: nothing new was pruned.
	StorageError string `json:"storage_error,omitempty"`
	// Items lists every tool output, in session order. It is the advisor's own
	// table for the session, updated in place (so a step costs no copy of it): it is
	// complete when Advise returns and valid until the next Advise call for the same
	// session. Use Clone to keep a plan across steps or to read it while another
	// step of the same session may run.
	Items []Item `json:"items"`
}

// Clone returns a deep copy of p that later steps do not change.
func (p Plan) Clone() Plan {
	c := p
	c.Items = append([]Item{}, p.Items...)
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
	RecallID  string  `json:"recall_id"`
	Stub      string  `json:"stub,omitempty"` // the stub text, when pruned
}
