package advisor

import (
	"context"
	"time"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

// Store is what the advisor needs from persistent storage: every capability it
// relies on is here, none is discovered by type assertion, so a wrapper (the
// proxy's record queue) cannot drop one. storage.DB implements it (SQLite or
// PostgreSQL); tests use MemoryStore. Every method is safe for concurrent use.
type Store interface {
	// SavePrunes commits the originals and stubs of one rewrite in one transaction:
	// every original and its stub, or nothing. It must be durable when it returns
	// nil: the advisor applies the stubs only afterwards (docs/DESIGN.md step 7), and a
	// failure leaves no stub at all. An original is stored once by content hash.
	//
	// A stub is stored once per output, first writer wins, atomically across every
	// process sharing the store (proxy replicas advising one session at once): a
	// stub whose text is already stored for its output is a no-op (and does not
	// move the version SessionMark reads); another stub for an output that has one fails the whole
	// call with an error wrapping ErrConflict, storing nothing. The advisor then
	// reads the winner's stubs (SessionStubs) and sends those, so no output ever
	// gets two different stubs.
	SavePrunes(ctx context.Context, prunes []Prune) error
	// RecordAsks stores one row per card scored (or failed to score).
	RecordAsks(ctx context.Context, asks []AskRecord) error
	// RecordDecisions stores the decisions made at one step.
	RecordDecisions(ctx context.Context, ds []DecisionRecord) error
	// RecordSteps stores what steps did (the advisor records one per step): time,
	// context size and rewrite. The time of a session's latest step is what the
	// cache-TTL rule needs after a restart; the rewrites are what the ledger
	// attributes cache writes to.
	RecordSteps(ctx context.Context, steps []StepRecord) error
	// SessionMark returns, in one read, the session's version and its latest
	// advised step. The version is a counter that grows by exactly one for every
	// stub saved and every recall event recorded in the session, by any process
	// sharing the store (0 for a session with neither), counted in the same
	// transaction as the write, so that a reader never sees a stub without its
	// count. The advisor re-reads SessionStubs and SessionRecalls only when it
	// moved by more than its own stubs. The step is the highest step record stored
	// for the session (RecordSteps; 0 for none), by any process: when it is past the
	// last step this advisor advised or read, another process advised steps since,
	// and the advisor reads their asks and latest step record
	// (SessionHistoryBetween) before it advises this one.
	SessionMark(ctx context.Context, sessionID string) (Mark, error)
	// SessionStubs returns the stubs already applied in a session, keyed by output
	// key, so decisions stay frozen across processes and restarts.
	SessionStubs(ctx context.Context, sessionID string) (map[string]StubRecord, error)
	// SessionRecalls returns the recall events of a session, in the order recorded.
	SessionRecalls(ctx context.Context, sessionID string) ([]RecallEvent, error)
	// SessionHistoryBetween returns what later decisions depend on beyond the
	// messages and the stubs, as of the steps before step before (every step for
	// before <= 0): the asks recorded in the session at steps after step after and
	// before step before, in the order made, and its latest step record before step
	// before. An advisor that starts on a session already advised (a restart,
	// another replica) restores scores, ask steps and the back-off from it (after
	// 0), and one that finds steps advised by another process since its own reads
	// their asks (after its last step), so it sends what an advisor that advised
	// every step itself would send. Records of the step being advised and later
	// ones (another process advising the same request at the same moment) are left
	// out: the step is advised as of the steps before it.
	SessionHistoryBetween(ctx context.Context, sessionID string, after, before int) (History, error)
}

// Mark is what one read of a session's counters tells (Store.SessionMark).
type Mark struct {
	// Version counts the session's stubs saved and recall events recorded.
	Version int64
	// Step is the session's latest step with a step record stored, by any process;
	// 0 when none.
	Step int
}

// History is a session's record as SessionHistoryBetween returns it.
type History struct {
	Asks []AskRecord // in the order made (failed asks included)
	// Last is the session's latest step record; zero (Step 0) when none was stored.
	Last StepRecord
}

// StepRecord is what one step did.
type StepRecord struct {
	SessionID string
	Step      int
	At        time.Time // the advisor's clock when the step ran
	// ContextTokens is the context with every applied stub after the step's
	// rewrite; FullTokens the same with nothing pruned.
	ContextTokens, FullTokens int
	// Rewrite is the planner's reason when stubs were applied at this step
	// ("cold-cache", "over-budget", "hard-limit", "pays"), "" when none were.
	Rewrite string
	Pruned  int // outputs stubbed at this step
	// Frees is the tokens the rewrite removed and Suffix the tokens after its first
	// changed message as sent (what the cache writes again).
	Frees, Suffix int
	// CostUSD and SavingUSD are the planner's prices of the rewrite: the cache
	// premium of Suffix, and Frees x cache read x the expected remaining steps.
	CostUSD, SavingUSD float64
	// MaxGrowth is the largest growth of the context, in tokens, from one step to
	// the next over the Config.GrowthSteps steps up to this one (the whole session
	// when 0; the hard limit's margin, Config.HardLimitFor): what a process
	// advising the session's next step continues from, as one step of its window.
	MaxGrowth int
}

// Prune is one output's original and the stub that replaces it.
type Prune struct {
	Original Original
	Stub     StubRecord
}

// Original is a pruned output's original, committed before its stub exists.
type Original struct {
	RecallID  string // "o_" + 10 hex digits (RecallID)
	SessionID string
	OutputKey string // transcript.ToolOutput.Key
	Tool      string
	Summary   string // argument summary
	Text      string // the output text, byte for byte
	Hash      string // hex SHA-256 of Text
	Tokens    int    // o200k_base tokens of Text
	Step      int    // step the output was produced at
}

// StubRecord is an applied stub.
type StubRecord struct {
	RecallID  string
	SessionID string
	OutputKey string
	Stub      string    // the exact stub text sent
	Step      int       // step at which it was applied
	Reason    string    // "superseded", "duplicate", "score", "disposable", "hard-limit"...
	Score     float64   // keep-probability that led to it; -1 for rule decisions
	At        time.Time // wall time (from the advisor's clock)
}

// AskRecord is one card sent to a scorer.
type AskRecord struct {
	SessionID string
	OutputKey string
	Step      int
	CardHash  string  // hex SHA-256 of the card text
	Scorer    string  // scorer name, e.g. "lexical", "ollama:qwen2.5:0.5b"
	Score     float64 // keep-probability; meaningful only when OK
	OK        bool
	FailKind  string        // failure kind when !OK ("timeout", "http", "invalid", "truncated"...)
	Latency   time.Duration // wall time of the whole batch request
	Tokens    int           // scorer prompt tokens attributed to this card (batch total / cards)
	// Signals are the card's facts at this ask (cards.Card.Signals): what
	// `pruneadvisor fit` trains on.
	Signals cards.Signals
}

// DecisionRecord is one output's decision at one step.
type DecisionRecord struct {
	SessionID  string
	OutputKey  string
	Step       int
	Decision   Decision
	Reason     string
	Score      float64 // -1 when not scored
	Superseder string  // call id that made the output dead, for rule decisions
	Tokens     int
}

// RecallEvent is one recall of a pruned output.
type RecallEvent struct {
	RecallID  string
	SessionID string
	OutputKey string
	// Step is the session's latest advised step when the recall happened (0 when
	// unknown): a store given 0 records the latest step it holds for the session
	// (storage.DB, MemoryStore). The advisor applies the recall as of the step after
	// it, so that every process, restarted or not, gives the recall the same step.
	Step int
	At   time.Time
}
