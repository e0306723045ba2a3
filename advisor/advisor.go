// Package advisor is pruneadvisor's per-step pipeline (docs/DESIGN.md "Per-step
// pipeline"): it indexes each new message once, protects what must stay, applies the
// deterministic rules, asks a scorer for keep-probabilities on due cards in one
// batch, and swaps pending prunes for stubs together, only when the rewrite is worth
// a prompt-cache write (package planner). Originals are committed to a Store before any stub exists.
//
// Use it as a library: create one Advisor, then call Advise once per step with the
// session so far (the messages the agent is about to send).
package advisor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/backoff"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/planner"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/transcript"
	"github.com/pruneadvisor/pruneadvisor/wire"
)

// Advisor runs the per-step pipeline for any number of sessions. It is safe for
// concurrent use; calls for one session are serialised.
type Advisor struct {
	// Config is the validated configuration (New validates it). Do not change it after
	// the first Advise call.
	Config Config
	// Scorer gives keep-probabilities. nil, or a cutoff of 0 for it (Config.CutoffFor), means rules
	// only: no candidate is ever scored (nothing is asked), so only rule-dead and
	// disposable outputs are pruned.
	Scorer Scorer
	// Store keeps originals, stubs, asks, decisions and recalls. Required.
	Store Store
	// Logger receives one line per scorer or storage failure kind per session, the
	// first time it happens. Default: slog.Default().
	Logger *slog.Logger
	// Clock gives the time for the cache-TTL rule. Default time.Now.
	Clock func() time.Time
	// RecallSecret keys the recall ids of new stubs (KeyedRecallID), so an id cannot
	// be derived from the session and call ids. Whoever opens the Store sets it to the
	// store's own secret (storage.DB.RecallSecret: 32 random bytes kept in the
	// database), so every process sharing the store makes the same ids. nil (the
	// default) means the unkeyed RecallID. Stubs already stored keep their ids. Do not
	// change it after the first Advise call.
	RecallSecret []byte
	// Background is the plain-word statistics the use history is found under
	// (evidence.Tracker.Background: the later-use evidence's clause Specific).
	// New sets the embedded default model's (fitted.DefaultBackground); a caller
	// scoring with a model file of its own sets that model's. Do not change it
	// after the first Advise call.
	Background *evidence.Background
	// NoRecallTool means the agent has no recall tool (its requests offer none, as a
	// proxy finds): stubs then name none, and say instead how the original can be
	// had (run the call again, or the `pruneadvisor recall` command and the HTTP
	// route; NoRecallHint). Default false: stubs name Config.RecallTool. Do not
	// change it after the first Advise call.
	NoRecallTool bool
	// Asks, when set, runs the scorer off the step's path: Advise hands the due
	// cards to it and returns without waiting, and the scores count from the first
	// step after they came (docs/ARCHITECTURE.md, "Asks off the request path";
	// the rule for late answers is docs/SCORERS.md's). nil (the default) asks on
	// the step's path, as for a scorer that answers in microseconds (fitted,
	// lexical). The proxy sets it for the Ollama scorer. Do not change it after
	// the first Advise call.
	Asks *AskRunner
	// AskLag and AskLatency model a scorer whose answer comes later (replay's
	// --ask-lag and --ask-latency): with either set and Asks nil, an ask is
	// answered at once but its scores count only from the first step at least
	// AskLag steps (at least 1) after the ask whose clock is at least AskLatency
	// after the ask's (the step count alone when a time is unknown), with one ask
	// in flight per session, as with Asks. Zero (the default) for both: the
	// scores count at the step they were asked at. Do not change them after the
	// first Advise call.
	AskLag     int
	AskLatency time.Duration
	// AskMeasured, with Asks nil, models the lag as AskLatency does with each
	// ask's own measured wall time (AskRecord.Latency) as its latency: replay's
	// --ask-latency measured, the default for the Ollama scorer. Default false.
	AskMeasured bool
	// Fallback, when set, ranks the candidates not scored yet when a rewrite is
	// forced by the hard limit (docs/DESIGN.md step 6(c)), which never waits for an
	// ask: an in-process scorer (the fitted one), asked on the step's path for
	// that ranking only. nil (the default) ranks them after every scored one. The
	// proxy sets the fitted scorer when asks run in the background. Do not change
	// it after the first Advise call.
	Fallback Scorer

	schedule backoff.Schedule // Config.Schedule: the recall and re-read windows
	cutoff   float64          // Config.CutoffOf the scorer, fixed at the first step
	asks     backoff.Schedule // Config.ScheduleOf the scorer, fixed with the cutoff
	cutOnce  sync.Once
	mu       sync.Mutex
	sessions map[string]*state
}

// New returns an Advisor for cfg (validated: the error wraps ErrConfig), scoring with
// scorer (nil: rules only) and storing in store (required; use NewMemoryStore for a
// process-local one).
func New(cfg Config, scorer Scorer, store Store) (*Advisor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sched, err := backoff.Parse(cfg.Schedule)
	if err != nil {
		return nil, fmt.Errorf("%w: schedule: %v", ErrConfig, err)
	}
	if store == nil {
		return nil, fmt.Errorf("%w: a store is required (originals are committed before any stub)", ErrConfig)
	}
	return &Advisor{
		Config:     cfg,
		Scorer:     scorer,
		Store:      store,
		Logger:     slog.Default(),
		Clock:      time.Now,
		Background: fitted.DefaultBackground(),
		schedule:   sched,
		sessions:   map[string]*state{},
	}, nil
}

// SessionKey returns the identity the advisor keeps state under: the session's own
// id, else its name.
func SessionKey(s *transcript.Session) string {
	if s.ID != "" {
		return s.ID
	}
	return s.Name
}

// Forget drops the in-memory state of a session (frozen stubs stay in the Store and
// come back on the next Advise).
func (a *Advisor) Forget(sessionID string) {
	a.mu.Lock()
	delete(a.sessions, sessionID)
	a.mu.Unlock()
}

// ForgetTracker drops the in-memory state of a session as Forget does, and hands
// over the evidence Tracker of its use history: every message indexed so far fed
// to it in order (Tracker.Stats().Messages of them, the first of the session) and
// the recalls applied. A caller that holds the whole session (replay) adds the
// messages after those and reads the session's later-use evidence from it, instead
// of running a second Tracker over the session. It returns nil, nil when the
// advisor holds no state for the session, and nil and the Tracker's error when it
// stopped on one (evidence.ErrEvidenceOrder, ErrEvidenceDuplicate: the session's
// steps or output keys are inconsistent).
func (a *Advisor) ForgetTracker(sessionID string) (*evidence.Tracker, error) {
	a.mu.Lock()
	st := a.sessions[sessionID]
	delete(a.sessions, sessionID)
	a.mu.Unlock()
	if st == nil {
		return nil, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.tracker, st.trackErr
}

func (a *Advisor) state(id string) *state {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.sessions[id]
	if !ok {
		st = newState(id, a.Background, a.Config.DigestTokens, a.Config.DigestShare, a.Config.MinCandidateTokens, a.Config.ProtectedSteps)
		st.growth.n = a.Config.GrowthSteps
		a.sessions[id] = st
	}
	return st
}

// Advise runs one step for the session so far: s.Messages are the messages the
// agent is about to send (originals, not stubs), and the step being prepared is the
// number of assistant messages in them plus one. It returns the plan: a decision for
// every tool output, and in Plan.Stubs the stub of every output pruned so far, which
// s.Rewrite puts into the bytes the agent sent (everything else unchanged).
//
// Cost: each message is indexed once, the first time it is seen; a step then costs
// work for the new messages, for the outputs whose state changes at that step, for
// the due asks and for the pending prunes the planner weighs, not for the session's
// length (docs/PERFORMANCE.md). Plan.Items and Plan.Stubs are the advisor's own:
// valid until the next Advise of the same session (Plan.Clone copies them).
//
// Messages already indexed are read again only for the latest one indexed (to
// notice a rewritten history) and for the outputs a rewrite prunes (their text, to
// store the original): a caller that holds a long session may set an indexed
// message to nil once it is not the latest indexed and every output in it is
// Item.Final (replay does, to keep its memory flat).
//
// A client that shortened or rewrote its history resets the session's state; stubs
// already sent and the ask history come back from the Store unchanged, and so does
// a session first seen by this process (a restart, another replica): everything a
// later decision depends on is in the Store. Stubs and recalls written by other
// processes sharing the Store are picked up at every step, and so are the asks and
// step records of steps another process advised (Store.SessionMark tells, with one
// read, whether there are any): a session whose steps several processes advise in
// any order gets the plans and bytes of one advisor that advised every step, when
// the scorer is asked on the step's path (Asks nil; docs/ARCHITECTURE.md,
// "Replicas").
//
// Errors: ErrNoSession for a nil session or nil message; a storage failure is not an
// error (nothing new is pruned and Plan.StorageError says why); a scorer failure is
// not an error (Plan.ScorerFailures counts it); a context error is returned as is.
func (a *Advisor) Advise(ctx context.Context, s *transcript.Session) (Plan, error) {
	if s == nil {
		return Plan{}, ErrNoSession
	}
	if err := ctx.Err(); err != nil {
		return Plan{}, err
	}
	st := a.state(SessionKey(s))
	st.mu.Lock()
	defer st.mu.Unlock()
	return a.step(ctx, st, s)
}

// cutoffNow returns the cutoff of the advisor's scorer (Config.CutoffOf), read
// once.
func (a *Advisor) cutoffNow() float64 {
	a.fixScorer()
	return a.cutoff
}

// askSchedule returns the ask back-off of the advisor's scorer (Config.ScheduleOf),
// read once with the cutoff.
func (a *Advisor) askSchedule() backoff.Schedule {
	a.fixScorer()
	return a.asks
}

// fixScorer reads the cutoff and the ask back-off of the advisor's scorer, once:
// the scorer is known by then (auto's choice included). A schedule Validate let
// through always parses; were it not to, the asks follow Config.Schedule.
func (a *Advisor) fixScorer() {
	a.cutOnce.Do(func() {
		a.cutoff = a.Config.CutoffOf(a.Scorer)
		a.asks = a.schedule
		if sched, err := backoff.Parse(a.Config.ScheduleOf(a.Scorer)); err == nil {
			a.asks = sched
		}
	})
}

// cutoffOf returns the cutoff candidate o is pruned under: the scorer's cutoff
// scaled by o's size (planner.CutoffAt with Config.SizeExponent and
// Config.SizeCapTokens).
func (a *Advisor) cutoffOf(o *outState) float64 {
	return planner.CutoffAt(a.cutoffNow(), o.tokens, a.Config.SizeExponent, a.Config.SizeCapTokens)
}

// priceModel returns the price model for s: Config.Provider's when set, else the
// provider its format implies (ProviderOf).
func (a *Advisor) priceModel(s *transcript.Session) prices.Model {
	p := prices.Provider(a.Config.Provider)
	if p == "" {
		p = ProviderOf(s.Format)
	}
	return a.Config.PriceModel(p)
}

// cacheTTL returns the cache TTL the cold-cache rule uses for s: Config.CacheTTL.
func (a *Advisor) cacheTTL(*transcript.Session, prices.Model) time.Duration {
	return time.Duration(a.Config.CacheTTL)
}

// ProviderOf returns the provider whose prices apply to a session of format f, from
// the one table of wire APIs and formats (wire.ProviderOf): Anthropic for Claude
// Code transcripts and Anthropic Messages bodies, OpenAI for Codex rollouts, Chat
// Completions and Responses bodies and the trajectories recorded in Chat
// Completions' shape (mini-swe-agent, SWE-agent, OpenHands), Gemini for Gemini CLI
// sessions and Gemini API bodies. pi records several providers; its sessions are
// priced as Anthropic, the provider its default model uses. Unknown formats get
// Anthropic.
func ProviderOf(f transcript.Format) prices.Provider { return wire.ProviderOf(f) }
