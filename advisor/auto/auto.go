// Package auto picks the scorer (DESIGN.md, "The embedded default"): the Ollama
// scorer when an Ollama server answers /api/version within PingTimeout, otherwise the
// lexical BM25 scorer, so the advisor works with no model at all. The choice is made
// once, in New, and said once through the logger.
package auto

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/cards"
)

// PingTimeout bounds the /api/version probe: a local server answers in
// milliseconds, and a user with no Ollama should not wait for a model that is not
// there.
const PingTimeout = 2 * time.Second

// Scorer is the chosen scorer. Exactly one of Ollama and Lexical is set.
type Scorer struct {
	// Ollama is the model scorer when the server answered; set its option fields
	// (NumCtx, Timeout, …) before the first Score. nil when the lexical scorer was
	// chosen.
	Ollama *ollama.Scorer
	// Lexical is the fallback when the server did not answer; nil otherwise.
	Lexical *lexical.Scorer
	// Why is the one line logged at the choice, e.g. "scorer ollama:qwen2.5:0.5b:p1
	// (Ollama 0.17.4)" or "Ollama not reachable (…); using the lexical scorer".
	Why string
}

// New probes the server behind client (nil: api.ClientFromEnvironment, which reads
// OLLAMA_HOST) with GET /api/version, bounded by PingTimeout and by ctx. If it
// answers, the choice is ollama.New(client, model) ("" model: ollama.DefaultModel);
// otherwise lexical.New(). The choice is logged once on logger (nil: discarded): at
// Info for Ollama, at Warn for the fallback, with the failure kind and error. Only
// the server is probed, not the model: an unpulled model shows up later as a 404
// ("http" failures) on every ask.
func New(ctx context.Context, client *api.Client, model string, logger *slog.Logger) *Scorer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if client == nil {
		client, err = api.ClientFromEnvironment()
	}
	if err == nil {
		o := ollama.New(client, model)
		pctx, cancel := context.WithTimeout(ctx, PingTimeout)
		var version string
		version, err = o.Version(pctx)
		cancel()
		if err == nil {
			s := &Scorer{Ollama: o, Why: fmt.Sprintf("scorer %s (Ollama %s)", o.Name(), version)}
			logger.Info(s.Why, "scorer", o.Name(), "ollama_version", version)
			return s
		}
	}
	l := lexical.New()
	s := &Scorer{Lexical: l, Why: fmt.Sprintf("Ollama not reachable (%v); using the lexical scorer", err)}
	logger.Warn(s.Why, "scorer", l.Name(), "kind", ollama.FailKind(err))
	return s
}

// Name is the chosen scorer's name: "ollama:MODEL:PROMPT" or "lexical".
func (s *Scorer) Name() string {
	if s.Ollama != nil {
		return s.Ollama.Name()
	}
	return s.Lexical.Name()
}

// Score asks the chosen scorer; see ollama.Scorer.Score and lexical.Scorer.Score.
func (s *Scorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	if s.Ollama != nil {
		return s.Ollama.Score(ctx, b)
	}
	return s.Lexical.Score(ctx, b)
}

// FailKind names the failure kind of an error from either scorer, for counting:
// ollama.FailKind's kinds ("timeout", "canceled", "unreachable", "http",
// "truncated", "invalid", "too_large"), "empty_query" for lexical.ErrEmptyQuery,
// "" for nil and "other" for anything else.
func FailKind(err error) string {
	switch {
	case errors.Is(err, lexical.ErrEmptyQuery):
		return "empty_query"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return ollama.FailKind(err)
}
