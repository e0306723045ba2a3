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
	"strings"
	"sync"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/prices"
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
// session). It never holds the whole file: the content hash is taken as the file
// streams by, and the session is read by transcript.ReadFileStreamed (a large pi
// session line by line; the Session keeps no bytes, replay never rewrites).
func Load(path string, lenient bool) (*Source, error) {
	hash, _, err := hashFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	s, err := transcript.ReadFileStreamed(path, transcript.Options{Lenient: lenient})
	if err != nil {
		return nil, readError(err)
	}
	return &Source{Path: path, ContentHash: hash, Session: s}, nil
}

// hashFile returns ContentHash of the file at path, read as a stream, and the
// file's size in bytes. Errors are the file system's.
func hashFile(path string) (hash string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	if size, err = io.Copy(h, f); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}

// readError wraps a transcript reader's error as Load and Parse return it.
func readError(err error) error {
	if errors.Is(err, transcript.ErrUnknownFormat) || errors.Is(err, transcript.ErrEmpty) {
		return fmt.Errorf("replay: %w: %w", ErrNotSession, err)
	}
	return fmt.Errorf("replay: %w", err)
}

// Parse parses data, the bytes of the session file at path; see Load for errors.
// The Session does not keep data (transcript.Session.ReleaseBytes: replay never
// rewrites), so the caller's copy is the only one.
func Parse(path string, data []byte, lenient bool) (*Source, error) {
	s, err := transcript.Read(path, data, transcript.Options{Lenient: lenient})
	if err != nil {
		return nil, readError(err)
	}
	s.ReleaseBytes() // replay never rewrites; a large file's bytes are not kept
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
	// Sizer, when set, estimates the scorer tokens of each step's batch request (the
	// Ollama scorer's prompt: advisor/ollama provides one); nil leaves AskRecord.Tokens
	// as the scorer reported them.
	Sizer RequestSizer
	// Now is the wall clock that bounds the transcript's timestamps (a later one is
	// "future"); default time.Now.
	Now func() time.Time
	// Background is the plain-word statistics of the later-use evidence (the
	// clause Specific of package evidence); nil means the embedded default model's
	// (fitted.DefaultBackground). Its Digest is recorded in the settings.
	Background *evidence.Background
	// AskLag and AskLatency model a scorer that answers later, as the proxy's
	// background asks do (advisor.Advisor.AskLag, AskLatency, AskMeasured): an
	// ask's scores count from the first step at least AskLag steps (at least 1)
	// after it whose transcript time is at least the latency after the ask's, with
	// one ask in flight per session. AskLatency is "" (none), "measured" (each
	// ask's own wall time) or a Go duration ("3s"). Both are recorded in the
	// settings. Zero and "" (the default): scores count at their ask's step.
	AskLag     int
	AskLatency string
}

// ErrAskLatency means Replayer.AskLatency is neither "", "measured" nor a
// non-negative Go duration.
var ErrAskLatency = errors.New(`ask latency: want "measured" or a duration such as 3s`)

// ParseAskLatency reads an ask latency (Replayer.AskLatency): "" is none,
// "measured" each ask's own wall time, else a non-negative Go duration.
// Errors wrap ErrAskLatency.
func ParseAskLatency(s string) (d time.Duration, measured bool, err error) {
	switch s {
	case "":
		return 0, false, nil
	case "measured":
		return 0, true, nil
	}
	d, err = time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false, fmt.Errorf("%w: %q", ErrAskLatency, s)
	}
	return d, false, nil
}

// background returns r.Background, or the embedded default's.
func (r *Replayer) background() *evidence.Background {
	if r.Background != nil {
		return r.Background
	}
	return fitted.DefaultBackground()
}

// RequestSizer estimates the o200k_base tokens of a scorer request: the part that
// does not depend on the cards (system prompt, task, now, chat template), and what
// one card adds (its text under key "c<i+1>" and its entry in the closing key list).
type RequestSizer interface {
	FrameTokens(b cards.Batch) int
	CardTokens(c cards.Card, i int) int
}

// Settings returns the settings a replay with r records.
func (r *Replayer) Settings() Settings {
	name := ScorerNone
	if r.Scorer != nil {
		name = r.Scorer.Name()
	}
	return Settings{Version: Version, Config: r.Config, Scorer: name, Lenient: r.Lenient, Words: r.background().Digest(),
		AskLag: r.AskLag, AskLatency: r.AskLatency}
}

// Replay runs the advisor over src step by step (Simulate, without the final step)
// and returns its Record: every ask and decision, the facts of every output and
// step, and the later-use evidence of every output over the whole session. The
// advisor's clock is the transcript's call times (CallTimes), so the prompt cache
// goes cold where the agent paused for longer than the cache TTL. src is not
// changed (Consume replays it once and lets go of it on the way).
//
// Ask tokens: with a Sizer, each ask's Tokens is the step's estimated request size
// divided evenly among its cards (rounded to nearest), each card counted at its
// first ask (a re-ask differs only in the card's age digits). The figure does not
// depend on the scorer, so schedules and scorers compare on the same scale.
//
// Errors: ErrSettings for an invalid config; a context error as is; evidence
// errors (ErrEvidenceOrder, ErrEvidenceDuplicate) for a session whose steps or
// output keys are inconsistent.
func (r *Replayer) Replay(ctx context.Context, src *Source) (*Record, error) {
	return r.replay(ctx, src, false)
}

// Consume is Replay for a Source replayed only once (the replay command): as the
// replay goes, it lets go of every message the advisor and the record need no more
// (every output in it Final, advisor.Item, and the evidence Tracker past it), so a
// long session's parsed messages do not stay in memory beside the advisor's state
// (docs/PERFORMANCE.md, "A session of 10^6 messages"). The Record is the one Replay
// gives. Afterwards src.Session holds no messages and no calls: src cannot be
// replayed again. Errors: Replay's.
func (r *Replayer) Consume(ctx context.Context, src *Source) (*Record, error) {
	return r.replay(ctx, src, true)
}

// replay is Replay and, with consume, Consume: it starts the record and the
// advisor, simulates the session step by step through a folder, and finishes the
// record with the advisor's asks, decisions and use history.
func (r *Replayer) replay(ctx context.Context, src *Source, consume bool) (*Record, error) {
	rec := r.newRecord(src)
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	times, cold, tstats := CallTimes(src.Session, time.Duration(r.Config.CacheTTL), now())
	rec.Times = tstats
	store := newMemStore()
	m := &meter{inner: r.Scorer, sizer: r.Sizer}
	adv, err := r.newAdvisor(src, store, m)
	if err != nil {
		return nil, err
	}
	step := 0
	adv.Clock = func() time.Time {
		if step < len(times) {
			return times[step]
		}
		return time.Time{}
	}
	defer adv.Forget(rec.ID)

	f := newFolder(rec, src, store, m, consume)
	f.bg = adv.Background
	f.cold, f.times, f.onStep = cold, times, r.OnStep
	_, err = Simulate(ctx, adv, f.session, rec.ID, false, func(p advisor.Plan, view []*transcript.Message) error {
		step++
		return f.step(p, view)
	})
	if err != nil {
		return nil, err
	}
	rec.Asks, rec.Decisions = store.asks, store.decisions
	// The advisor's state is done with; its use history holds the session's
	// later-use evidence but for the messages after the last step.
	tr, err := adv.ForgetTracker(rec.ID)
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", src.Path, err)
	}
	if err := f.finish(tr); err != nil {
		return nil, err
	}
	rec.Finished = time.Now()
	return rec, nil
}

// newRecord starts the record of a replay of src under r: its file, settings,
// session id and provider (the config's, else the one its format implies).
func (r *Replayer) newRecord(src *Source) *Record {
	settings := r.Settings()
	rec := &Record{
		Path: absPath(src.Path), Name: filepath.Base(src.Path), Format: src.Session.Format,
		ContentHash: src.ContentHash, Settings: settings, SettingsHash: settings.Hash(),
		Skipped: src.Session.Skipped, Started: time.Now(),
	}
	rec.ID = SessionID(rec.ContentHash, rec.SettingsHash)
	rec.Provider = advisor.ProviderOf(src.Session.Format)
	if r.Config.Provider != "" {
		rec.Provider = prices.Provider(r.Config.Provider)
	}
	return rec
}

// newAdvisor builds the advisor of one replay of src: r's config with the
// session's agent when the config names none (its hard limit, as wrap tells the
// live proxy), scoring through m (nil without a scorer) into store, with r's word
// statistics, modelled ask lag and logger (discarding by default). Errors wrap
// ErrSettings.
func (r *Replayer) newAdvisor(src *Source, store *memStore, m *meter) (*advisor.Advisor, error) {
	var scorer advisor.Scorer
	if r.Scorer != nil {
		scorer = m
	}
	cfg := r.Config
	if cfg.Agent == "" {
		cfg.Agent = advisor.AgentOf(src.Session.Format)
	}
	adv, err := advisor.New(cfg, scorer, store)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSettings, err)
	}
	adv.Background = r.background()
	adv.AskLag = r.AskLag
	if adv.AskLatency, adv.AskMeasured, err = ParseAskLatency(r.AskLatency); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSettings, err)
	}
	adv.Logger = r.Logger
	if adv.Logger == nil {
		adv.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return adv, nil
}

// folder turns the advisor's plans into a Record's facts, one step at a time. It
// walks each message once, when the advisor first sees it, noting each output's
// offset. When consuming, it drops the messages no longer needed from the session
// the advisor is given.
type folder struct {
	rec     *Record
	src     *Source
	session *transcript.Session // what Simulate walks: src.Session, or a copy when not consuming
	store   *memStore
	meter   *meter
	cold    []bool
	times   []time.Time
	onStep  func(path string, step int)
	facts   []OutputFacts
	steps   []stepFact // StepFacts[i] of the record, until finish expands them
	asked   int
	bg      *evidence.Background // the later-use evidence's word statistics

	walked int // messages walked
	tokens int // tokens of the messages walked
	// prefix[i] is the tokens of the messages before message i (walked);
	// compacted is the compaction walked since the last step that drops the most,
	// if any (StepFacts.CompactionDropped, CompactionSummary); dropped is the most
	// any compaction so far dropped: the advisor's context counts from there on,
	// and the step facts add it back (StepFacts.ContextTokens counts the whole
	// history).
	prefix    []int
	compacted stepCompaction
	dropped   int64
	outs      []walked // the outputs walked and not yet folded into facts

	// When consuming: per message walked, its outputs not yet Final; per output,
	// its message and whether it was seen Final; messages whose outputs are all
	// Final but that were the latest the advisor indexed.
	consume  bool
	live     []int32
	outMsg   []int32
	final    []bool
	deferred []int
}

// walked is an output the folder walked, and the offset of its message.
type walked struct {
	out    *transcript.ToolOutput
	offset int
}

func newFolder(rec *Record, src *Source, store *memStore, m *meter, consume bool) *folder {
	f := &folder{rec: rec, src: src, session: src.Session, store: store, meter: m, consume: consume}
	// The facts of every output and step, sized once: a long session's slices would
	// otherwise grow by copies, old and new held at once.
	outs, steps := 0, 0
	for _, m := range src.Session.Messages {
		outs += len(m.Outputs)
		if m.Role == transcript.RoleAssistant {
			steps++
		}
	}
	f.facts, f.steps = make([]OutputFacts, 0, outs), make([]stepFact, 0, steps)
	if consume {
		// Only the messages may lead to the outputs: the calls and orphans would
		// keep every output alive.
		src.Session.Calls, src.Session.Orphans = nil, nil
	}
	return f
}

// walk notes the outputs of the messages up to end.
func (f *folder) walk(msgs []*transcript.Message, end int) {
	for ; f.walked < end; f.walked++ {
		m := msgs[f.walked]
		for _, o := range m.Outputs {
			f.outs = append(f.outs, walked{out: o, offset: f.tokens})
		}
		f.prefix = append(f.prefix, f.tokens)
		if c := f.compaction(m); c.dropped > f.compacted.dropped {
			f.compacted = c
		}
		f.tokens += m.Tokens
		if f.consume {
			for range m.Outputs {
				f.outMsg = append(f.outMsg, int32(f.walked))
			}
			f.live = append(f.live, int32(len(m.Outputs)))
			if len(m.Outputs) == 0 {
				f.deferred = append(f.deferred, f.walked)
			}
		}
	}
}

// step folds the plan of one step, made on view.
func (f *folder) step(p advisor.Plan, view []*transcript.Message) error {
	path := f.src.Path
	if p.Step != len(f.steps)+1 {
		return fmt.Errorf("replay %s: advisor planned step %d after %d steps", path, p.Step, len(f.steps))
	}
	if per := f.meter.perCard(); per > 0 {
		for i := f.asked; i < len(f.store.asks); i++ {
			f.store.asks[i].Tokens = per
		}
	}
	f.asked = len(f.store.asks)
	if f.onStep != nil {
		f.onStep(path, p.Step)
	}
	st := compactStep(p)
	st.prompt = prompted(view[min(f.walked, len(view)):])
	f.walk(view, len(view))
	st.compacted, f.compacted = f.compacted, stepCompaction{}
	if int64(st.compacted.dropped) > f.dropped {
		f.dropped = int64(st.compacted.dropped)
	} else {
		st.compacted = stepCompaction{} // drops nothing the context still counted
	}
	st.context += f.dropped
	st.applied += f.dropped
	f.steps = append(f.steps, st)
	// Fold the new items and the items whose decision changed at this step
	// (Plan.Changed): the others cannot change a fact, and looking at every item
	// at every step made replay quadratic in session length.
	if err := f.add(p.Items, p.Step); err != nil {
		return err
	}
	for _, i := range p.Changed {
		it := p.Items[i]
		fc := &f.facts[i]
		if fc.Key != it.Key {
			return fmt.Errorf("replay %s: step %d: plan item %d is output %q, earlier plans had %q there", path, p.Step, i, it.Key, fc.Key)
		}
		fold(fc, it, p.Step)
		f.settled(i, it)
	}
	f.drop(len(view))
	return nil
}

// stepFact is StepFacts held compactly while the replay goes (a tenth of the
// record of a long session): the step is its place, the time and the cold mark
// are the folder's times and cold.
type stepFact struct {
	context, applied int64
	reason           string
	asked            int32
	overBudget       bool
	rewrite          bool
	prompt           bool
	compacted        stepCompaction
}

// stepCompaction is the agent's own compaction recorded before a call
// (StepFacts.CompactionDropped and CompactionSummary), in tokens; zero: none.
type stepCompaction struct{ dropped, summary int32 }

// compaction returns what message m, the message being walked (f.walked), drops
// when it records a compaction: for the agent's own, the tokens of the messages
// before the tail it kept (transcript.Message.CompactionKept); for a provider's
// compaction block or item (Message.Compaction), the tokens before m, from which
// the provider reads on; with m's tokens as the summary, as the advisor counts
// its context (its compacted). Zero for any other message and for a compaction
// that kept every message (pi's compactionSummary).
func (f *folder) compaction(m *transcript.Message) stepCompaction {
	k := 0
	switch {
	case m.Compaction:
		k = f.walked
	case m.AgentCompaction:
		k = f.walked - m.CompactionKept
	}
	if k <= 0 || k >= len(f.prefix) || f.prefix[k] <= 0 {
		return stepCompaction{}
	}
	return stepCompaction{dropped: int32(f.prefix[k]), summary: int32(m.Tokens)}
}

// prompted reports whether msgs, the messages that came since the previous model
// call, hold a user prompt: a user message with words of its own, not injected
// context (StepFacts.Prompt).
func prompted(msgs []*transcript.Message) bool {
	for _, m := range msgs {
		if m.Role == transcript.RoleUser && !m.Meta && strings.TrimSpace(m.Text) != "" {
			return true
		}
	}
	return false
}

// compactStep returns the compact facts of plan p.
func compactStep(p advisor.Plan) stepFact {
	return stepFact{
		context: int64(p.ContextTokens + p.SavedTokens), applied: int64(p.ContextTokens),
		reason: p.RewriteReason, asked: int32(p.Asked), overBudget: p.OverBudget, rewrite: p.Rewrite,
	}
}

// stepFacts expands the compact facts of every step into the record's StepFacts.
func (f *folder) stepFacts() []StepFacts {
	out := make([]StepFacts, len(f.steps))
	for i, c := range f.steps {
		sf := StepFacts{
			Step: i + 1, ContextTokens: int(c.context), AppliedTokens: int(c.applied),
			Asked: int(c.asked), OverBudget: c.overBudget, Rewrite: c.rewrite, RewriteReason: c.reason,
			Prompt: c.prompt, CompactionDropped: int(c.compacted.dropped), CompactionSummary: int(c.compacted.summary),
		}
		if i < len(f.cold) {
			sf.Cold, sf.At = f.cold[i], f.times[i]
		}
		out[i] = sf
	}
	f.steps = nil
	return out
}

// add adds the facts of the plan's new items (those after the facts so far), each
// the next output walked.
func (f *folder) add(items []advisor.Item, T int) error {
	for len(f.facts) < len(items) {
		i := len(f.facts)
		it := items[i]
		if len(f.outs) == 0 || f.outs[0].out.Key != it.Key {
			return fmt.Errorf("replay %s: step %d: the advisor's output %d is %q, not the session's", f.src.Path, T, i, it.Key)
		}
		f.facts = append(f.facts, OutputFacts{Key: it.Key, Tool: it.Tool, Summary: it.Summary, Tokens: it.Tokens, Step: it.Step, Offset: f.outs[0].offset})
		f.outs[0] = walked{}
		f.outs = f.outs[1:]
		f.settled(i, it)
	}
	if len(f.outs) == 0 {
		f.outs = nil // let the walked outputs go
	}
	return nil
}

// settled notes, when consuming, that item i may be Final now.
func (f *folder) settled(i int, it advisor.Item) {
	if !f.consume || !it.Final {
		return
	}
	for len(f.final) <= i {
		f.final = append(f.final, false)
	}
	if f.final[i] {
		return
	}
	f.final[i] = true
	mi := f.outMsg[i]
	if f.live[mi]--; f.live[mi] == 0 {
		f.deferred = append(f.deferred, int(mi))
	}
}

// drop lets go, when consuming, of the messages with every output Final, but the
// latest one the advisor indexed (end-1: its next step looks at it again).
func (f *folder) drop(end int) {
	if !f.consume {
		return
	}
	keep := f.deferred[:0]
	for _, mi := range f.deferred {
		if mi >= end-1 {
			keep = append(keep, mi)
			continue
		}
		f.session.Messages[mi] = nil
	}
	f.deferred = keep
}

// finish walks the messages no plan saw (from the last step's calls on), adds
// their outputs' facts, the end step and stub sizes, and the later-use evidence:
// tr's, the advisor's use history over the messages walked (nil when the advisor
// saw no step), once it has read the messages after them (what evidence.Of finds
// over the whole session).
func (f *folder) finish(tr *evidence.Tracker) error {
	rec, msgs := f.rec, f.session.Messages
	rec.StepFacts = f.stepFacts()
	rec.Steps = len(rec.StepFacts)
	if tr == nil {
		tr = evidence.NewTracker()
		tr.Background = f.bg
	}
	if n := tr.Stats().Messages; n != f.walked {
		return fmt.Errorf("replay %s: the advisor's use history holds %d messages, the replay gave it %d", f.src.Path, n, f.walked)
	}
	for _, m := range msgs[f.walked:] {
		if _, err := tr.Add(m); err != nil {
			return fmt.Errorf("replay %s: %w", f.src.Path, err)
		}
	}
	f.walk(msgs, len(msgs))
	for _, w := range f.outs {
		o := w.out
		fc := OutputFacts{Key: o.Key, Tokens: o.Tokens, Step: o.Step, Offset: w.offset}
		if o.Call != nil {
			fc.Tool, fc.Summary = o.Call.Name, o.Call.Summary
		}
		f.facts = append(f.facts, fc)
	}
	f.outs = nil
	for i := range f.facts {
		f.facts[i].EndStep = rec.Steps
		f.facts[i].DigestTokens = tr.DigestFull(f.facts[i].Key)
		if f.facts[i].DigestTokens > 0 {
			f.facts[i].DigestLive = append([]int{0}, tr.DigestLive(f.facts[i].Key)...)
		}
		// The stub, with the digest it carries when made protected_steps after
		// the output (what Use.Digest measures).
		cfg := f.rec.Settings.Config
		f.facts[i].StubTokens, _ = StubTokensAt(cfg, &f.facts[i], cfg.DigestTokens, cfg.DigestShare)
	}
	rec.Outputs = f.facts
	rec.Evidence = tr.All()
	if f.consume {
		f.src.Session.Messages = nil
	}
	return nil
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
	sizer RequestSizer
	batch *cards.Batch   // the latest batch, nil once counted
	cards map[string]int // card id -> tokens of its text (first ask)
}

func (m *meter) Name() string { return m.inner.Name() }

func (m *meter) Score(ctx context.Context, b cards.Batch) ([]cards.Score, error) {
	m.batch = &b
	return m.inner.Score(ctx, b)
}

// perCard returns the latest batch's estimated request tokens per card (rounded
// to nearest), 0 without a sizer or a batch, and forgets the batch. Each card is
// counted once per output, at its first ask: a re-ask differs only in the card's age
// digits.
func (m *meter) perCard() int {
	b := m.batch
	m.batch = nil
	if b == nil || m.sizer == nil || len(b.Cards) == 0 {
		return 0
	}
	if m.cards == nil {
		m.cards = map[string]int{}
	}
	total := m.sizer.FrameTokens(*b)
	for i, c := range b.Cards {
		t, ok := m.cards[c.ID]
		if !ok {
			t = m.sizer.CardTokens(c, i)
			m.cards[c.ID] = t
		}
		total += t
	}
	n := len(b.Cards)
	return (total + n/2) / n
}

// memStore is the advisor's store during a replay of one session: asks,
// decisions and stubs in memory, originals dropped (the session file holds them),
// no recalls and no history. The stubs are a list in the order saved, not a map:
// the advisor reads them back only when the session's version moved behind its
// back (never in a replay), and a long session prunes some 10^5 outputs.
type memStore struct {
	mu        sync.Mutex
	stubs     []advisor.StubRecord
	version   int64 // stubs saved
	asks      []advisor.AskRecord
	decisions []advisor.DecisionRecord
}

var _ advisor.Store = (*memStore)(nil)

func newMemStore() *memStore { return &memStore{} }

// SessionMark is the stubs saved; Step stays 0 (step records are not kept), so the
// advisor never reads a history back.
func (s *memStore) SessionMark(context.Context, string) (advisor.Mark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return advisor.Mark{Version: s.version}, nil
}

func (s *memStore) SavePrunes(_ context.Context, prunes []advisor.Prune) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range prunes {
		s.stubs = append(s.stubs, p.Stub)
		s.version++
	}
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

func (s *memStore) RecordSteps(context.Context, []advisor.StepRecord) error { return nil }

func (s *memStore) SessionStubs(context.Context, string) (map[string]advisor.StubRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]advisor.StubRecord, len(s.stubs))
	for _, v := range s.stubs {
		out[v.OutputKey] = v // a later stub of the same output replaces the earlier
	}
	return out, nil
}

func (s *memStore) SessionRecalls(context.Context, string) ([]advisor.RecallEvent, error) {
	return nil, nil
}

func (s *memStore) SessionHistoryBetween(context.Context, string, int, int) (advisor.History, error) {
	return advisor.History{}, nil
}

// absPath is path made absolute (filepath.Abs), or path itself if that fails: a
// stored replay names its file so that calibrate and backoff, which read the session
// files again, find them from any working directory.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
