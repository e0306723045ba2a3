// Package replay runs the advisor over old sessions, step by step as if live
// (docs/DESIGN.md "Replay and later-use evidence"), and finds later-use evidence
// (evidence.go). Replay records what calibration and back-off tuning need: every
// ask and decision the advisor made, the evidence of every output's later use, and
// per-output and per-step facts (Record). The replay command stores Records through
// a Sink (storage.DB implements it); the calibrate, fit and backoff commands read
// them back, and package tuning turns them into calibrate records, training rows
// and schedule comparisons. This package only replays: it imports neither
// calibrate nor tuning.
//
// Replay never writes originals or stubs: a pruned output's original is the
// session file itself. It runs the advisor with an in-memory store, and with a
// clock that reads the transcript's timestamps (CallTimes): a gap longer than the
// cache TTL makes the cache cold there, as it was for the agent; sessions without
// timestamps are priced warm throughout (Record.Times says which). It writes each
// session's rows in one transaction when the session is finished, so an
// interrupted replay loses nothing already committed and leaves no partial session
// behind.
package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Version identifies what a replay records and how (the replay driver, the
// evidence definition, the facts). It is part of every settings hash, so a stored
// replay made by a program with another Version is replayed again, not reused.
// Change it whenever a change to this package would change stored rows.
//
// replay-5: later-use evidence that means use (specific names, whole tokens,
// latest carrier, re-reads and reruns not uses; evidence package), labelled under
// the word statistics Settings.Words names. replay-6: each session's advisor takes
// its hard limit from the session's agent (advisor.AgentOf its format) when the
// config names none. replay-7: each use records whether the output's head and tail
// (Gemini CLI's masking preview) hold it (evidence.Use.Preview). replay-9: recall
// ids are 12 decimal digits (advisor.RecallIDDigits), which every stub counts as the
// same number of tokens, so the advisor's rewrites no longer vary with the id.
// replay-10: a card's live names include those of the outputs its call made dead
// (advisor's liveNames), whose later uses the label credits to it. replay-12: no
// use is credited to an output a compaction recorded in the transcript dropped
// (evidence clause In context, transcript.Message.CompactionKept). replay-13: each
// step records the agent's own compaction the transcript records before it
// (StepFacts.CompactionDropped, CompactionSummary), through which calibrate replays every
// pruner, and the replay's advisor counts its context from the tail such a
// compaction kept and prunes nothing before it (as after a provider's
// compaction). replay-14: each use records the least digest budget that holds
// each of its names and how many of them the head and tail hold
// (evidence.Use.NameDigests, NamesPreviewed), for the digest coverage per name.
// replay-15: each output records what its stub's digest costs by budget
// (OutputFacts.DigestLive: the names still live protected_steps after it), so
// that a stub is priced with the digest Use.Digest measures, not the bound
// min(B, DigestTokens). replay-16: a digest's names are joined by spaces and each
// costs its real o200k tokens (evidence.DigestNameTokens), not 1 + len/4 rounded
// up with a comma: the same budget holds more names, ordered by specificity over
// the square of their real tokens. replay-17: token counts are exact on long
// lines (tokencount counts the pre-split pieces of the whole text), and a quoted
// string that is one compound run is one compound with the run inside it
// (evidence.Names): a backquoted path gets one digest candidate.
const Version = "replay-17"

// Sentinel errors returned (wrapped) by this package besides the evidence ones.
var (
	// ErrNotSession means a file is not a session transcript any reader knows.
	ErrNotSession = errors.New("not a session file")
	// ErrChanged means a session file's content no longer matches the content hash
	// stored when it was replayed.
	ErrChanged = errors.New("session file changed since it was replayed")
	// ErrSettings means replay settings are invalid (bad advisor config).
	ErrSettings = errors.New("invalid replay settings")
)

// Settings is everything a replay's stored rows depend on besides the session
// file's bytes. Its Hash, with the file's content hash, identifies a replay.
type Settings struct {
	Version string         `json:"version"` // Version
	Config  advisor.Config `json:"config"`  // the advisor configuration
	// Scorer is the scorer's name as recorded with every ask ("lexical",
	// "ollama:qwen2.5:0.5b:p1"), "none" for rules only.
	Scorer string `json:"scorer"`
	// Lenient: malformed lines are skipped (counted in Record.Skipped) instead of
	// failing the session.
	Lenient bool `json:"lenient"`
	// Words is the Digest of the plain-word statistics the later-use evidence was
	// found under (evidence.Background; Replayer.Background).
	Words string `json:"words"`
	// AskLag and AskLatency are the modelled lag of the scorer's answers
	// (Replayer.AskLag, Replayer.AskLatency): absent when the scores counted at
	// the step they were asked at, so the settings of replays made before the lag
	// existed hash as they did.
	AskLag     int    `json:"ask_lag,omitempty"`
	AskLatency string `json:"ask_latency,omitempty"`
}

// ScorerNone is Settings.Scorer when no scorer is used (rules only).
const ScorerNone = "none"

// Hash returns the hex SHA-256 of the settings' JSON encoding (fields in
// declaration order, so the same settings always give the same hash). Settings
// that do not encode (a NaN in an unvalidated config) hash their Go syntax
// representation instead.
func (s Settings) Hash() string {
	data, err := json.Marshal(s)
	if err != nil {
		data = []byte(fmt.Sprintf("%#v", s))
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// JSON returns the settings' JSON encoding, as stored beside the hash.
func (s Settings) JSON() string {
	data, _ := json.Marshal(s)
	return string(data)
}

// ParseSettings reads settings stored by JSON. Fields the text lacks keep their
// zero value, except Config, which starts from advisor.DefaultConfig.
func ParseSettings(text string) (Settings, error) {
	s := Settings{Config: advisor.DefaultConfig()}
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return s, fmt.Errorf("%w: parsing stored settings: %v", ErrSettings, err)
	}
	return s, nil
}

// SessionID returns the id a replay stores a session under: "replay-" and the
// first 20 hex digits of SHA-256(contentHash ":" settingsHash). It differs for
// every (content, settings) pair, so the frozen stubs, asks and decisions of one
// replay never mix with another's, and two files with the same bytes share it.
func SessionID(contentHash, settingsHash string) string {
	sum := sha256.Sum256([]byte(contentHash + ":" + settingsHash))
	return "replay-" + hex.EncodeToString(sum[:])[:20]
}

// Record is one session's replay: what the advisor did at every step and what
// the agent did afterwards.
type Record struct {
	ID           string            // SessionID(ContentHash, SettingsHash)
	Path         string            // the session file as given (absolute when found by a walk)
	Name         string            // display name: the file's base name
	Format       transcript.Format // the format the reader detected
	ContentHash  string            // hex SHA-256 of the file's bytes
	Settings     Settings
	SettingsHash string // Settings.Hash()
	// Steps is the number of steps (assistant messages): the session's last step,
	// EndStep of every output. The advisor ran once before each of them.
	Steps   int
	Skipped int // malformed lines skipped (lenient reading)
	// Outputs holds one entry per tool output, in session order.
	Outputs []OutputFacts
	// StepFacts[t-1] describes step t, for t = 1..Steps.
	StepFacts []StepFacts
	// Asks and Decisions are the advisor's records, in the order it made them.
	// Ask Tokens are filled by the replay when the advisor leaves them 0 (see
	// Replayer.Replay).
	Asks      []advisor.AskRecord
	Decisions []advisor.DecisionRecord
	// Evidence holds every later use the Tracker found, counting or not (Use.Counts),
	// with session-wide weights, ordered by output (session order) then step.
	Evidence []evidence.Use
	// Provider is the provider whose prices apply to the session: the advisor
	// config's, else the one its format implies (advisor.ProviderOf).
	Provider prices.Provider
	// Times counts the steps whose call time the transcript does not give, or gives
	// wrongly (TimeStats); those steps are priced warm.
	Times TimeStats
	// Started and Finished bound the replay in wall time; Duration is their
	// difference. They are the only fields that differ between two replays of the
	// same file with the same settings (with ask latencies).
	Started, Finished time.Time
}

// Duration is the wall time the replay took.
func (r *Record) Duration() time.Duration { return r.Finished.Sub(r.Started) }

// OutputFacts are the per-output facts calibration needs. Steps are advisor steps;
// 0 means never.
type OutputFacts struct {
	Key     string // transcript.ToolOutput.Key
	Tool    string
	Summary string
	Tokens  int // o200k_base tokens of the output text
	Step    int // step of the call that produced it; visible from Step+1
	// CandidateFrom is the first step at which the advisor did not protect the
	// output (old enough, large enough, not excluded): it could be pruned from then.
	CandidateFrom int
	// RuleDeadAt is the first step at which a rule (superseded read, duplicate)
	// made the output a pending prune.
	RuleDeadAt int
	// RuleBy is the id of the call whose output made it dead (its content is in
	// context again there); "" when no rule applied.
	RuleBy string
	// PendingAt is the first step at which the output was a pending prune, by a rule
	// or by a score under the cutoff.
	PendingAt int
	// PrunedAt is the step at which the output's stub was applied (a rewrite).
	PrunedAt int
	EndStep  int // the session's last step (Record.Steps)
	// Offset is the number of tokens before the output's message in the session as
	// sent with nothing pruned: a rewrite whose first changed message is this one
	// writes the cache again from here on.
	Offset int
	// StubTokens is the size of the output's stub (one like the advisor's:
	// advisor.StubTokens, plus its digest: DigestCost of the digest budget,
	// advisor.DigestBudget); 0 for an output that could never be pruned.
	StubTokens int
	// DigestTokens is the cost, in digest tokens, of the output's whole digest
	// (evidence.Tracker.DigestFull): a stub digest of budget B holds at most
	// min(B, DigestTokens) tokens of names.
	DigestTokens int
	// DigestLive is what the digest of a stub made protected_steps steps after
	// the output costs by budget: 0, then the cumulative costs, in digest tokens,
	// of the names that stub holds (evidence.Tracker.DigestLive: its kept names
	// still live then), ascending; the stub Use.Digest measures. nil for an
	// output without a digest, and in records from before replay-15 (DigestCost
	// then falls back to the bound min(B, DigestTokens)).
	DigestLive []int
}

// DigestCost returns the cost, in digest tokens, of the digest a stub of budget
// b tokens holds for the output: the last of DigestLive within b (a digest holds
// whole names); min(b, DigestTokens) when DigestLive is nil (a bound: records
// before replay-15 priced every stub so).
func (f *OutputFacts) DigestCost(b int) int {
	if f.DigestLive == nil {
		return max(0, min(b, f.DigestTokens))
	}
	c := 0
	for _, x := range f.DigestLive {
		if x > b {
			break
		}
		c = x
	}
	return c
}

// StepFacts describe one step of a replay.
type StepFacts struct {
	Step int
	// ContextTokens is the size, in tokens, of the messages before model call Step
	// with nothing pruned (the sum of transcript.Message.Tokens), the whole history
	// through the compactions it records (CompactionDropped says what they dropped).
	ContextTokens int
	// AppliedTokens is the same with the stubs applied, after this step's rewrite;
	// ContextTokens - AppliedTokens is what the stubs save at this call.
	AppliedTokens int
	Asked         int  // cards sent to the scorer at this step
	OverBudget    bool // the context with earlier stubs was over the budget
	Rewrite       bool // stubs were applied at this step
	// RewriteReason is the planner's reason for the rewrite ("" without one).
	RewriteReason string
	// At is the time of model call Step as the transcript gives it (CallTimes);
	// zero when it does not.
	At time.Time
	// Cold reports that the prompt cache had expired before call Step: more than
	// the cache TTL passed since the previous call (both times known).
	Cold bool
	// Prompt reports that a user prompt (a user message with words of its own,
	// not tool results, not injected context) came since the previous model
	// call: call Step starts a turn. An agent that checks its compaction point
	// only between turns (pi) counts at these calls (calibrate.Calls.TurnStart).
	// False at every step of a replay stored before it was recorded.
	Prompt bool
	// CompactionDropped is, when the transcript records a compaction since the
	// previous model call that drops more of the history than any before it (the
	// agent's own, transcript.Message.AgentCompaction, or a provider's compaction
	// block or item, Message.Compaction), the tokens of the messages before what it
	// kept (the agent's kept tail, or the provider's compaction message on),
	// counted as in ContextTokens (nothing pruned, the whole history): call Step
	// went out, or was billed, without them. CompactionSummary is the compaction's
	// message, in tokens. Both 0 when no such compaction came, when it kept every
	// message, and in replays stored before replay-13; calibrate replays every
	// pruner through it (calibrate.Calls.Recorded).
	CompactionDropped, CompactionSummary int
}

// TimeStats counts the steps of a session whose call time is missing (no
// timestamp on any message up to the call), unordered (before the previous call's
// time) or in the future (after the replay ran). Each such step is priced warm.
type TimeStats struct {
	Missing   int `json:"missing,omitempty"`
	Unordered int `json:"unordered,omitempty"`
	Future    int `json:"future,omitempty"`
}

// Bad returns the number of steps counted.
func (t TimeStats) Bad() int { return t.Missing + t.Unordered + t.Future }

// AppliedSteps returns, for each of r's outputs in order, the step at which the
// advisor's stub was applied (OutputFacts.PrunedAt; 0 = never): what the advisor
// really did, for calibrate.Evaluator.Applied.
func (r *Record) AppliedSteps() []int {
	out := make([]int, len(r.Outputs))
	for i, f := range r.Outputs {
		out[i] = f.PrunedAt
	}
	return out
}

// Agent returns the agent of r's session: the config's Agent when set, else the
// one its format names (advisor.AgentOf); the agent the replay's advisor took its
// hard limit from.
func (r *Record) Agent() string {
	if a := r.Settings.Config.Agent; a != "" {
		return a
	}
	return advisor.AgentOf(r.Format)
}

// StubDigest returns the tokens of the stub the advisor with cfg gives output f
// without its digest (advisor.StubTokens; 0 for an output never stubbed: neither
// a candidate nor rule-dead) and the digest budget that stub has when the
// configured budget is b tokens (advisor.DigestBudget, StubMaxShare applied): 0
// for an output that is never a candidate or that the rules kill, whose stub has
// no digest (its content is in context again). The one rule the replay's stub
// sizes (OutputFacts.StubTokens), the calibrate records of another digest budget
// and the digest coverage (package tuning) share. share is the digest share the
// budget grows to on a long output (advisor.Config.DigestShare; 0: b for every
// output).
func StubDigest(cfg advisor.Config, f *OutputFacts, b int, share float64) (base, budget int) {
	if f.CandidateFrom == 0 && f.RuleDeadAt == 0 {
		return 0, 0
	}
	base = advisor.StubTokens(cfg, f.Tool, f.Summary, f.Tokens)
	if f.CandidateFrom == 0 || f.RuleDeadAt > 0 {
		return base, 0
	}
	cfg.DigestTokens, cfg.DigestShare = b, share
	return base, advisor.DigestBudget(cfg, base, f.Tokens)
}

// StubTokensAt returns the tokens of output f's stub when the digest budget is b
// tokens (growing to share of a long output) under the replay's config cfg, and
// that stub's digest budget (StubDigest's): StubDigest's stub without a digest
// plus the digest it holds within its budget, DigestCost. Past the names the
// replay's tracker kept (evidence.DigestKeep x the output's budget under cfg,
// evidence.DigestBudgetFor) no record says which are live, so the digest is
// priced at the bound min(budget, DigestTokens) there. 0, 0 for an output never
// stubbed.
func StubTokensAt(cfg advisor.Config, f *OutputFacts, b int, share float64) (stub, budget int) {
	base, budget := StubDigest(cfg, f, b, share)
	if budget > evidence.DigestKeep*evidence.DigestBudgetFor(f.Tokens, cfg.DigestTokens, cfg.DigestShare) {
		return base + min(budget, f.DigestTokens), budget
	}
	return base + f.DigestCost(budget), budget
}

// SavedTokenSteps returns the token-steps the applied stubs saved over the session:
// the sum over steps of ContextTokens - AppliedTokens.
func (r *Record) SavedTokenSteps() int64 {
	var n int64
	for _, s := range r.StepFacts {
		n += int64(s.ContextTokens - s.AppliedTokens)
	}
	return n
}
