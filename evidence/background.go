package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// ErrBackground means word statistics are malformed (Background.Validate names the
// field).
var ErrBackground = errors.New("evidence: invalid word statistics")

// DefaultMinShare is Background.MinShare's default: a plain word written by the
// agent in at least 1% of the background sessions is common, so not specific
// (docs/DESIGN.md "Replay and later-use evidence", clause Specific).
const DefaultMinShare = 0.01

// Background is the plain-word statistics of a background set of sessions: for
// each plain word (a name of letters only, see Plain), folded to lower case, the
// number of sessions in which the agent wrote it (assistant text, tool-call
// arguments or thinking). A plain word is specific only where it is rare in what
// agents write anyway (Common). `fit` computes it from the sessions it fits on
// and ships it inside the model file ("words"); the embedded default model's is
// made from ../shared/corpus.
//
// Only the common words are kept (Counts holds every word whose share is at least
// MinShare), so the statistics stay small: a few thousand words.
type Background struct {
	// Sessions is how many sessions were counted (> 0).
	Sessions int `json:"sessions"`
	// MinShare is the share of Sessions from which a word is common, in (0, 1);
	// DefaultMinShare when made by BackgroundCounter.
	MinShare float64 `json:"min_share"`
	// Counts maps a lower-case plain word to the sessions whose agent wrote it,
	// for the words with Counts/Sessions >= MinShare.
	Counts map[string]int `json:"counts"`
}

// Common reports whether the plain word w (any case) is written by the agent in at
// least MinShare of the background sessions. A nil Background has no statistics
// and reports every plain word common, so that no plain word is evidence without
// them.
func (b *Background) Common(w string) bool {
	if b == nil {
		return true
	}
	n := b.Counts[foldWord(w)]
	return n > 0 && float64(n) >= b.MinShare*float64(b.Sessions)
}

// Validate checks the statistics: Sessions > 0, MinShare in (0,1), every word
// lower-case letters only and of MinNameLen to MaxNameLen bytes, every count in
// [1, Sessions]. Errors wrap ErrBackground and name the field ("counts[\"Word\"]").
func (b *Background) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBackground, field, fmt.Sprintf(format, args...))
	}
	switch {
	case b.Sessions <= 0:
		return bad("sessions", "%d, want at least 1", b.Sessions)
	case math.IsNaN(b.MinShare) || b.MinShare <= 0 || b.MinShare >= 1:
		return bad("min_share", "%v, want a share in (0, 1)", b.MinShare)
	case b.Counts == nil:
		return bad("counts", "missing")
	}
	words := make([]string, 0, len(b.Counts))
	for w := range b.Counts {
		words = append(words, w)
	}
	slices.Sort(words) // the first bad word, whatever the map order
	for _, w := range words {
		field := "counts[" + strconv.Quote(w) + "]"
		if len(w) < MinNameLen || len(w) > MaxNameLen || !lowerLetters(w) {
			return bad(field, "not a lower-case word of letters only, %d to %d bytes", MinNameLen, MaxNameLen)
		}
		if n := b.Counts[w]; n < 1 || n > b.Sessions {
			return bad(field, "%d sessions, want 1 to %d", n, b.Sessions)
		}
	}
	return nil
}

// Digest returns a short hex digest of the statistics (SHA-256 over Sessions,
// MinShare and the common words in order, first 12 hex digits): replay settings
// record it, so stores labelled under other statistics are told apart. "none" for
// a nil Background.
//
// The digest of a Background is worked out once and remembered by its address
// (it sorts and hashes thousands of words, and replay asks for it once a session):
// do not change a Background after its first Digest.
func (b *Background) Digest() string {
	if b == nil {
		return "none"
	}
	if d, ok := digests.Load(b); ok {
		return d.(string)
	}
	d := b.digest()
	digests.Store(b, d)
	return d
}

// digests remembers Digest by address.
var digests sync.Map // *Background -> string

// digest computes Digest.
func (b *Background) digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "%d %v\n", b.Sessions, b.MinShare)
	words := make([]string, 0, len(b.Counts))
	for w, n := range b.Counts {
		if float64(n) >= b.MinShare*float64(b.Sessions) {
			words = append(words, w)
		}
	}
	slices.Sort(words)
	for _, w := range words {
		h.Write([]byte(w))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// BackgroundCounter computes a Background from sessions, one at a time. Not safe
// for concurrent use.
type BackgroundCounter struct {
	sessions int
	counts   map[string]int
	seen     map[string]bool // scratch: the words of the session being added
}

// NewBackgroundCounter returns an empty counter.
func NewBackgroundCounter() *BackgroundCounter {
	return &BackgroundCounter{counts: map[string]int{}, seen: map[string]bool{}}
}

// Add counts the plain words the agent wrote in one session: assistant Text
// (prose words included: they are what agents write anyway), tool-call Args and
// Thinking, each word once per session, whole tokens only (as names match: "code"
// of "claude-code" is not counted).
func (c *BackgroundCounter) Add(s *transcript.Session) {
	clear(c.seen)
	var g int32
	note := func(name string, _ int32, fl uint8) {
		if fl&namePart == 0 && Plain(name) {
			c.seen[foldWord(name)] = true
		}
	}
	for _, m := range s.Messages {
		if m == nil || m.Role != transcript.RoleAssistant {
			continue
		}
		visitNames(m.Text, &g, note)
		visitNames(m.Thinking, &g, note)
		for _, call := range m.Calls {
			visitArgNames(call.Args, &g, note)
		}
	}
	for w := range c.seen {
		c.counts[w]++
	}
	c.sessions++
}

// Sessions returns how many sessions were added.
func (c *BackgroundCounter) Sessions() int { return c.sessions }

// Background returns the statistics of the sessions added, keeping the words
// whose share is at least minShare (DefaultMinShare when minShare is 0); nil when
// no session was added.
func (c *BackgroundCounter) Background(minShare float64) *Background {
	if c.sessions == 0 {
		return nil
	}
	if minShare == 0 {
		minShare = DefaultMinShare
	}
	b := &Background{Sessions: c.sessions, MinShare: minShare, Counts: map[string]int{}}
	for w, n := range c.counts {
		if float64(n) >= minShare*float64(c.sessions) {
			b.Counts[w] = n
		}
	}
	return b
}

// Plain reports whether name is a plain word: letters only (any case: "daemon",
// "Firewall", "GitHub", "USER"), which is specific only when rare in the
// background. Anything with a digit, one of `_ . / \ : - @ # =`, a space or any
// other byte is not plain.
func Plain(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isLetter(name[i]) {
			return false
		}
	}
	return true
}

// foldWord is w in lower case (ASCII; plain words are ASCII letters).
func foldWord(w string) string {
	for i := 0; i < len(w); i++ {
		if isUpper(w[i]) {
			return strings.ToLower(w)
		}
	}
	return w
}

func lowerLetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}
