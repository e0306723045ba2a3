package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// Source is one session file read and parsed, ready to replay (any number of times,
// under any settings).
type Source struct {
	Path        string // the file as given
	ContentHash string // hex SHA-256 of its bytes
	Session     *transcript.Session
}

// ContentHash returns the hex SHA-256 of data, the content hash of a session file.
func ContentHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Load reads and parses the session file at path (format detected from the
// content; lenient: malformed lines are skipped and counted). Errors: the file
// system's, and the transcript readers' (ErrUnknownFormat and ErrEmpty wrapped in
// ErrNotSession too, so callers can tell a file that is no session from a broken
// session).
func Load(path string, lenient bool) (*Source, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return Parse(path, data, lenient)
}

// Parse parses data, the bytes of the session file at path; see Load for errors.
func Parse(path string, data []byte, lenient bool) (*Source, error) {
	s, err := transcript.Read(path, data, transcript.Options{Lenient: lenient})
	if err != nil {
		if errors.Is(err, transcript.ErrUnknownFormat) || errors.Is(err, transcript.ErrEmpty) {
			return nil, fmt.Errorf("replay: %w: %w", ErrNotSession, err)
		}
		return nil, fmt.Errorf("replay: %w", err)
	}
	return &Source{Path: path, ContentHash: ContentHash(data), Session: s}, nil
}

// Replayer replays sessions under one advisor configuration and scorer. A Replayer
// is safe for concurrent use when its Scorer is (the lexical and Ollama scorers
// are): every Replay builds its own advisor and store.
type Replayer struct {
	// Config is the advisor configuration (validated by Replay: ErrSettings).
	Config advisor.Config
	// Scorer gives keep-probabilities; nil replays with the rules only.
	Scorer advisor.Scorer
	// Lenient is recorded in the settings: it must say how the sources were read.
	Lenient bool
	// Logger receives the advisor's once-per-session warnings (scorer failures).
	// Default: discarded; failures are counted in the asks' FailKind anyway.
	Logger *slog.Logger
	// OnStep, when set, is called after every step of every session with the
	// session's path and the step; it must be safe for concurrent use.
	OnStep func(path string, step int)
}

// Settings returns the settings a replay with r records.
func (r *Replayer) Settings() Settings {
	name := ScorerNone
	if r.Scorer != nil {
		name = r.Scorer.Name()
	}
	return Settings{Version: Version, Config: r.Config, Scorer: name, Lenient: r.Lenient}
}

// replayClock is the advisor's clock during a replay: a constant, so the prompt
// cache never goes cold (old sessions carry no reliable call times) and every
// replay of the same session gives the same rows.
var replayClock = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Replay runs the advisor over src step by step (Simulate, without the final step)
// and returns its Record: every ask and decision, the facts of every output and
// step, and the later-use evidence of every output over the whole session.
//
// Ask tokens: when the advisor leaves AskRecord.Tokens at 0, Replay sets it to an
// estimate of the o200k_base tokens of the request the Ollama scorer would send
// for the step's batch (RequestTokens gives the exact count, which costs a
// tokenizer pass over the whole prompt per step), divided evenly among the batch's
// cards (rounded to nearest). The figure does not depend on the scorer, so
// schedules and scorers compare on the same scale.
//
// Errors: ErrSettings for an invalid config; a context error as is; evidence
// errors (ErrEvidenceOrder, ErrEvidenceDuplicate) for a session whose steps or
// output keys are inconsistent.
func (r *Replayer) Replay(ctx context.Context, src *Source) (*Record, error) {
	started := time.Now()
	settings := r.Settings()
	rec := &Record{
		Path: src.Path, Name: filepath.Base(src.Path), Format: src.Session.Format,
		ContentHash: src.ContentHash, Settings: settings, SettingsHash: settings.Hash(),
		Skipped: src.Session.Skipped, Started: started,
	}
	rec.ID = SessionID(rec.ContentHash, rec.SettingsHash)
	store := newMemStore()
	var scorer advisor.Scorer
	var m *meter
	if r.Scorer != nil {
		m = &meter{inner: r.Scorer}
		scorer = m
	}
	adv, err := advisor.New(r.Config, scorer, store)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSettings, err)
	}
	adv.Logger = r.Logger
	if adv.Logger == nil {
		adv.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	adv.Clock = func() time.Time { return replayClock }
	defer adv.Forget(rec.ID)

	var facts []OutputFacts
	asked := 0
	_, err = Simulate(ctx, adv, src.Session, rec.ID, false, func(p advisor.Plan, _ []*transcript.Message) error {
		if p.Step != len(rec.StepFacts)+1 {
			return fmt.Errorf("replay %s: advisor planned step %d after %d steps", src.Path, p.Step, len(rec.StepFacts))
		}
		if m != nil && m.batch != nil {
			per, err := m.perCard()
			if err != nil {
				return fmt.Errorf("replay %s: step %d: %w", src.Path, p.Step, err)
			}
			for i := asked; i < len(store.asks); i++ {
				if store.asks[i].Tokens == 0 {
					store.asks[i].Tokens = per
				}
			}
		}
		asked = len(store.asks)
		if r.OnStep != nil {
			r.OnStep(src.Path, p.Step)
		}
		rec.StepFacts = append(rec.StepFacts, StepFacts{
			Step: p.Step, ContextTokens: p.ContextTokens + p.SavedTokens, AppliedTokens: p.ContextTokens,
			Asked: p.Asked, OverBudget: p.OverBudget, Rewrite: p.Rewrite,
		})
		// Fold the new items and the items whose decision changed at this step
		// (Item.DecidedAt): the others cannot change a fact, and folding every item at
		// every step made replay quadratic in session length.
		for i, it := range p.Items {
			if i < len(facts) && it.DecidedAt != p.Step {
				continue
			}
			if i == len(facts) {
				facts = append(facts, OutputFacts{Key: it.Key, Tool: it.Tool, Summary: it.Summary, Tokens: it.Tokens, Step: it.Step})
			}
			f := &facts[i]
			if f.Key != it.Key {
				return fmt.Errorf("replay %s: step %d: plan item %d is output %q, earlier plans had %q there", src.Path, p.Step, i, it.Key, f.Key)
			}
			fold(f, it, p.Step)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rec.Steps = len(rec.StepFacts)
	// Outputs no plan saw: the results of the last step's calls.
	outs := src.Session.Outputs()
	for i, f := range facts {
		if i >= len(outs) || outs[i].Key != f.Key {
			return nil, fmt.Errorf("replay %s: the advisor's output %d is %q, not the session's", src.Path, i, f.Key)
		}
	}
	for _, o := range outs[min(len(facts), len(outs)):] {
		f := OutputFacts{Key: o.Key, Tokens: o.Tokens, Step: o.Step}
		if o.Call != nil {
			f.Tool, f.Summary = o.Call.Name, o.Call.Summary
		}
		facts = append(facts, f)
	}
	for i := range facts {
		facts[i].EndStep = rec.Steps
	}
	rec.Outputs = facts
	rec.Asks, rec.Decisions = store.asks, store.decisions

	ev, err := evidence.Of(src.Session)
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", src.Path, err)
	}
	rec.Evidence = ev
	rec.Finished = time.Now()
	return rec, nil
}

// fold updates an output's facts with its plan item at step T.
func fold(f *OutputFacts, it advisor.Item, T int) {
	if it.Decision != advisor.DecisionProtected && f.CandidateFrom == 0 {
		f.CandidateFrom = T
	}
	if it.Decision == advisor.DecisionPending || it.Decision == advisor.DecisionPruned {
		if f.PendingAt == 0 {
			f.PendingAt = T
		}
		if it.By != "" && f.RuleDeadAt == 0 {
			f.RuleDeadAt, f.RuleBy = T, it.By
		}
	}
	if it.Decision == advisor.DecisionPruned && f.PrunedAt == 0 {
		f.PrunedAt = T
	}
}

// meter wraps the replay's scorer to keep the step's batch, whose request size the
// replay counts after the step (outside the advisor's latency measurement).
type meter struct {
	inner advisor.Scorer
	batch *cards.Batch   // the latest batch, nil once counted
	cards map[string]int // card id -> tokens of its text (first ask)
	task  string         // the task counted in taskN
	taskN int
}

func (m *meter) Name() string { return m.inner.Name() }

func (m *meter) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	m.batch = &b
	return m.inner.Score(ctx, b)
}

// perCard returns the latest batch's estimated request tokens per card (rounded
// to nearest) and forgets the batch. The estimate is EstimateRequestTokens with
// each card counted once per output, at its first ask: a re-ask differs only in
// the card's age digits.
func (m *meter) perCard() (int, error) {
	b := m.batch
	m.batch = nil
	n := len(b.Cards)
	if n == 0 {
		return 0, nil
	}
	if m.cards == nil {
		m.cards = map[string]int{}
	}
	if b.Task != m.task || m.taskN == 0 {
		m.task, m.taskN = b.Task, transcript.CountTokens(b.Task)
	}
	total := systemPromptTokens() + m.taskN + transcript.CountTokens(b.Now) + ollama.TemplateTokens + promptFrameTokens
	for i, c := range b.Cards {
		t, ok := m.cards[c.ID]
		if !ok {
			t = transcript.CountTokens(c.Text("c" + strconv.Itoa(i+1)))
			m.cards[c.ID] = t
		}
		total += t + keyListTokens
	}
	return (total + n/2) / n, nil
}

// Constants of the request-size estimate, in o200k_base tokens, measured on the
// p1 prompt template (TestRequestTokenEstimate checks the estimate against
// RequestTokens on real sessions).
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

// systemPromptTokens returns the tokens of the p1 system prompt (it holds no
// per-batch text).
func systemPromptTokens() int {
	sysOnce.Do(func() {
		p, err := ollama.RenderPrompt(cards.Batch{})
		if err == nil {
			sysTokens = transcript.CountTokens(p.System)
		}
	})
	return sysTokens
}

// RequestTokens returns the exact o200k_base tokens of the request the Ollama
// scorer would send for b in one piece (ollama.RenderPrompt): system prompt, user
// prompt and ollama.TemplateTokens for the chat template. Errors are
// RenderPrompt's.
func RequestTokens(b cards.Batch) (int, error) {
	p, err := ollama.RenderPrompt(b)
	if err != nil {
		return 0, fmt.Errorf("counting scorer tokens: %w", err)
	}
	return transcript.CountTokens(p.System) + transcript.CountTokens(p.User) + ollama.TemplateTokens, nil
}

// memStore is the advisor's store during a replay of one session: asks,
// decisions and stubs in memory, originals dropped (the session file holds them),
// no recalls. It is an advisor.VersionedStore, so the advisor does not re-read
// the stubs at every step.
type memStore struct {
	mu        sync.Mutex
	stubs     map[string]advisor.StubRecord
	version   int64 // stubs saved
	asks      []advisor.AskRecord
	decisions []advisor.DecisionRecord
}

var _ advisor.VersionedStore = (*memStore)(nil)

func (s *memStore) SessionVersion(context.Context, string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version, nil
}

func newMemStore() *memStore { return &memStore{stubs: map[string]advisor.StubRecord{}} }

func (s *memStore) SaveOriginal(context.Context, advisor.Original) error { return nil }

func (s *memStore) SaveStub(_ context.Context, st advisor.StubRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stubs[st.OutputKey] = st
	s.version++
	return nil
}

func (s *memStore) RecordAsks(_ context.Context, asks []advisor.AskRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asks = append(s.asks, asks...)
	return nil
}

func (s *memStore) RecordDecisions(_ context.Context, ds []advisor.DecisionRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decisions = append(s.decisions, ds...)
	return nil
}

func (s *memStore) SessionStubs(context.Context, string) (map[string]advisor.StubRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]advisor.StubRecord, len(s.stubs))
	for k, v := range s.stubs {
		out[k] = v
	}
	return out, nil
}

func (s *memStore) SessionRecalls(context.Context, string) ([]advisor.RecallEvent, error) {
	return nil, nil
}
