// Package auto picks the scorer (docs/DESIGN.md, "The embedded default"): the Ollama
// scorer when an Ollama server answers /api/version within PingTimeout and has the
// model (/api/show), otherwise a fallback scorer that needs no model (the caller's
// choice: the CLI passes the fitted scorer), so the advisor works with no model at
// all. Fuse combines a model scorer with the fitted one (fuse.go). The choice is made once, in New, and said
// once through the logger.
package auto

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/cards"
)

// PingTimeout bounds each probe (/api/version, then /api/show): a local server
// answers in milliseconds, and a user with no Ollama should not wait for a model
// that is not there.
const PingTimeout = 2 * time.Second

// Fallback is the scorer used when Ollama or its model is not there.
type Fallback struct {
	// Scorer is the fallback scorer; required.
	Scorer advisor.Scorer
	// Label names it in the line New logs, e.g. "the lexical scorer"; "" means
	// "scorer " + Scorer.Name().
	Label string
}

func (f Fallback) label() string {
	if f.Label != "" {
		return f.Label
	}
	return "scorer " + f.Scorer.Name()
}

// Scorer is the chosen scorer. Exactly one of Ollama and Fallback is set.
type Scorer struct {
	// Ollama is the model scorer when the server answered and has the model; nil
	// when the fallback was chosen.
	Ollama *ollama.Scorer
	// Fallback is the fallback scorer when it was chosen; nil otherwise.
	Fallback advisor.Scorer
	// Why is the one line logged at the choice, e.g. "scorer
	// ollama:qwen2.5:0.5b:p2 (Ollama 0.17.4)", "Ollama not reachable (…); using
	// the lexical scorer" or "model qwen2.5:0.5b is not pulled: ollama pull
	// qwen2.5:0.5b; using the lexical scorer".
	Why string
}

// New probes the server behind o (configured by the caller: client, model,
// prompt, timeouts) with GET /api/version and then POST /api/show for o's model,
// each bounded by PingTimeout and by ctx. If both answer, the choice is o;
// otherwise fallback.Scorer, which must not be nil. The choice is logged once on
// logger (nil: discarded): at Info for Ollama, at Warn for the fallback, with the
// failure kind ("unreachable", "timeout", "not_pulled", …) and the error.
func New(ctx context.Context, o *ollama.Scorer, fallback Fallback, logger *slog.Logger) *Scorer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	version, err := probe(ctx, o.Version)
	if err == nil {
		_, err = probe(ctx, func(ctx context.Context) (string, error) { return "", o.CheckModel(ctx) })
		if err == nil {
			s := &Scorer{Ollama: o, Why: fmt.Sprintf("scorer %s (Ollama %s)", o.Name(), version)}
			logger.Info(s.Why, "scorer", o.Name(), "ollama_version", version)
			return s
		}
	}
	s := &Scorer{Fallback: fallback.Scorer}
	model := cmp.Or(o.Model, ollama.DefaultModel)
	switch {
	case errors.Is(err, ollama.ErrNotPulled):
		s.Why = fmt.Sprintf("model %s is not pulled: ollama pull %s; using %s", model, model, fallback.label())
	case version != "":
		s.Why = fmt.Sprintf("Ollama %s cannot say whether model %s is there (%v); using %s", version, model, err, fallback.label())
	default:
		s.Why = fmt.Sprintf("Ollama not reachable (%v); using %s", err, fallback.label())
	}
	logger.Warn(s.Why, "scorer", fallback.Scorer.Name(), "kind", ollama.FailKind(err))
	return s
}

// probe runs one probe under PingTimeout.
func probe(ctx context.Context, f func(context.Context) (string, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	return f(ctx)
}

// Name is the chosen scorer's name: "ollama:MODEL:PROMPT" or the fallback's.
func (s *Scorer) Name() string {
	if s.Ollama != nil {
		return s.Ollama.Name()
	}
	return s.Fallback.Name()
}

// Score asks the chosen scorer; see ollama.Scorer.Score and the fallback's Score.
func (s *Scorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	if s.Ollama != nil {
		return s.Ollama.Score(ctx, b)
	}
	return s.Fallback.Score(ctx, b)
}

// RequestTokens is the Ollama scorer's request-size estimate
// (ollama.Scorer.RequestTokens) when it was chosen, and 0 for the fallback,
// which sends no request.
func (s *Scorer) RequestTokens(b cards.Batch) int {
	if s.Ollama != nil {
		return s.Ollama.RequestTokens(b)
	}
	return 0
}

// FailKind names the failure kind of an error from either scorer, for counting:
// the Kind() string of the first error along the chain that has one (ollama's
// "timeout", "canceled", "unreachable", "http", "not_pulled", "truncated",
// "invalid", "too_large"; the lexical scorer's "empty_query"), else "canceled"
// and "timeout" for context errors, "" for nil and "other" for anything else.
func FailKind(err error) string {
	var k interface{ Kind() string }
	switch {
	case err == nil:
		return ""
	case errors.As(err, &k):
		return k.Kind()
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "other"
}
