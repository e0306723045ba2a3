package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/auto"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
)

// scorerFlags choose the scorer: auto (Ollama when it answers, else lexical),
// ollama, lexical or none (rules only).
type scorerFlags struct {
	kind    string
	model   string
	timeout time.Duration
}

func (f *scorerFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.kind, "scorer", "auto", "auto | ollama | lexical | none (auto: Ollama at $OLLAMA_HOST if /api/version answers within 2s, else lexical)")
	c.Flags().StringVar(&f.model, "model", ollama.DefaultModel, "Ollama model for the ollama scorer")
	c.Flags().DurationVar(&f.timeout, "scorer-timeout", ollama.DefaultTimeout, "longest wait for one Ollama request; past it the cards get no score (failure kind timeout)")
}

// build returns the chosen scorer; nil for "none".
func (f *scorerFlags) build(ctx context.Context, e *env) (advisor.Scorer, error) {
	if f.timeout <= 0 {
		return nil, usageError{fmt.Errorf("--scorer-timeout %v: want a positive duration", f.timeout)}
	}
	switch f.kind {
	case "none":
		return nil, nil
	case "lexical":
		return lexical.New(), nil
	case "ollama", "auto":
		client, err := api.ClientFromEnvironment()
		if err != nil {
			return nil, fmt.Errorf("ollama client: %w", err)
		}
		if f.kind == "ollama" {
			sc := ollama.New(client, f.model)
			sc.Logger = e.log
			sc.Timeout = f.timeout
			return sc, nil
		}
		// Info level: the one line saying which scorer auto chose goes to stderr.
		a := auto.New(ctx, client, f.model, newLogger(e.stderr, slog.LevelInfo))
		if a.Ollama != nil {
			a.Ollama.Timeout = f.timeout
		}
		return a, nil
	default:
		return nil, usageError{fmt.Errorf("--scorer %q: want auto, ollama, lexical or none", f.kind)}
	}
}
