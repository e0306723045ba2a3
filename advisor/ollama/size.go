package ollama

import (
	"strconv"
	"sync"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// Sizer estimates the o200k_base tokens of the request the scorer sends for a
// batch, without rendering and counting the whole prompt for every batch: the part
// that does not depend on the cards (system prompt, task, now, the prompt's fixed
// words, the chat template) plus, per card, its text under its short key and its
// entry in the closing key list. replay.Replayer uses it (its RequestSizer) to put
// scorer tokens on every ask whatever scorer the replay ran; TestSizerEstimate
// checks it against RequestTokens on real sessions. The zero value is ready; it is
// safe for concurrent use.
type Sizer struct{}

// Constants of the estimate, in o200k_base tokens, measured on the p1 prompt
// template.
const (
	// promptFrameTokens covers the user prompt's fixed words ("Task:", "Agent's
	// latest words:", "N cards:", "Give the percentage for each of:").
	promptFrameTokens = 20
	// keyListTokens is one entry of the closing key list (", c12").
	keyListTokens = 3
)

var (
	sysOnce   sync.Once
	sysTokens int
)

// FrameTokens returns the tokens of b's request outside its cards.
func (Sizer) FrameTokens(b cards.Batch) int {
	sysOnce.Do(func() {
		if p, err := RenderPrompt(cards.Batch{}); err == nil {
			sysTokens = tokencount.Count(p.System)
		}
	})
	return sysTokens + tokencount.Count(b.Task) + tokencount.Count(b.Now) + TemplateTokens + promptFrameTokens
}

// CardTokens returns the tokens card c adds as the i-th card (key "c<i+1>").
func (Sizer) CardTokens(c cards.Card, i int) int {
	return tokencount.Count(c.Text("c"+strconv.Itoa(i+1))) + keyListTokens
}

// RequestTokens returns the exact o200k_base tokens of the request for b in one
// piece (RenderPrompt): system prompt, user prompt and TemplateTokens. Errors are
// RenderPrompt's.
func RequestTokens(b cards.Batch) (int, error) {
	p, err := RenderPrompt(b)
	if err != nil {
		return 0, err
	}
	return tokencount.Count(p.System) + tokencount.Count(p.User) + TemplateTokens, nil
}
