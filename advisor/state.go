package advisor

import (
	"container/heap"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/rules"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/toolcall"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// state is what the advisor keeps for one session between steps. Everything in it
// is derived once per message, when the message is first seen (docs/DESIGN.md step 1), or
// read back from the store; every later step touches only what changes at that step:
// the new messages, the outputs whose protection ends or whose next ask comes (a
// queue keyed by step), and the pending prunes. Output texts are not kept: they come
// with every call.
type state struct {
	mu sync.Mutex
	id string
	bg *evidence.Background // the use history's word statistics (Advisor.Background)
	// digestTokens, digestShare, digestMin and digestFrom are the tracker's
	// digest settings (Config.DigestTokens, Config.DigestShare,
	// Config.MinCandidateTokens, Config.ProtectedSteps).
	digestTokens, digestMin, digestFrom int
	digestShare                         float64

	// What the store holds for the session (possibly written by other processes).
	loaded   bool                   // stubs, recalls and history read since the last reset
	synced   bool                   // the store was read without error at this step
	version  int64                  // the SessionMark version at the last read
	own      int64                  // stubs this process saved since that read (apply): the version moved by them
	frozen   map[string]StubRecord  // stubs read from the store, by output key (for outputs not indexed yet)
	recalls  int                    // recall events already applied
	restored map[string][]AskRecord // asks of the stored history, by output key, until indexed
	recalled map[string]int         // outputs recalled in the store, not indexed yet: the step of the recall
	// seen is the latest step this state holds the records of: advised here, or
	// read from the store (stepAfter). A SessionMark step past it means another
	// process advised steps since (syncStore).
	seen int

	// The index.
	indexed   int    // messages indexed so far
	lastPrint string // fingerprint of the last indexed message
	steps     int    // assistant messages indexed
	outs      []*outState
	items     []Item // outs[i].item(), maintained in place
	byKey     map[string]*outState
	byRecall  map[string]*outState // recall id -> output
	rules     *rules.Index
	corpus    *cards.Corpus
	// corpusAhead is set while index has corpusAhead add the outputs' texts to
	// corpus (indexOutput then does not).
	corpusAhead bool
	tracker     *evidence.Tracker // the use history (nil after a tracker error)
	trackErr    error             // the error that stopped the tracker
	awaiting    []*outState       // outputs whose reaction is not known yet
	// recallsSeen are the recalls index found this step (a call to the recall tool
	// whose result it indexed): their use of the original is noted once the index
	// has fed the tracker every message (noteRecalls), since trackAhead's goroutine
	// may be feeding it meanwhile.
	recallsSeen []recallSeen
	lastRead    map[string]*outState
	lastEdit    map[string]int // path -> step of its latest successful edit or write
	lastTouch   map[string]int // path -> step of the latest call touching it
	allUses     int            // counting uses so far, over every output
	reads       map[string]int // path -> successful reads so far
	offsets     []int          // offsets[i]: tokens of messages 0..i-1, nothing pruned
	saved       fenwick        // tokens the applied stubs remove, by message index
	ctxTokens   int            // tokens of the indexed messages with applied stubs, from the latest compaction on
	fullTokens  int            // tokens of the indexed messages as sent by the agent, from the latest compaction on
	lastCall    time.Time
	// lastFull is fullTokens as the session's previous step left it (by this
	// process, or read from its step record: stepAfter), when fullKnown.
	lastFull  int
	fullKnown bool
	lastNow   string // the latest non-empty assistant text
	// sentTokens is ctxTokens as the previous step sent it (0 before the first);
	// growth the context's growth from one step to the next over the last
	// Config.GrowthSteps steps (the hard limit's margin, Config.HardLimitFor).
	sentTokens int
	growth     growthWindow

	// compactAt is the index of the message holding the latest provider compaction
	// (transcript.Message.Compaction), or of the first message the agent's latest
	// own compaction kept (transcript.Message.AgentCompaction, CompactionKept), 0
	// when none: the context counts from it, and no output before it is pruned
	// (compacted). compactOuts is how many outputs (st.outs) come before it.
	compactAt, compactOuts int

	// Incremental decisions.
	events        eventQueue  // outputs to look at again at a given step
	ripe          []*outState // candidates whose re-ask gap has passed
	touched       []*outState // outputs to settle at this step
	pending       []*outState // outputs that were pending when added (filtered when used)
	kept          []*outState // outputs that were kept candidates when added (filtered when used: liveKept)
	pendingTokens int         // tokens the pending prunes would free
	stubs         map[string]string

	// asks is the ask in flight and the outputs waiting for the next, when asks
	// leave the step's path (asks.go).
	asks askState

	warned sync.Map       // failure kinds already logged
	small  map[int]string // fixedProtection's reason for a small output, by its tokens
}

// outState is one tool output's bookkeeping.
type outState struct {
	i          int // position in state.outs and state.items
	key        string
	tool       string
	summary    string
	msg, block int // where the output sits in the session's messages
	step       int
	tokens     int
	bytes      int    // length of the text in bytes
	hash       string // the text's hash (transcript.ToolOutput.Hash); "" when fixed
	retention  transcript.Retention
	fixed      string // a protection that never ends (keep, excluded, small), "" if none
	// paths are the files the call read or wrote, names what task or now would name
	// it by (paths, base names, command); both only for an output that may be asked
	// about (nil when fixed: most outputs of a long session are small).
	paths []string
	names []string

	// card is the card template (Age, use history and signals are set per ask);
	// nil for an output that can never be asked about: one protected for good
	// (fixed, from the start) or pruned (shed then: a pruned output is never
	// settled or asked again).
	card *cards.Card

	decision  Decision
	reason    string
	by        string
	score     float64 // latest OK keep-probability, -1 until scored
	decidedAt int

	dead     bool // a rule made it dead
	deadRule string
	deadBy   string
	// supersedes are the outputs a rule made dead by this one's call (their deadBy
	// is its key): their later uses are its uses (the label's live-copy credit),
	// so its card counts their live names too (liveNames).
	supersedes []*outState

	asks      int   // asks made, failed ones included (the back-off spaces retries too)
	lastAsk   int   // step of the latest ask
	lastOKAsk int   // step of the latest ask that gave a score
	uses      int   // counting uses so far (the use history)
	lastUse   int   // step of the latest counting use, 0 if none
	useSteps  []int // the steps of the latest uses (at most recentUses of them)
	recalled  bool  // its original was recalled (the stub stays)
	// recallResults counts the results of the recall tool that brought its original
	// back (indexed in the messages): the k-th is protected for the back-off
	// schedule's k-th gap (recallWindow).
	recallResults int
	// recallSteps are the steps its recalls count from as uses (a recall event and
	// the recall tool's result of one recall name the same step: counted once).
	recallSteps []int

	recallID   string // the id its original is stored under
	stubID     string // the id its stub names: recallID, or the recalled output's for a recall's result
	stub       string // the applied stub, or the stub a pending prune will get
	stubTokens int
	protectTil int    // protected through this step after a recall or re-read
	protectWhy string // why, while protected

	markedAt  int    // step at which its item was last marked changed (stepState.mark)
	queuedAt  int    // step of its live event in state.events, 0 if none
	gen       uint32 // invalidates older events
	inRipe    bool
	inPending bool
	inKept    bool // in state.kept
	inDue     bool
	inWait    bool // in state.asks.waiting
}

func newState(id string, bg *evidence.Background, digestTokens int, digestShare float64, digestMin, digestFrom int) *state {
	st := &state{id: id, bg: bg, digestTokens: digestTokens, digestShare: digestShare, digestMin: digestMin, digestFrom: digestFrom}
	st.clear()
	return st
}

// clear empties everything derived from the messages and the store (the client
// rewrote its history, or the state is new); the next step reads the store again.
// The mutex, the session id, the last call time and the logged failure kinds
// survive.
func (st *state) clear() {
	st.loaded, st.synced, st.version, st.own = false, false, 0, 0
	st.frozen, st.recalls, st.restored, st.recalled = nil, 0, nil, nil
	st.seen = 0
	st.indexed, st.lastPrint, st.steps = 0, "", 0
	st.outs, st.items, st.byKey, st.byRecall = nil, nil, map[string]*outState{}, map[string]*outState{}
	st.rules, st.corpus, st.tracker, st.awaiting = rules.NewIndex(), cards.NewCorpus(), evidence.NewTracker(), nil
	st.tracker.Background = st.bg
	st.tracker.DigestTokens, st.tracker.DigestMinTokens, st.tracker.DigestFrom = st.digestTokens, st.digestMin, st.digestFrom
	st.tracker.DigestShare = st.digestShare
	st.recallsSeen = nil
	st.trackErr = nil
	st.lastRead, st.lastEdit = map[string]*outState{}, map[string]int{}
	st.lastTouch, st.reads = map[string]int{}, map[string]int{}
	st.offsets, st.saved = []int{0}, fenwick{}
	st.ctxTokens, st.fullTokens, st.lastNow, st.allUses = 0, 0, "", 0
	st.compactAt, st.compactOuts = 0, 0
	st.sentTokens = 0
	st.growth.reset()
	st.events, st.ripe, st.touched, st.pending, st.pendingTokens = nil, nil, nil, nil, 0
	st.kept = nil
	st.stubs = map[string]string{}
	// An ask in flight stays in flight (one per session) and is dropped when it
	// comes back; its outputs are indexed and asked about anew.
	st.asks.gen++
	st.asks.waiting = nil
}

// fingerprint identifies a message cheaply, to notice a client that rewrote history.
func fingerprint(m *transcript.Message) string {
	f := fmt.Sprintf("%s|%d|%d|%d", m.Role, len(m.Text), len(m.Calls), len(m.Outputs))
	if len(m.Calls) > 0 {
		f += "|" + m.Calls[0].ID
	}
	if len(m.Outputs) > 0 {
		f += "|" + m.Outputs[0].Key + "|" + m.Outputs[0].Hash
	}
	return f
}

// index adds the step's new messages to the state. New outputs, outputs a rule
// killed, used or re-read go to st.touched.
func (a *Advisor) index(st *state, sp *stepState) {
	msgs := sp.msgs[st.indexed:]
	uses := trackAhead(st, msgs)
	if wait := corpusAhead(st, msgs); wait != nil {
		st.corpusAhead = true
		defer func() { wait(); st.corpusAhead = false }()
	}
	for i, m := range msgs {
		st.offsets = append(st.offsets, st.offsets[len(st.offsets)-1]+m.Tokens)
		st.ctxTokens += m.Tokens
		st.fullTokens += m.Tokens
		if m.Role == transcript.RoleAssistant {
			a.indexWords(st, m)
		}
		if uses != nil && st.tracker != nil { // none waits once the tracker stopped
			u, err := uses[i].wait()
			a.noteUses(st, u, err)
		} else {
			a.trackUses(st, m)
		}
		for bi, o := range m.Outputs {
			sp.mark(a.indexOutput(st, sp, m, bi, o))
		}
		for _, d := range st.rules.Add(m) {
			if os, ok := st.byKey[d.OutputKey]; ok && !os.dead {
				os.dead, os.deadRule, os.deadBy = true, string(d.Rule), d.By
				if by := st.byKey[d.By]; by != nil && by != os {
					by.supersedes = append(by.supersedes, os)
				}
				st.touched = append(st.touched, os)
				adoptSuperseder(st, os)
			}
		}
		a.indexReads(st, m)
		switch {
		case m.Compaction:
			a.compacted(st, m.Index, "the provider's compaction")
		case m.AgentCompaction && m.CompactionKept < m.Index:
			// A transcript's record of the agent's own compaction: the agent sent
			// nothing before the tail it kept from then on.
			a.compacted(st, m.Index-m.CompactionKept, "the agent's compaction")
		}
		st.lastPrint = fingerprint(m)
		st.indexed++
	}
	a.noteRecalls(st)
}

// adoptSuperseder names the call that made o dead when o's stub, applied before
// the rule was known here (a stub read back from the store after a restart), was
// applied for that very rule: the plan then shows what an advisor that saw the rule
// first shows.
func adoptSuperseder(st *state, o *outState) {
	if (o.decision == DecisionPruned || o.decision == DecisionRecalled) && o.by == "" &&
		strings.HasPrefix(o.reason, ruleReason(o.deadRule, o.deadBy)) {
		o.by = o.deadBy
		st.items[o.i] = o.item()
	}
}

// ruleReason is the reason of an output a rule made dead.
func ruleReason(rule, by string) string { return fmt.Sprintf("%s by call %s", rule, by) }

// indexWords handles an assistant message: a step, its words as "now", and the
// reaction of the outputs before it.
func (a *Advisor) indexWords(st *state, m *transcript.Message) {
	st.steps++
	if strings.TrimSpace(m.Text) != "" {
		st.lastNow = m.Text
	}
	shared := len(st.awaiting) > 1
	react := cards.ReactionOf(m)
	for _, o := range st.awaiting {
		if o.card != nil {
			o.card.Reaction = react
			o.card.SharedReaction = shared && react != ""
		}
	}
	clear(st.awaiting)
	st.awaiting = st.awaiting[:0]
}

// trackUses feeds m to the use history: every counting use it holds adds to its
// output's history, and a prune decided by a score before that use is reconsidered.
func (a *Advisor) trackUses(st *state, m *transcript.Message) {
	if st.tracker == nil {
		return
	}
	uses, err := st.tracker.Add(m)
	a.noteUses(st, uses, err)
}

// noteUses applies what the tracker said about one message (trackUses): its uses,
// or the error that stops the use history. Nothing to do once the tracker stopped.
func (a *Advisor) noteUses(st *state, uses []evidence.Use, err error) {
	if st.tracker == nil {
		return
	}
	if err != nil {
		// The session's steps or keys are inconsistent: no use history from here on
		// (cards then say "never" for later uses), nothing else changes.
		a.warnOnce(st, "use-history", "use history stopped for this session", err)
		st.tracker, st.trackErr = nil, err
		return
	}
	for _, u := range uses {
		if o := st.byKey[u.Key]; o != nil && u.Counts() {
			o.noteUse(u.Step)
			st.allUses++
			st.items[o.i].Uses = o.uses // the item shows the use history even when its decision stays
			st.touched = append(st.touched, o)
		}
	}
}

// indexOutput adds output o, block bi of message m, and returns its state.
func (a *Advisor) indexOutput(st *state, sp *stepState, m *transcript.Message, bi int, o *transcript.ToolOutput) *outState {
	os := a.newOut(st, m, bi, o)
	st.outs = append(st.outs, os)
	st.items = append(st.items, os.item())
	st.byKey[o.Key] = os
	st.byRecall[os.recallID] = os
	st.awaiting = append(st.awaiting, os)
	if !st.corpusAhead {
		st.corpus.Add(o.Text)
	}
	st.touched = append(st.touched, os)
	if c := o.Call; c != nil {
		for _, p := range os.paths { // the copies: a map assignment stores the key it is given
			st.lastTouch[p] = o.Step
			switch {
			case o.Failed():
			case c.Action == toolcall.ActionEdit || c.Action == toolcall.ActionWrite:
				st.lastEdit[p] = o.Step
			case c.Action == toolcall.ActionRead:
				st.reads[p]++
			}
		}
	}
	if os.fixed != "" {
		os.paths = nil // the maps hold what they need; a fixed output is never asked about
	}
	if asks := st.restored[o.Key]; len(asks) > 0 {
		os.restore(asks)
		delete(st.restored, o.Key)
	}
	if fs, ok := st.frozen[o.Key]; ok {
		a.prune(st, os, fs.Stub, tokencount.Count(fs.Stub), fs.Reason, fs.Score, fs.Step)
	}
	if at, ok := st.recalled[o.Key]; ok {
		delete(st.recalled, o.Key)
		a.recall(st, sp, os, at)
	}
	return os
}

// compacted notes a compaction (docs/DESIGN.md "Compaction: what pruning is for")
// whose context starts at message at: a provider's compaction in that message (the
// provider reads from it on), or the first message of the tail the agent's own
// compaction kept, as a transcript records it (the agent sent nothing before it
// again). The context the advisor counts starts there, and no output before it is
// pruned, for good (the provider ignores them, or the agent no longer sends them,
// and a rewrite there would only bust the cache). Stubs applied before it stay,
// frozen. what names the compaction in the outputs' reason.
func (a *Advisor) compacted(st *state, at int, what string) {
	if at <= st.compactAt {
		return
	}
	st.ctxTokens -= st.offset(at) - st.offset(st.compactAt)
	st.fullTokens -= st.offsets[at] - st.offsets[st.compactAt]
	st.compactAt = at
	why := fmt.Sprintf("before %s in message %d", what, at)
	for ; st.compactOuts < len(st.outs) && st.outs[st.compactOuts].msg < at; st.compactOuts++ {
		o := st.outs[st.compactOuts]
		if o.fixed == "" && o.decision != DecisionPruned && o.decision != DecisionRecalled {
			o.fixed = why
			st.touched = append(st.touched, o)
		}
	}
}

// ctxOffset returns the tokens of the counted context (from the latest
// compaction on) before message msg, as it is sent now.
func (st *state) ctxOffset(msg int) int {
	return st.offset(msg) - st.offset(st.compactAt)
}

// recallSeen is one recall index found: the original recalled and the step the
// recall counts from.
type recallSeen struct {
	orig *outState
	at   int
}

// recallWindow is how many steps the n-th recall of one original (from 1) is
// protected for: the ask schedule's n-th gap (3, 6, 12, 24 by default), so an
// output the agent keeps needing is stubbed again less and less often.
func (a *Advisor) recallWindow(n int) int { return a.schedule.Gap(n) }

// noteRecalls notes the recalls index found this step as uses of their originals
// (recallUse), once the tracker has every message of the step.
func (a *Advisor) noteRecalls(st *state) {
	for _, r := range st.recallsSeen {
		a.recallUse(st, r.orig, r.at)
		st.touched = append(st.touched, r.orig) // a prune its score decided is reconsidered
	}
	clear(st.recallsSeen)
	st.recallsSeen = st.recallsSeen[:0]
}

// recallUse notes a recall of o at step at as a use (the strongest evidence there
// is), once per step: the recall event a recall records and the recall tool's
// result that brings the original back are one recall.
func (a *Advisor) recallUse(st *state, o *outState, at int) {
	if st.tracker == nil || at <= o.step || slices.Contains(o.recallSteps, at) {
		return
	}
	if err := st.tracker.AddRecall(o.key, at); err != nil {
		return
	}
	o.recallSteps = append(o.recallSteps, at)
	o.noteUse(at)
	st.allUses++
	st.items[o.i].Uses = o.uses
}

// indexReads: a read answered "unchanged since last read" shows the agent needed the
// earlier read again: protect that one for a back-off window.
func (a *Advisor) indexReads(st *state, m *transcript.Message) {
	window := a.schedule.Gap(0)
	for _, o := range m.Outputs {
		c := o.Call
		if c == nil || c.Action != toolcall.ActionRead || c.Path == "" {
			continue
		}
		switch {
		case o.Unchanged:
			if prev := st.lastRead[c.Path]; prev != nil && prev.decision != DecisionPruned && o.Step+window > prev.protectTil {
				prev.protectTil = o.Step + window
				prev.protectWhy = fmt.Sprintf("re-read at step %d", o.Step)
				st.touched = append(st.touched, prev)
			}
		case !o.Failed():
			st.lastRead[strings.Clone(c.Path)] = st.byKey[o.Key] // the map keeps the key it is given
		}
	}
}

// newOut builds the bookkeeping of output o, block bi of message m, with the
// protections that never end.
func (a *Advisor) newOut(st *state, m *transcript.Message, bi int, o *transcript.ToolOutput) *outState {
	os := &outState{
		i: len(st.outs), key: o.Key, msg: m.Index, block: bi,
		step: o.Step, tokens: o.Tokens, bytes: len(o.Text),
		retention: m.Retention, score: -1, decision: DecisionKeep,
		recallID: a.recallID(st, o.Key),
	}
	os.stubID = os.recallID
	if c := o.Call; c != nil {
		// Copies: in some formats a call's strings are pieces of a larger text (an
		// SWE-agent action inside the model's output), which they would keep alive.
		os.tool, os.summary = strings.Clone(c.Name), strings.Clone(c.Summary)
		os.paths = cloneAll(c.Paths)
		if orig := a.recalledBy(st, c); orig != nil {
			// A recall's result holds the original of orig: its stub names the same
			// recall id (docs/DESIGN.md "Recall"), and it is protected for a back-off
			// window that grows with each recall of that original (3, 6, 12, …
			// steps by default). The recall is a use of the original, counted from
			// the step after the call, as a recall event is.
			orig.recallResults++
			n := orig.recallResults
			os.stubID = orig.recallID
			os.protectTil = o.Step + a.recallWindow(n)
			os.protectWhy = fmt.Sprintf("recall %d of %s at step %d (protected through step %d)", n, orig.recallID, o.Step, os.protectTil)
			st.recallsSeen = append(st.recallsSeen, recallSeen{orig, o.Step + 1})
		}
	}
	os.fixed = a.fixedProtection(st, os, m.Retention)
	if os.fixed != "" {
		// Never a candidate: no card, hash or names (most outputs of a long session
		// are small); its paths serve indexOutput only.
		os.decision, os.reason = DecisionProtected, os.fixed
		return os
	}
	os.hash = o.Hash
	if c := o.Call; c != nil {
		os.names = namesOf(os.paths, c.Command)
	}
	os.card = cardTemplate(o)
	return os
}

// cardTemplate returns the card of o at its own step, holding copies, not
// substrings: the output text must not stay in memory.
func cardTemplate(o *transcript.ToolOutput) *cards.Card {
	c := cards.New(o, o.Step)
	c.Head, c.Tail = strings.Clone(c.Head), strings.Clone(c.Tail)
	c.Args = strings.Clone(c.Args)
	c.Tokens = o.Tokens
	if o.Call != nil {
		c.Action = string(o.Call.Action)
	}
	return &c
}

// fixedProtection returns the protection of o that never ends (docs/DESIGN.md step 2):
// the caller's "keep", an excluded tool (unless the caller said "disposable"), or
// too small a size; "" when none applies.
func (a *Advisor) fixedProtection(st *state, o *outState, r transcript.Retention) string {
	switch {
	case r == transcript.RetentionKeep:
		return "caller marked keep"
	case a.Config.Excluded(o.tool) && r != transcript.RetentionDisposable:
		return "excluded tool " + o.tool
	case o.tokens < a.Config.MinCandidateTokens:
		// One string per size, shared by the session's outputs of that size.
		why, ok := st.small[o.tokens]
		if !ok {
			why = fmt.Sprintf("small (%d < %d tokens)", o.tokens, a.Config.MinCandidateTokens)
			if st.small == nil {
				st.small = map[int]string{}
			}
			st.small[o.tokens] = why
		}
		return why
	}
	return ""
}

// namesOf returns what the task or the agent's words would name a call's output by:
// each path and its base name (at least 4 characters), and a shell call's command.
func namesOf(paths []string, command string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, p)
		if b := path.Base(p); b != p && len(b) >= 4 {
			out = append(out, b)
		}
	}
	if cmd := strings.TrimSpace(command); len(cmd) >= 4 && len(paths) == 0 {
		out = append(out, strings.Clone(cmd))
	}
	return out
}

// cloneAll copies every string of ss (nil for none).
func cloneAll(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.Clone(s)
	}
	return out
}

// named reports whether text names one of names.
func named(text string, names []string) bool {
	for _, n := range names {
		if strings.Contains(text, n) {
			return true
		}
	}
	return false
}

// recentWindow is the span, in steps, of the RecentUses signal.
const recentWindow = 10

// noteUse records a counting use of o at step u. Uses come in step order, except a
// recall restored after a restart, noted when its output is indexed, before the
// uses of the steps up to it: useSteps stays sorted, keeping the latest
// recentWindow steps, and lastUse is the latest step.
func (o *outState) noteUse(u int) {
	o.uses++
	o.lastUse = max(o.lastUse, u)
	i, _ := slices.BinarySearch(o.useSteps, u+1) // after every equal step
	if len(o.useSteps) >= recentWindow {
		if i == 0 {
			return // older than every step kept
		}
		copy(o.useSteps, o.useSteps[1:i])
		i--
		o.useSteps[i] = u
		return
	}
	o.useSteps = slices.Insert(o.useSteps, i, u)
}

// recentUses counts o's uses in the recentWindow steps before T.
func (o *outState) recentUses(T int) int {
	n := 0
	for _, u := range o.useSteps {
		if T-u <= recentWindow {
			n++
		}
	}
	return n
}

// restore sets o's ask history from the stored asks of a session advised before
// (in the order made): the count and steps of asks, and the latest score.
func (o *outState) restore(asks []AskRecord) {
	for _, r := range asks {
		o.asks++
		o.lastAsk = r.Step
		if r.OK {
			o.score, o.lastOKAsk = r.Score, r.Step
		}
	}
}

// scoredOut reports whether o's latest score puts it under the cutoff and the agent
// has not used it since that score was given (a use at step u is seen from plan step
// u+1, so an ask at step s knew the uses before s).
func (a *Advisor) scoredOut(o *outState) bool {
	return o.lastOKAsk > 0 && o.score < a.cutoffOf(o) && o.lastUse < o.lastOKAsk
}

// prune marks o as replaced by stub text of stubTokens tokens (applied now or
// earlier, here or in another process sharing the store), keeping token counts right.
func (a *Advisor) prune(st *state, o *outState, stub string, stubTokens int, reason string, score float64, T int) {
	if o.decision == DecisionPending {
		st.pendingTokens -= o.tokens - o.stubTokens
	}
	counted := 1 // the context counts o's tokens (o is not before a compaction)
	if o.msg < st.compactAt {
		counted = 0
	}
	if o.decision == DecisionPruned || o.decision == DecisionRecalled {
		st.ctxTokens += counted * (o.tokens - o.stubTokens)
		st.saved.add(o.msg, -(o.tokens - o.stubTokens))
	} else {
		o.by = ""
		if o.dead {
			o.by = o.deadBy
		}
	}
	o.stub, o.stubTokens = stub, stubTokens
	st.ctxTokens -= counted * (o.tokens - o.stubTokens)
	st.saved.add(o.msg, o.tokens-o.stubTokens)
	st.stubs[o.key] = stub
	o.decision, o.reason, o.score, o.decidedAt = DecisionPruned, reason, score, T
	o.card = nil // never asked again
	if o.recalled {
		o.decision = DecisionRecalled
	}
	st.items[o.i] = o.item()
}

// offset returns the tokens of the context before message msg as it is sent now
// (applied stubs in place).
func (st *state) offset(msg int) int {
	return st.offsets[msg] - st.saved.sum(msg)
}

// item renders o as a plan item.
func (o *outState) item() Item {
	it := Item{
		Key: o.key, Tool: o.tool, Summary: o.summary, Step: o.step, Tokens: o.tokens,
		Decision: o.decision, Reason: o.reason, By: o.by, Score: o.score,
		DecidedAt: o.decidedAt, RecallID: o.stubID, Uses: o.uses,
		Final: o.fixed != "" || o.decision == DecisionPruned || o.decision == DecisionRecalled,
	}
	if o.decision == DecisionPruned || o.decision == DecisionRecalled {
		it.Stub = o.stub
	}
	return it
}

// fenwick is a binary indexed tree of per-message sums (Fenwick 1994): add and
// prefix sum in O(log n), growing as messages are added.
type fenwick []int

// add adds v at index i (0-based).
func (f *fenwick) add(i, v int) {
	for len(*f) <= i {
		*f = append(*f, 0)
		// A new slot j (1-based n) covers (n - lowbit(n), n]: fill it from what
		// the smaller slots already hold.
		n := len(*f)
		low := n & -n
		for k := n - 1; k > n-low; k -= k & -k {
			(*f)[n-1] += (*f)[k-1]
		}
	}
	for n := i + 1; n <= len(*f); n += n & -n {
		(*f)[n-1] += v
	}
}

// sum returns the sum of indexes [0, i).
func (f fenwick) sum(i int) int {
	s := 0
	for n := min(i, len(f)); n > 0; n -= n & -n {
		s += f[n-1]
	}
	return s
}

// event asks to settle an output again at step at; gen must still match.
type event struct {
	at  int
	gen uint32
	o   *outState
}

// eventQueue is a min-heap of events by step (container/heap).
type eventQueue []event

func (q eventQueue) Len() int           { return len(q) }
func (q eventQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q eventQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)        { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*q = old[:len(old)-1]
	return e
}

// wakeAt queues o to be settled again at step at (replacing its earlier event).
func (st *state) wakeAt(o *outState, at int) {
	if o.queuedAt == at {
		return
	}
	o.gen++
	o.queuedAt = at
	heap.Push(&st.events, event{at: at, gen: o.gen, o: o})
}

// due pops the outputs whose event step has come (at or before T).
func (st *state) due(T int, f func(*outState)) {
	for len(st.events) > 0 && st.events[0].at <= T {
		e := heap.Pop(&st.events).(event)
		if e.gen != e.o.gen {
			continue
		}
		e.o.queuedAt = 0
		f(e.o)
	}
}
