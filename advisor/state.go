package advisor

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/rules"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// state is what the advisor keeps for one session between steps. Everything in it
// is derived once per message, when the message is first seen (DESIGN.md step 1);
// output texts are not kept: they come with every call.
type state struct {
	mu         sync.Mutex
	id         string
	loaded     bool                  // frozen stubs and recalls read from the store
	frozen     map[string]StubRecord // stubs applied in an earlier process, by output key
	recalls    int                   // recall events already applied
	indexed    int                   // messages indexed so far
	lastPrint  string                // fingerprint of the last indexed message
	steps      int                   // assistant messages indexed
	outs       []*outState
	byKey      map[string]*outState
	rules      *rules.Index
	corpus     *cards.Corpus
	awaiting   []*outState // outputs whose reaction is not known yet
	ctxTokens  int         // tokens of the indexed messages with applied stubs
	fullTokens int         // tokens of the indexed messages as sent by the agent
	lastCall   time.Time
	lastNow    string   // the latest assistant text
	warned     sync.Map // failure kinds already logged
}

// outState is one tool output's bookkeeping.
type outState struct {
	key, callID string
	tool        string
	summary     string
	msg, block  int // where the output sits in the session's messages
	step        int
	tokens      int
	hash        string
	excluded    bool
	retention   transcript.Retention

	card cards.Card // template: Age is set per ask

	decision  Decision
	reason    string
	by        string
	score     float64 // -1 until scored
	decidedAt int

	dead     bool // a rule made it dead
	deadRule string
	deadBy   string

	asks    int // asks made (failed ones included: the back-off spaces retries too)
	lastAsk int

	recallID    string
	stub        string
	stubTokens  int
	recalledAt  int
	protectTill int // protected through this step after a recall
}

func newState(id string) *state {
	return &state{
		id:     id,
		byKey:  map[string]*outState{},
		rules:  rules.NewIndex(),
		corpus: cards.NewCorpus(),
	}
}

// reset forgets everything indexed (the client rewrote its history); frozen stubs
// and recalls are read again from the store on the next step. The mutex, the session
// id, the last call time and the logged failure kinds survive.
func (st *state) reset() {
	st.loaded, st.frozen, st.recalls, st.indexed, st.lastPrint, st.steps = false, nil, 0, 0, "", 0
	st.outs, st.byKey = nil, map[string]*outState{}
	st.rules, st.corpus, st.awaiting = rules.NewIndex(), cards.NewCorpus(), nil
	st.ctxTokens, st.fullTokens, st.lastNow = 0, 0, ""
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

// index adds messages [st.indexed, len(msgs)) to the state.
func (a *Advisor) index(st *state, msgs []*transcript.Message) {
	for _, m := range msgs[st.indexed:] {
		st.ctxTokens += m.Tokens
		st.fullTokens += m.Tokens
		if m.Role == transcript.RoleAssistant {
			st.steps++
			st.lastNow = m.Text
			// The first assistant message after an output is its reaction.
			shared := len(st.awaiting) > 1
			react := cards.ReactionOf(m)
			for _, o := range st.awaiting {
				o.card.Reaction = react
				o.card.SharedReaction = shared && react != ""
			}
			st.awaiting = st.awaiting[:0]
		}
		for bi, o := range m.Outputs {
			os := &outState{
				key: o.Key, callID: o.CallID, msg: m.Index, block: bi,
				step: o.Step, tokens: o.Tokens, hash: o.Hash,
				retention: m.Retention, score: -1, decision: DecisionKeep,
				recallID: RecallID(st.id, o.Key),
			}
			if o.Call != nil {
				os.tool = o.Call.Name
				os.summary = o.Call.Summary
				os.excluded = a.Config.Excluded(o.Call.Name)
			}
			os.card = cards.New(o, o.Step)
			// Keep copies, not substrings: the output text must not stay in memory.
			os.card.Head, os.card.Tail = strings.Clone(os.card.Head), strings.Clone(os.card.Tail)
			st.outs = append(st.outs, os)
			st.byKey[o.Key] = os
			st.awaiting = append(st.awaiting, os)
			st.corpus.Add(o.Text)
			if fs, ok := st.frozen[o.Key]; ok {
				os.decision = DecisionPruned
				os.reason = fs.Reason
				os.score = fs.Score
				os.decidedAt = fs.Step
				os.stub = fs.Stub
				os.stubTokens = transcript.CountTokens(fs.Stub)
				st.ctxTokens -= os.tokens - os.stubTokens
			}
		}
		for _, d := range st.rules.Add(m) {
			if os, ok := st.byKey[d.OutputKey]; ok && !os.dead {
				os.dead, os.deadRule, os.deadBy = true, string(d.Rule), d.By
			}
		}
		st.lastPrint = fingerprint(m)
		st.indexed++
	}
}
