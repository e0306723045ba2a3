package fitted

import (
	"context"
	_ "embed"
	"fmt"
	"sync"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
)

// defaultModel is the embedded model, fitted on ../shared/corpus by the command in
// docs/SCORERS.md ("The fitted scorer"); TestDefaultModelIsReproducible refits it
// and compares.
//
//go:embed default_model.json
var defaultModel []byte

var (
	defaultOnce sync.Once
	defaultM    *Model
	defaultErr  error
)

// Default returns the embedded model. It fails only if the embedded file is broken
// (a build error, caught by the tests).
func Default() (*Model, error) {
	defaultOnce.Do(func() {
		defaultM, defaultErr = Parse("embedded default_model.json", defaultModel)
	})
	return defaultM, defaultErr
}

// DefaultBackground returns the embedded model's word statistics (made from
// ../shared/corpus), nil only if the embedded file is broken (caught by the
// tests).
func DefaultBackground() *evidence.Background {
	m, err := Default()
	if err != nil {
		return nil
	}
	return m.Words
}

// DefaultJSON returns the embedded model file's bytes.
func DefaultJSON() []byte { return append([]byte(nil), defaultModel...) }

// Scorer scores cards with a Model. It holds no state besides the model, does no
// I/O, and is safe for concurrent use.
type Scorer struct {
	Model *Model
	// Label names the model in Name ("default" for the embedded one, else the
	// file); asks record it, so replays of two models do not mix.
	Label string
}

// New returns a scorer over m; label names it ("" = "default").
func New(m *Model, label string) *Scorer {
	if label == "" {
		label = "default"
	}
	return &Scorer{Model: m, Label: label}
}

// NewDefault returns a scorer over the embedded model.
func NewDefault() (*Scorer, error) {
	m, err := Default()
	if err != nil {
		return nil, err
	}
	return New(m, "default"), nil
}

// Name returns "fitted" for the embedded model, "fitted:LABEL" for another.
func (s *Scorer) Name() string {
	if s.Label == "default" {
		return "fitted"
	}
	return "fitted:" + s.Label
}

// Score returns each card's keep-probability (Model.Predict of its signals), all
// OK; it fails only on a done context. The score of a card depends on that card
// alone, not on the batch.
func (s *Scorer) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	out := make([]cards.Score, len(b.Cards))
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("fitted: %w", err)
	}
	for i := range b.Cards {
		sig := b.Cards[i].Signals()
		out[i] = cards.Score{Keep: s.Model.Predict(&sig), OK: true}
	}
	return out, nil
}
