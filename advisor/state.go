package advisor

import (
	"container/heap"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/rules"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// state is what the advisor keeps for one session between steps. Everything in it
// is derived once per message, when the message is first seen (DESIGN.md step 1), and
// every later step touches only what changes at that step: the new messages, the
// outputs whose protection ends or whose next ask comes (a queue keyed by step), the
// pending prunes, and the plan items and message slots that change. Output texts
// are not kept: they come with every call.
type state struct {
	mu sync.Mutex
	id string

	// What the store holds for the session (possibly written by other processes).
	loaded     bool                  // stubs and recalls read since the last reset
	synced     bool                  // the store was read without error at this step
	version    int64                 // VersionedStore version at the last read
	frozen     map[string]StubRecord // stubs in the store, by output key
	recalls    int                   // recall events already applied
	recalledAt map[string]time.Time  // output key -> time of its latest recall event

	// The index.
	indexed    int                   // messages indexed so far
	lastPrint  string                // fingerprint of the last indexed message
	lastMsgs   []*transcript.Message // the message slice of the previous step
	steps      int                   // assistant messages indexed
	outs       []*outState           // every output, in session order
	items      []Item                // outs[i].item(), maintained in place
	byKey      map[string]*outState
	rules      *rules.Index
	corpus     *cards.Corpus
	awaiting   []*outState          // outputs whose reaction is not known yet
	lastRead   map[string]*outState // path -> latest read output showing the file
	ctxTokens  int                  // tokens of the indexed messages with applied stubs
	fullTokens int                  // tokens of the indexed messages as sent by the agent
	lastCall   time.Time
	lastNow    string // the latest non-empty assistant text

	// Incremental decisions.
	events        eventQueue  // outputs to look at again at a given step
	ripe          []*outState // candidates whose re-ask gap has passed, waiting for the session to be over budget
	touched       []*outState // outputs to settle at this step (new, killed by a rule, re-read)
	pending       []*outState // outputs that were pending when added (filtered when used)
	pendingTokens int         // tokens the pending prunes would free (originals minus stubs)
	restored      int         // originals brought back by recalls, not yet reported in a plan

	// The rewritten messages.
	view       []*transcript.Message // the messages with applied stubs, as last returned
	viewShared bool                  // view was handed out: copy before changing a slot
	stubbed    map[int]int           // message index -> outputs of it with an applied stub
	dirty      map[int]bool          // message slots to rebuild at the end of this step

	warned sync.Map // failure kinds already logged
}

// outState is one tool output's bookkeeping.
type outState struct {
	i           int // position in state.outs and state.items
	key, callID string
	tool        string
	summary     string
	msg, block  int // where the output sits in the session's messages
	step        int
	tokens      int
	bytes       int // length of the text in bytes
	hash        string
	retention   transcript.Retention
	fixed       string // a protection that never ends (keep, excluded, small), "" if none

	card cards.Card // template: Age is set per ask

	decision  Decision
	reason    string
	by        string
	score     float64 // -1 until scored
	decidedAt int

	dead     bool // a rule made it dead
	deadRule string
	deadBy   string

	asks    int // asks made since indexing or the last recall (failed ones included: the back-off spaces retries too)
	lastAsk int

	recallID   string
	stub       string // the applied stub, or the stub a pending prune will get
	stubTokens int
	protectTil int    // protected through this step after a recall or re-read
	protectWhy string // why, while protected

	queuedAt  int    // step of its live event in state.events, 0 if none
	gen       uint32 // invalidates older events
	inRipe    bool
	inPending bool
	inDue     bool
}

func newState(id string) *state {
	st := &state{id: id}
	st.clear()
	return st
}

// clear empties everything derived from the messages and the store.
func (st *state) clear() {
	st.loaded, st.synced, st.version = false, false, 0
	st.frozen, st.recalls, st.recalledAt = nil, 0, map[string]time.Time{}
	st.indexed, st.lastPrint, st.lastMsgs, st.steps = 0, "", nil, 0
	st.outs, st.items, st.byKey = nil, nil, map[string]*outState{}
	st.rules, st.corpus, st.awaiting = rules.NewIndex(), cards.NewCorpus(), nil
	st.lastRead = map[string]*outState{}
	st.ctxTokens, st.fullTokens, st.lastNow = 0, 0, ""
	st.events, st.ripe, st.touched, st.pending, st.pendingTokens, st.restored = nil, nil, nil, nil, 0, 0
	st.view, st.viewShared = nil, false
	st.stubbed, st.dirty = map[int]int{}, map[int]bool{}
}

// reset forgets everything indexed (the client rewrote its history); frozen stubs
// and recalls are read again from the store on this step. The mutex, the session
// id, the last call time and the logged failure kinds survive.
func (st *state) reset() { st.clear() }

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

// index adds messages [st.indexed, len(msgs)) to the state; T is the step being
// prepared. New outputs and outputs a rule killed go to st.touched.
func (a *Advisor) index(st *state, msgs []*transcript.Message, T int) {
	window := a.schedule.Gap(0)
	for _, m := range msgs[st.indexed:] {
		st.ctxTokens += m.Tokens
		st.fullTokens += m.Tokens
		if m.Role == transcript.RoleAssistant {
			st.steps++
			if strings.TrimSpace(m.Text) != "" {
				st.lastNow = m.Text
			}
			// The first assistant message after an output is its reaction.
			shared := len(st.awaiting) > 1
			react := cards.ReactionOf(m)
			for _, o := range st.awaiting {
				o.card.Reaction = react
				o.card.SharedReaction = shared && react != ""
			}
			clear(st.awaiting)
			st.awaiting = st.awaiting[:0]
		}
		for bi, o := range m.Outputs {
			os := a.newOut(st, m, bi, o)
			st.outs = append(st.outs, os)
			st.items = append(st.items, os.item())
			st.byKey[o.Key] = os
			st.awaiting = append(st.awaiting, os)
			st.corpus.Add(o.Text)
			st.touched = append(st.touched, os)
			if fs, ok := st.frozen[o.Key]; ok && a.stubStands(st, o.Key, fs) {
				a.prune(st, os, fs.Stub, transcript.CountTokens(fs.Stub), fs.Reason, fs.Score, fs.Step)
			}
		}
		for _, d := range st.rules.Add(m) {
			if os, ok := st.byKey[d.OutputKey]; ok && !os.dead {
				os.dead, os.deadRule, os.deadBy = true, string(d.Rule), d.By
				st.touched = append(st.touched, os)
			}
		}
		// A read answered "unchanged since last read" shows the agent needed the
		// earlier read again: protect that one for a back-off window.
		for _, o := range m.Outputs {
			c := o.Call
			if c == nil || c.Action != transcript.ActionRead || c.Path == "" {
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
				st.lastRead[c.Path] = st.byKey[o.Key]
			}
		}
		st.lastPrint = fingerprint(m)
		if st.stubbed[m.Index] > 0 {
			m = a.slot(st, m)
			delete(st.dirty, m.Index)
		}
		st.view = append(st.view, m)
		st.indexed++
	}
}

// newOut builds the bookkeeping of output o, block bi of message m.
func (a *Advisor) newOut(st *state, m *transcript.Message, bi int, o *transcript.ToolOutput) *outState {
	cfg := a.Config
	os := &outState{
		i: len(st.outs), key: o.Key, callID: o.CallID, msg: m.Index, block: bi,
		step: o.Step, tokens: o.Tokens, bytes: len(o.Text), hash: o.Hash,
		retention: m.Retention, score: -1, decision: DecisionKeep,
		recallID: a.recallID(st, o.Key),
	}
	excluded := false
	if o.Call != nil {
		os.tool = o.Call.Name
		os.summary = o.Call.Summary
		excluded = cfg.Excluded(o.Call.Name)
	}
	os.card = cards.New(o, o.Step)
	// Keep copies, not substrings: the output text must not stay in memory.
	os.card.Head, os.card.Tail = strings.Clone(os.card.Head), strings.Clone(os.card.Tail)
	os.card.Args = strings.Clone(os.card.Args)
	switch {
	case m.Retention == transcript.RetentionKeep:
		os.fixed = "caller marked keep"
	case excluded && m.Retention != transcript.RetentionDisposable:
		// An explicit "disposable" from the caller overrides the tool-name default.
		os.fixed = "excluded tool " + os.tool
	case os.tokens < cfg.MinCandidateTokens:
		os.fixed = fmt.Sprintf("small (%d < %d tokens)", os.tokens, cfg.MinCandidateTokens)
	case os.bytes <= len(a.stubText(os, "")):
		os.fixed = stubNotShorter
	}
	if os.fixed != "" {
		os.decision, os.reason = DecisionProtected, os.fixed
	}
	return os
}

const stubNotShorter = "stub not shorter than the output"

// stubStands reports whether a stored stub still applies: it was saved after the
// latest recall of the output (or the output was never recalled).
func (a *Advisor) stubStands(st *state, key string, s StubRecord) bool {
	at, recalled := st.recalledAt[key]
	return !recalled || s.At.After(at)
}

// prune marks o as replaced by stub text of stubTokens tokens (applied now or
// earlier, here or in another process sharing the store), keeping token counts and
// message slots right.
func (a *Advisor) prune(st *state, o *outState, stub string, stubTokens int, reason string, score float64, T int) {
	if o.decision == DecisionPending {
		st.pendingTokens -= o.tokens - o.stubTokens
	}
	if o.decision == DecisionPruned {
		st.ctxTokens += o.tokens - o.stubTokens
	} else {
		st.stubbed[o.msg]++
		o.by = ""
		if o.dead {
			o.by = o.deadBy
		}
	}
	o.stub, o.stubTokens = stub, stubTokens
	st.ctxTokens -= o.tokens - o.stubTokens
	o.decision, o.reason, o.score, o.decidedAt = DecisionPruned, reason, score, T
	st.dirty[o.msg] = true
	st.items[o.i] = o.item()
}

// slot returns message m with the applied stubs of its outputs in place of their
// texts: a copy when at least one output is stubbed, else m itself.
func (a *Advisor) slot(st *state, m *transcript.Message) *transcript.Message {
	if st.stubbed[m.Index] == 0 {
		return m
	}
	cp := *m
	cp.Outputs = make([]*transcript.ToolOutput, len(m.Outputs))
	for j, o := range m.Outputs {
		cp.Outputs[j] = o
		if os := st.byKey[o.Key]; os != nil && os.decision == DecisionPruned && os.msg == m.Index {
			oc := *o
			oc.Text = os.stub
			cp.Outputs[j] = &oc
		}
	}
	return &cp
}

// prepareView makes st.view[:st.indexed] hold msgs' messages: when the caller passes
// a slice over a different array than last time (a proxy parsing every request
// anew), the slots are rebuilt from msgs.
func (a *Advisor) prepareView(st *state, msgs []*transcript.Message) {
	defer func() { st.lastMsgs = msgs }()
	if st.indexed == 0 || len(st.lastMsgs) > 0 && &msgs[0] == &st.lastMsgs[0] {
		return
	}
	view := make([]*transcript.Message, st.indexed, len(msgs)+len(msgs)/4+8)
	copy(view, msgs[:st.indexed])
	for i := range st.stubbed {
		if i < st.indexed {
			view[i] = a.slot(st, msgs[i])
		}
	}
	st.view, st.viewShared = view, false
	clear(st.dirty)
}

// patchView rebuilds the message slots changed at this step (stubs applied or
// adopted, originals restored), copying the view first if it was handed out.
func (a *Advisor) patchView(st *state, msgs []*transcript.Message) {
	if len(st.dirty) == 0 {
		return
	}
	if st.viewShared {
		view := make([]*transcript.Message, len(st.view), len(st.view)+len(st.view)/4+8)
		copy(view, st.view)
		st.view, st.viewShared = view, false
	}
	for i := range st.dirty {
		if i < len(st.view) && i < len(msgs) {
			st.view[i] = a.slot(st, msgs[i])
		}
	}
	clear(st.dirty)
}

// item renders o as a plan item.
func (o *outState) item() Item {
	it := Item{
		Key: o.key, Tool: o.tool, Summary: o.summary, Step: o.step, Tokens: o.tokens,
		Decision: o.decision, Reason: o.reason, By: o.by, Score: o.score,
		DecidedAt: o.decidedAt, RecallID: o.recallID,
	}
	if o.decision == DecisionPruned {
		it.Stub = o.stub
	}
	return it
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
