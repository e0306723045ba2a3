package advisor

import (
	"context"
	"time"
)

// Store is what the advisor needs from persistent storage. storage.DB implements it;
// tests use an in-memory fake. Every method is safe for concurrent use.
type Store interface {
	// SaveOriginal commits an output's original text (stored once by content hash)
	// and the record linking it to its session and recall id. It must be durable when
	// it returns nil: the advisor creates the stub only afterwards (DESIGN.md step 7).
	SaveOriginal(ctx context.Context, o Original) error
	// SaveStub records the stub that replaced an output, once, when it is applied.
	SaveStub(ctx context.Context, s StubRecord) error
	// RecordAsks stores one row per card scored (or failed to score).
	RecordAsks(ctx context.Context, asks []AskRecord) error
	// RecordDecisions stores the decisions made at one step.
	RecordDecisions(ctx context.Context, ds []DecisionRecord) error
	// SessionStubs returns the stubs already applied in a session, keyed by output
	// key, so decisions stay frozen across processes (the proxy).
	SessionStubs(ctx context.Context, sessionID string) (map[string]StubRecord, error)
	// SessionRecalls returns the recall events of a session (output key -> steps).
	SessionRecalls(ctx context.Context, sessionID string) ([]RecallEvent, error)
}

// VersionedStore is an optional extension of Store that lets the advisor notice
// cheaply whether another process (or a recall) touched a session. SessionVersion
// returns a counter that grows by exactly one for every SaveStub and every recall
// event recorded in the session, by any process sharing the store (0 for a session
// with neither). An Advisor whose Store implements it re-reads SessionStubs and
// SessionRecalls only when the version moved by more than its own stubs since its
// last read; with a plain Store it re-reads both at every step (correct, but the
// cost grows with the number of stubs in the session).
type VersionedStore interface {
	Store
	SessionVersion(ctx context.Context, sessionID string) (int64, error)
}

// PruneStore is an optional extension of Store that commits the originals and stubs
// of one rewrite in a single transaction: every original and its stub, or nothing.
// An original is still in the store before (in the same commit as) its stub, and a
// failure leaves no stub at all. An Advisor whose Store implements it makes one
// commit per rewrite instead of two per pruned output (storage.DB implements it).
type PruneStore interface {
	Store
	SavePrunes(ctx context.Context, prunes []Prune) error
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
	Step      int // the session's step when recalled (0 when unknown)
	At        time.Time
}
