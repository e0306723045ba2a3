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

// scorerFlags choose the scorer: auto (Ollama when it answers and has the model,
// else lexical), ollama, lexical or none (rules only).
type scorerFlags struct {
	kind    string
	model   string
	prompt  string
	timeout time.Duration
}

func (f *scorerFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.kind, "scorer", "auto", "auto | ollama | lexical | none (auto: Ollama at $OLLAMA_HOST if it answers within 2s and has --model, else lexical)")
	c.Flags().StringVar(&f.model, "model", ollama.DefaultModel, "Ollama model for the ollama scorer")
	c.Flags().StringVar(&f.prompt, "prompt", "v2", "prompt template of the ollama scorer: v2 (cards with their use history) | v1 (the first one, to compare with old replays); the scorer's name ends in :p2 or :p1")
	c.Flags().DurationVar(&f.timeout, "scorer-timeout", ollama.DefaultTimeout, "longest wait for one Ollama request; past it the cards get no score (failure kind timeout)")
}

// build returns the chosen scorer; nil for "none".
func (f *scorerFlags) build(ctx context.Context, e *env) (advisor.Scorer, error) {
	if f.timeout <= 0 {
		return nil, usageError{fmt.Errorf("--scorer-timeout %v: want a positive duration", f.timeout)}
	}
	prompt, err := ollama.ParsePrompt(f.prompt)
	if err != nil {
		return nil, usageError{fmt.Errorf("--prompt: %w", err)}
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
		sc := ollama.New(client, f.model)
		sc.Logger = e.log
		sc.Timeout = f.timeout
		sc.Prompt = prompt
		if f.kind == "ollama" {
			return sc, nil
		}
		// Info level: the one line saying which scorer auto chose goes to stderr.
		return auto.New(ctx, sc, auto.Fallback{Scorer: lexical.New(), Label: "the lexical scorer"},
			newLogger(e.stderr, slog.LevelInfo)), nil
	default:
		return nil, usageError{fmt.Errorf("--scorer %q: want auto, ollama, lexical or none", f.kind)}
	}
}
