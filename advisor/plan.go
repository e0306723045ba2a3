package advisor

import (
	"context"

	"github.com/pruneadvisor/pruneadvisor/cards"
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
