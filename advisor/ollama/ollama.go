// Package ollama is the small-model scorer (docs/DESIGN.md step 5): the due cards go to
// a local Ollama server in non-streaming /api/chat requests whose `format` is a
// JSON schema with one required integer 0-100 property per card ("c1".."cN"), and
// the answer, validated strictly, gives each card's keep-probability value/100.
//
// A batch is cut into requests that fit the model's context (by an estimate, and
// by the server's own refusal: `truncate: false`) and that should each finish in
// about half the per-request Timeout at the measured time per card.
//
// Any failure — timeout, unreachable server, HTTP error, truncated or invalid
// answer — is "no score" for the whole batch: every Score is not OK and the error
// wraps one of the sentinel errors below (FailKind names it for counting). Wire
// facts the request and the validation rely on are in
// /work/shared/docs/OLLAMA-WIRE.md (Ollama 0.17.4).
package ollama

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/pruneadvisor/pruneadvisor/cards"
)

// Failure is the type of the sentinel errors below: Kind names the failure kind for
// counting (advisor.FailKind looks for a Kind() string method along the chain).
type Failure struct {
	kind, msg string
}

// Error returns the sentinel's message.
func (f *Failure) Error() string { return f.msg }

// Kind returns the failure kind: "timeout", "canceled", "unreachable", "http",
// "not_pulled", "truncated", "invalid" or "too_large".
func (f *Failure) Kind() string { return f.kind }

// Failure kinds. Every error Score, Ping and CheckModel return wraps exactly one
// of them.
var (
	// ErrTimeout: no complete answer before the per-request deadline (Scorer.Timeout)
	// or the caller's deadline.
	ErrTimeout error = &Failure{"timeout", "ollama: timeout"}
	// ErrCanceled: the caller canceled the context.
	ErrCanceled error = &Failure{"canceled", "ollama: canceled"}
	// ErrUnreachable: the connection was refused, reset, or closed before a complete
	// answer arrived.
	ErrUnreachable error = &Failure{"unreachable", "ollama: server unreachable"}
	// ErrHTTP: the server answered with an error status (4xx/5xx) or an in-band
	// {"error": …} line; the message includes the status and the server's text
	// (a killed runner: `HTTP 500: model runner has unexpectedly stopped, …`).
	ErrHTTP error = &Failure{"http", "ollama: server error"}
	// ErrNotPulled: the server does not have the model (HTTP 404 `model 'x' not
	// found`, from /api/chat or /api/show); the message says `ollama pull x`.
	ErrNotPulled error = &Failure{"not_pulled", "ollama: no such model"}
	// ErrTruncated: the answer stopped early: "done" was not true (Ollama stops a
	// repeating generation, or a thinking model with `think` absent, and still
	// answers 200, with no done_reason), or done_reason was "length" (num_predict
	// reached).
	ErrTruncated error = &Failure{"truncated", "ollama: answer truncated"}
	// ErrInvalidAnswer: the answer was not a JSON object holding every card id
	// exactly once, no other key, and integer values 0-100.
	ErrInvalidAnswer error = &Failure{"invalid", "ollama: invalid answer"}
	// ErrTooLarge: the request does not fit the model's context: by the estimate
	// (Fits), or the server said so (HTTP 400 "the input length exceeds the context
	// length" under `truncate: false`; prompt_eval_count reaching num_ctx, a prompt
	// the server cut; done_reason "length" with the context full). Score splits
	// the batch on it and returns it only for a single cut-down card.
	ErrTooLarge error = &Failure{"too_large", "ollama: card does not fit the context window"}
)

// FailKind names the failure kind of an error from Score, Ping or CheckModel, for
// counting: "timeout", "canceled", "unreachable", "http", "not_pulled",
// "truncated", "invalid", "too_large" (the Kind of the *Failure it wraps); "" for
// nil and "other" for an error wrapping no *Failure.
func FailKind(err error) string {
	if err == nil {
		return ""
	}
	var f *Failure
	if errors.As(err, &f) {
		return f.Kind()
	}
	return "other"
}

// Defaults for the Scorer's option fields.
const (
	DefaultModel     = "qwen2.5:0.5b"   // small, fast on CPU, follows a JSON grammar
	DefaultNumCtx    = 8192             // tokens; fixed, since changing num_ctx between requests reloads the model (OLLAMA-WIRE.md)
	DefaultTimeout   = 60 * time.Second // per request; api.Client has no timeout of its own (OLLAMA-WIRE.md)
	DefaultKeepAlive = 2 * time.Minute  // how long the server keeps the model loaded after a request
	DefaultSeed      = 42               // any fixed value; -1 would ask the server for a random seed
	// DefaultCardTime is the first guess of the wall time one card adds to a
	// request, until a request has been measured. OLLAMA-WIRE.md measured about
	// 30 ms per generated token under the grammar and 13-23 tokens per card with a
	// 40 MB model on 2 cores (0.51 s per card in a 100-card request); a 0.5B model
	// is slower per token, so the guess is rounded up to 1 s.
	DefaultCardTime = time.Second
)

// RequestTimeShare is the share of Timeout one request is planned to take at the
// measured time per card: a batch is cut into requests of at most
// floor(RequestTimeShare · Timeout / card time) cards (at least 1), so a request
// twice as slow as the last one measured still finishes in time.
const RequestTimeShare = 0.5

// Token estimate constants (see Fits). The prompt is counted with o200k_base
// (tokencount.Count), not the model's own tokenizer; the margin covers the
// usual difference (English and code: 660 estimated, 639 real on average,
// OLLAMA-WIRE.md). Where the model needs far more (6 Tamil cards: 1,917 o200k
// tokens, 4,582 real) the server refuses the request and Score splits it.
const (
	// TokenMargin multiplies the counted prompt tokens.
	TokenMargin = 1.10
	// TemplateTokens is added per request for the chat template's role markers
	// (qwen2.5: "<|im_start|>system\n", "<|im_end|>\n", …, about 5 per message).
	TemplateTokens = 32
)

// Cut-down card sizes, in characters, for a single card that does not fit NumCtx
// next to the prompt: it is sent once more with these limits before giving up with
// ErrTooLarge.
const (
	ShrunkArgsChars     = 80
	ShrunkHeadChars     = 120
	ShrunkReactionChars = 80
)

// Scorer asks an Ollama server for keep-probabilities. Set option fields before the
// first Score; a Scorer is then safe for concurrent use. A zero or negative option
// field means its default.
type Scorer struct {
	// Model is the Ollama model name. Default DefaultModel ("qwen2.5:0.5b").
	Model string
	// Prompt is the prompt version, PromptV1 ("p1") or PromptV2 ("p2"); it is the
	// last part of Name. Default DefaultPrompt (PromptV2). Score fails on any other
	// value.
	Prompt string
	// NumCtx is the context window requested from the server, in tokens (option
	// num_ctx). Batches that would not fit are split. Default DefaultNumCtx (8192).
	NumCtx int
	// NumPredict caps the answer, in tokens (option num_predict). 0 means automatic:
	// AnswerTokens of the request's keys.
	NumPredict int
	// Timeout bounds each request (context deadline on every call; api.Client has
	// none). Default DefaultTimeout (60 s).
	Timeout time.Duration
	// CardTime is the first guess of the wall time one card adds to a request,
	// used to cut batches (RequestTimeShare) until a request has been measured.
	// Default DefaultCardTime (1 s).
	CardTime time.Duration
	// KeepAlive is how long the server keeps the model loaded after a request
	// (keep_alive). Default DefaultKeepAlive (2 minutes).
	KeepAlive time.Duration
	// Seed is the sampling seed (option seed); with temperature 0 it only matters
	// for ties. Default DefaultSeed; the zero value also means the default.
	Seed int
	// Logger receives one Debug line per request (cards, estimated prompt tokens,
	// the server's token counts and durations) and one per split. Default: discard.
	// Failures are returned, not logged.
	Logger *slog.Logger

	client *api.Client
	// cardNanos is the measured wall time per card, in nanoseconds, of the latest
	// request (0: none measured yet): (wall time − load_duration) / cards for an
	// answer, raised to Timeout / cards by a timeout.
	cardNanos atomic.Int64
}

// New returns a scorer that talks to client (for example api.ClientFromEnvironment(),
// which honours OLLAMA_HOST) using model ("" means DefaultModel). Other options take
// their defaults; change the fields before the first Score.
func New(client *api.Client, model string) *Scorer {
	if model == "" {
		model = DefaultModel
	}
	return &Scorer{
		Model:     model,
		Prompt:    DefaultPrompt,
		NumCtx:    DefaultNumCtx,
		Timeout:   DefaultTimeout,
		CardTime:  DefaultCardTime,
		KeepAlive: DefaultKeepAlive,
		Seed:      DefaultSeed,
		client:    client,
	}
}

func (s *Scorer) model() string  { return cmpOr(s.Model, DefaultModel) }
func (s *Scorer) prompt() string { return cmpOr(s.Prompt, DefaultPrompt) }
func (s *Scorer) numCtx() int    { return positiveOr(s.NumCtx, DefaultNumCtx) }
func (s *Scorer) timeout() time.Duration {
	return positiveOr(s.Timeout, DefaultTimeout)
}
func (s *Scorer) keepAlive() time.Duration {
	return positiveOr(s.KeepAlive, DefaultKeepAlive)
}
func (s *Scorer) seed() int { return cmpOr(s.Seed, DefaultSeed) }
func (s *Scorer) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// numPredict returns the answer cap for a request with keys, in tokens.
func (s *Scorer) numPredict(keys []string) int {
	if s.NumPredict > 0 {
		return s.NumPredict
	}
	return AnswerTokens(keys)
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Name identifies the scorer in the store and in logs: "ollama:MODEL:PROMPT", e.g.
// "ollama:qwen2.5:0.5b:p2" (ParseName splits it).
func (s *Scorer) Name() string { return "ollama:" + s.model() + ":" + s.prompt() }

// CardTimeEstimate returns the wall time per card Score plans with: the latest measured
// one, or Scorer.CardTime (DefaultCardTime) before any request was measured.
func (s *Scorer) CardTimeEstimate() time.Duration {
	if n := s.cardNanos.Load(); n > 0 {
		return time.Duration(n)
	}
	return positiveOr(s.CardTime, DefaultCardTime)
}

// CardsPerRequest returns the most cards Score puts in one request by time:
// floor(RequestTimeShare · Timeout / CardTimeEstimate()), at least 1. A request
// may hold fewer when the cards do not fit NumCtx.
func (s *Scorer) CardsPerRequest() int {
	per := s.CardTimeEstimate()
	return max(1, int(RequestTimeShare*float64(s.timeout())/float64(per)))
}

// measured records the wall time of a request of n cards (load time excluded).
func (s *Scorer) measured(wall time.Duration, n int) {
	if n > 0 && wall > 0 {
		s.cardNanos.Store(max(int64(wall)/int64(n), 1))
	}
}

// timedOut raises the time per card after a request of n cards got no answer
// within Timeout: each card took at least Timeout/n.
func (s *Scorer) timedOut(n int) {
	if floor := s.timeout() / time.Duration(max(n, 1)); floor > s.CardTimeEstimate() {
		s.cardNanos.Store(int64(floor))
	}
}

// Score asks for a keep-probability per card. The batch is cut, in order, into
// requests of at most CardsPerRequest cards (by time); each goes through fit:
// a request that does not fit NumCtx by the estimate (Fits), or that the server
// refuses or cuts (ErrTooLarge: HTTP 400 "the input length exceeds the context
// length", prompt_eval_count reaching num_ctx, done_reason "length" with the
// context full), is split in halves, recursively (ids restart at c1 in every
// request). A single card that does not fit is sent cut down (args, head and
// reaction to ShrunkArgsChars, ShrunkHeadChars, ShrunkReactionChars characters,
// no tail); if that does not fit either, the batch fails with ErrTooLarge. The
// first failing request stops the batch: every Score is then not OK and the error
// wraps one of the failure kinds (see FailKind). On success every Score is OK with
// Keep = value/100.
func (s *Scorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	out := make([]cards.Score, len(b.Cards))
	for start := 0; start < len(b.Cards); {
		end := min(len(b.Cards), start+s.CardsPerRequest())
		if err := s.fit(ctx, b, b.Cards[start:end], out[start:end], false); err != nil {
			clear(out)
			return out, fmt.Errorf("scoring %d cards with %s: %w", len(b.Cards), s.Name(), err)
		}
		start = end
	}
	return out, nil
}

// fit scores cs into out with one request, or splits them when they do not fit
// (see Score); shrunk marks a single card already cut down.
func (s *Scorer) fit(ctx context.Context, b cards.Batch, cs []cards.Card, out []cards.Score, shrunk bool) error {
	p, err := s.render(b, cs)
	if err != nil {
		return err
	}
	if s.fits(p) {
		var vals []int
		vals, err = s.ask(ctx, p)
		if err == nil {
			for i, v := range vals {
				out[i] = cards.Score{Keep: float64(v) / 100, OK: true}
			}
			return nil
		}
		if !errors.Is(err, ErrTooLarge) {
			return err
		}
		s.logger().Debug("ollama: the server found the request too large", "cards", len(cs), "err", err)
	} else {
		err = fmt.Errorf("%w: about %d tokens with the prompt, num_ctx is %d", ErrTooLarge, s.estimate(p), s.numCtx())
	}
	switch {
	case len(cs) > 1:
		half := len(cs) / 2
		s.logger().Debug("ollama: batch too large for num_ctx, splitting",
			"cards", len(cs), "estimated_tokens", s.estimate(p), "num_ctx", s.numCtx())
		if err := s.fit(ctx, b, cs[:half], out[:half], false); err != nil {
			return err
		}
		return s.fit(ctx, b, cs[half:], out[half:], false)
	case !shrunk:
		return s.fit(ctx, b, []cards.Card{shrink(cs[0])}, out, true)
	}
	return fmt.Errorf("card %s, cut down: %w", cs[0].ID, err)
}

// shrink cuts a card's free-text fields for a card that alone does not fit.
func shrink(c cards.Card) cards.Card {
	c.Args = cards.Cut(c.Args, ShrunkArgsChars)
	c.Head = cards.Cut(c.Head, ShrunkHeadChars)
	c.Tail = ""
	c.Reaction = cards.Cut(c.Reaction, ShrunkReactionChars)
	return c
}
