package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/spf13/cobra"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/auto"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/evidence"
)

// scorerFlags choose the scorer: auto (Ollama when it answers and has the model,
// else the fitted scorer), ollama, fitted, lexical, keep (every card kept: a training
// replay) or none (rules only).
type scorerFlags struct {
	kind      string
	model     string
	prompt    string
	timeout   time.Duration
	modelFile string
	fromCfg   bool // modelFile is the config's model_file, not --model-file
	fuse      bool
}

// useConfig takes the config's model file (model_file) when --model-file is not
// given: the flag overrides the config, as every flag does.
func (f *scorerFlags) useConfig(cfg advisor.Config) {
	if f.modelFile == "" && cfg.ModelFile != "" {
		f.modelFile, f.fromCfg = cfg.ModelFile, true
	}
}

func (f *scorerFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.kind, "scorer", "auto", "auto | ollama | fitted | lexical | keep | none (auto: Ollama at $OLLAMA_HOST if it answers within 2s and has --model, else the fitted scorer; keep: every card kept, for training replays)")
	c.Flags().StringVar(&f.modelFile, "model-file", "", "the fitted scorer's model file (from pruneadvisor fit); default: the weights embedded in the binary")
	c.Flags().BoolVar(&f.fuse, "fuse", false, "with Ollama, fuse its scores with the fitted scorer's (reciprocal rank fusion on the fitted scale; off until a replay shows it beats both)")
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
	case "keep":
		return fitted.KeepScorer{}, nil
	case "fitted":
		return f.fitted(e)
	case "ollama", "auto":
		client, err := api.ClientFromEnvironment()
		if err != nil {
			return nil, fmt.Errorf("ollama client: %w", err)
		}
		sc := ollama.New(client, f.model)
		sc.Logger = e.log
		sc.Timeout = f.timeout
		sc.Prompt = prompt
		fb, err := f.fitted(e)
		if err != nil {
			return nil, err
		}
		if f.kind == "ollama" {
			if f.fuse {
				return &auto.Fused{Model: sc, Fitted: fb}, nil
			}
			return sc, nil
		}
		// Info level: the one line saying which scorer auto chose goes to stderr.
		label := "the fitted scorer (embedded weights)"
		if fb.Label != "default" {
			label = "the fitted scorer (" + f.modelFile + ")"
		}
		chosen := auto.New(ctx, sc, auto.Fallback{Scorer: fb, Label: label},
			newLogger(e.stderr, slog.LevelInfo))
		if f.fuse && chosen.Ollama != nil {
			return &auto.Fused{Model: chosen.Ollama, Fitted: fb}, nil
		}
		return chosen, nil
	default:
		return nil, usageError{fmt.Errorf("--scorer %q: want auto, ollama, fitted, lexical, keep or none", f.kind)}
	}
}

// background returns the plain-word statistics of the later-use evidence: the
// model file's (--model-file, or the config's model_file) when it has them, else
// the embedded default model's. A model file without them (one written before
// they existed) is said once on stderr, naming the file and the statistics used
// instead; a model file that cannot be loaded is left to fitted (its error or
// warning).
func (f *scorerFlags) background(e *env) *evidence.Background {
	def := fitted.DefaultBackground()
	if f.modelFile == "" {
		return def
	}
	m, err := fitted.Load(f.modelFile)
	if err != nil {
		return def
	}
	if filled := m.Filled(); len(filled) > 0 {
		fmt.Fprintf(e.stderr, "pruneadvisor: model %s lacks the features %s (written before they existed): they are weighted 0; refit with this version to use them\n", f.modelFile, strings.Join(filled, ", "))
	}
	bg, fell := m.BackgroundOr(def)
	if fell {
		fmt.Fprintf(e.stderr, "pruneadvisor: model %s has no word statistics (field \"words\"): later-use evidence uses the embedded default's (%d sessions of ../shared/corpus); refit with this version to add them\n", f.modelFile, def.Sessions)
	}
	return bg
}

// fitted returns the fitted scorer over --model-file, or over the embedded model.
// A --model-file that cannot be used is the command's error (exit 1), naming the
// file and the field: the user asked for that model. A config's model_file that
// cannot be used is said once on stderr and the embedded model is used instead, so
// a wrapped agent or a server started from a config whose model went missing still
// runs.
func (f *scorerFlags) fitted(e *env) (*fitted.Scorer, error) {
	if f.modelFile != "" {
		m, err := fitted.Load(f.modelFile)
		if err == nil {
			return fitted.New(m, filepath.Base(f.modelFile)), nil
		}
		if !f.fromCfg {
			return nil, fmt.Errorf("--model-file: %w", err)
		}
		e.log.Warn("cannot use the config's model_file; using the embedded fitted model", "err", err)
	}
	return fitted.NewDefault()
}
