package advisor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/planner"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// stepState is one step in progress: its inputs and what it has done so far.
type stepState struct {
	s       *transcript.Session
	msgs    []*transcript.Message
	T       int // the step being prepared
	now     time.Time
	cold    bool // the prompt cache expired since the session's last step
	price   prices.Model
	plan    Plan
	changes []DecisionRecord
	due     []*outState
	record  StepRecord
	changed []int // indexes of the items changed at this step (outState.mark)
	limit   Limit // the session's hard limit at this step (limit)
}

// mark notes that o's plan item changed at this step.
func (sp *stepState) mark(o *outState) {
	if o.markedAt != sp.T {
		o.markedAt = sp.T
		sp.changed = append(sp.changed, o.i)
	}
}

// step runs the pipeline for one step; st is locked. Each phase is a method.
func (a *Advisor) step(ctx context.Context, st *state, s *transcript.Session) (Plan, error) {
	sp, err := a.begin(ctx, st, s)
	if err != nil {
		return sp.plan, err
	}
	a.index(st, sp)
	a.limit(st, sp)
	a.settleChanged(st, sp)
	if err := a.askDue(ctx, st, sp); err != nil {
		return sp.plan, err
	}
	a.decide(ctx, st, sp)
	a.finish(ctx, st, sp)
	return sp.plan, nil
}

// begin checks the messages, resets a session whose history changed, counts the
// step, reads the store, and tells whether the cache went cold.
func (a *Advisor) begin(ctx context.Context, st *state, s *transcript.Session) (*stepState, error) {
	cfg := a.Config
	sp := &stepState{s: s, msgs: s.Messages}
	sp.plan = Plan{SessionID: st.id, Budget: cfg.BudgetTokens(), HardLimit: cfg.HardLimitTokens()}
	msgs := sp.msgs
	// A client that rewrote or shortened its history invalidates the index: start
	// over (frozen stubs and the ask history come back from the store).
	if st.indexed > len(msgs) || st.indexed > 0 && (msgs[st.indexed-1] == nil || fingerprint(msgs[st.indexed-1]) != st.lastPrint) {
		st.clear()
	}
	sp.T = st.steps + 1
	for i, m := range msgs[st.indexed:] {
		if m == nil {
			return sp, fmt.Errorf("%w: message %d is nil", ErrNoSession, st.indexed+i)
		}
		if m.Role == transcript.RoleAssistant {
			sp.T++
		}
	}
	sp.plan.Step = sp.T
	sp.price = a.priceModel(s)
	a.syncStore(ctx, st, sp)
	if err := ctx.Err(); err != nil {
		return sp, err
	}
	sp.now = a.Clock()
	ttl := a.cacheTTL(s, sp.price)
	sp.cold = !st.lastCall.IsZero() && sp.now.Sub(st.lastCall) > ttl
	if !sp.now.IsZero() {
		st.lastCall = sp.now
	}
	return sp, nil
}

// syncStore reads what the store holds of the session beyond this state, with one
// read of its mark (SessionMark) when nothing changed: when another process
// advised steps since the last one this state holds (the mark's step is past
// st.seen), their asks and latest step record (catchUp); when the version moved,
// the stubs and recalls (recalls since the last read mark their outputs, stubs
// applied by another process are adopted so every process sends the same bytes);
// and the whole ask history when the state is new. On a read error it sets
// plan.StorageError and st.synced = false: nothing new is pruned. A version that
// moved by exactly the stubs this process saved since the last read (st.own) moved
// by nobody else's writes: the version counts every stub and recall once, so
// another process's write would move it further.
func (a *Advisor) syncStore(ctx context.Context, st *state, sp *stepState) {
	st.synced = false
	fail := func(what string, err error) {
		sp.plan.StorageError = fmt.Sprintf("cannot read %s, nothing new pruned: %v", what, err)
		a.warnOnce(st, "storage-read", "storage: cannot read the session's stubs and recalls; pruning paused", err)
	}
	m, err := a.Store.SessionMark(ctx, st.id)
	if err != nil {
		fail("the session version", err)
		return
	}
	if st.loaded && m.Step > st.seen {
		h, err := a.Store.SessionHistoryBetween(ctx, st.id, st.seen, sp.T)
		if err != nil {
			fail("the session history", err)
			return
		}
		a.catchUp(st, h)
	}
	v := m.Version
	if st.loaded && v == st.version+st.own {
		st.version, st.own, st.synced = v, 0, true
		return
	}
	if !st.loaded {
		h, err := a.Store.SessionHistoryBetween(ctx, st.id, 0, sp.T)
		if err != nil {
			fail("the session history", err)
			return
		}
		a.restoreHistory(st, h)
	}
	stubs, err := a.Store.SessionStubs(ctx, st.id)
	if err != nil {
		fail("stubs", err)
		return
	}
	evs, err := a.Store.SessionRecalls(ctx, st.id)
	if err != nil {
		fail("recalls", err)
		return
	}
	a.adopt(st, sp, stubs, evs)
	st.loaded, st.synced, st.version, st.own = true, true, v, 0
}

// restoreHistory keeps the stored asks until their outputs are indexed, and takes
// what the latest stored step leaves to the next (stepAfter).
func (a *Advisor) restoreHistory(st *state, h History) {
	st.restored = map[string][]AskRecord{}
	a.catchUp(st, h)
}

// catchUp takes in the asks another process made at steps this state did not
// advise, and what the latest of them leaves to the next step (stepAfter): it is
// as if this state had advised them itself, since every other decision of those
// steps follows from the messages and the stubs. An indexed output's ask history
// moves on and it is settled again at this step; an output not indexed yet gets
// it when it is (st.restored).
func (a *Advisor) catchUp(st *state, h History) {
	for _, r := range h.Asks {
		if o := st.byKey[r.OutputKey]; o != nil {
			o.restore([]AskRecord{r})
			st.touched = append(st.touched, o)
			continue
		}
		if st.restored == nil {
			st.restored = map[string][]AskRecord{}
		}
		st.restored[r.OutputKey] = append(st.restored[r.OutputKey], r)
	}
	st.stepAfter(h.Last)
}

// stepAfter takes from last, the session's latest stored step record, what the
// next step continues from when last is past every step this state holds: the
// time of the step (the cache-TTL rule), the context it sent and the largest
// growth so far (the hard limit's margin).
func (st *state) stepAfter(last StepRecord) {
	if last.Step <= st.seen {
		return
	}
	st.seen = last.Step
	st.lastFull, st.fullKnown = last.FullTokens, true
	if last.At.After(st.lastCall) {
		st.lastCall = last.At
	}
	st.sentTokens = last.ContextTokens
	st.growth.add(last.MaxGrowth) // the margin that step used, kept for the window
}

// adopt applies recall events and stubs read from the store.
func (a *Advisor) adopt(st *state, sp *stepState, stubs map[string]StubRecord, evs []RecallEvent) {
	if len(evs) < st.recalls {
		st.recalls = len(evs) // the store lost events; nothing to replay
	}
	for _, e := range evs[st.recalls:] {
		at := sp.T
		if e.Step > 0 {
			at = min(e.Step+1, sp.T) // the step after the latest one advised when recalled
		}
		if o := st.byKey[e.OutputKey]; o != nil {
			a.recall(st, sp, o, at)
			continue
		}
		// Not indexed yet (a restart reads the store before the messages): the
		// recall is applied when the output is, as of the same step.
		if st.recalled == nil {
			st.recalled = map[string]int{}
		}
		st.recalled[e.OutputKey] = at
	}
	st.recalls = len(evs)
	st.frozen = stubs
	for key, s := range stubs {
		o := st.byKey[key]
		if o == nil || (o.decision == DecisionPruned || o.decision == DecisionRecalled) && o.stub == s.Stub {
			continue
		}
		a.prune(st, o, s.Stub, tokencount.Count(s.Stub), s.Reason, s.Score, sp.T)
		sp.mark(o)
		sp.changes = append(sp.changes, a.record(st, o, sp.T))
	}
}

// recall handles a recall event of o as of step at (<= sp.T): the stub of a pruned
// output stays, frozen (the original reached the agent as the recall's own result);
// any other output (a pending one: another process pruned it and it was recalled
// there) is protected for a back-off window from at that grows with its recalls
// (recallWindow). Either way the recall is use-history evidence at step at, counted
// once with the recall tool's result of the same recall (recallUse).
func (a *Advisor) recall(st *state, sp *stepState, o *outState, at int) {
	a.recallUse(st, o, at)
	why := fmt.Sprintf("recalled at step %d", at)
	if o.decision == DecisionPruned {
		o.recalled = true
		a.setDecision(st, sp, o, DecisionRecalled, o.reason+"; "+why)
		return
	}
	o.protectTil = at + a.recallWindow(max(len(o.recallSteps), 1))
	o.protectWhy = why
	st.touched = append(st.touched, o)
}

// limit sets the step's hard limit (Config.HardLimitFor: the session's agent,
// Config.Agent; the request's compaction trigger; the largest growth of the
// context in one step so far), less the request's tool definitions, and a budget
// no higher than it.
func (a *Advisor) limit(st *state, sp *stepState) {
	if st.sentTokens > 0 {
		st.growth.add(st.ctxTokens - st.sentTokens)
	}
	sp.limit = a.Config.HardLimitFor(a.Config.Agent, sp.s.CompactTrigger, st.growth.largest())
	// The agent's point and the provider's trigger count the tool definitions
	// the request carries; the context counted here is its messages only. Left
	// in, they came on top of the margin: Claude Code's 11,087 tokens of tools
	// took it past its point through the proxy (e2e TestClaudeCompaction).
	if tt := sp.s.ToolTokens; tt > 0 {
		sp.limit.Tools = tt
		sp.limit.Tokens = max(sp.limit.Tokens-tt, 1)
	}
	sp.plan.HardLimit, sp.plan.HardLimitSource = sp.limit.Tokens, sp.limit.Source
	sp.plan.ToolTokens = sp.limit.Tools
	sp.plan.Budget = min(sp.plan.Budget, sp.limit.Tokens)
}

// settleChanged brings up to date the outputs whose state can change at this step:
// those whose event came, and those indexed, killed, used or re-read now.
func (a *Advisor) settleChanged(st *state, sp *stepState) {
	st.due(sp.T, func(o *outState) { a.settle(st, sp, o) })
	for _, o := range st.touched {
		a.settle(st, sp, o)
	}
	clear(st.touched)
	st.touched = st.touched[:0]
	over := st.ctxTokens > sp.plan.Budget
	sp.plan.OverBudget = over
	if (over || sp.cold || a.Config.ReaskUnderBudget || a.offPath()) && len(st.ripe) > 0 {
		// Re-asks are due only while over budget, or when the cache is cold (a
		// rewrite is free now, so fresh scores matter), unless the config asks for
		// them always: scores barely move between asks, and asks cost. Asked off
		// the step's path they are due always: an answer comes after its step, so
		// a re-ask made when the cache went cold would miss that free rewrite
		// (docs/EVALUATION.md, "What the ask lag costs"); they cost the agent no
		// wait, and one ask in flight per session bounds the scorer's work.
		for _, o := range st.ripe {
			o.inRipe = false
			// An ask another process made since it ripened (catchUp) starts its
			// gap again: it is not due.
			if o.decision == DecisionKeep && sp.T-o.lastAsk >= a.askSchedule().Gap(o.asks) {
				a.queueAsk(sp, o)
			}
		}
		clear(st.ripe)
		st.ripe = st.ripe[:0]
	}
}

// settle brings o's decision up to date at step T: which protection holds, whether a
// rule or its score makes it pending, whether it is due for an ask, and when it must
// be looked at again. This is the one place protection is decided (protection, and
// the stub that would not be shorter).
func (a *Advisor) settle(st *state, sp *stepState, o *outState) {
	if o.decision == DecisionPruned || o.decision == DecisionRecalled {
		return
	}
	if why, until := a.protection(o, sp.T); why != "" {
		a.setDecision(st, sp, o, DecisionProtected, why)
		if until > 0 {
			st.wakeAt(o, until)
		}
		return
	}
	reason, why := a.pruneReason(o)
	switch {
	case reason == "":
		a.keep(st, sp, o)
	case o.decision == DecisionPending && o.reason == reason:
		st.items[o.i] = o.item()
	default:
		stub := a.stubText(st, o, why)
		n := tokencount.Count(stub)
		if len(stub) >= o.bytes || n >= o.tokens {
			o.fixed, o.card = stubNotShorter, nil // a protection that never ends: no more asks
			a.setDecision(st, sp, o, DecisionProtected, stubNotShorter)
			return
		}
		a.pend(st, sp, o, reason, stub, n)
	}
}

// pruneReason returns why o, a candidate, is to be pruned: a rule killed it, the
// caller called it disposable, or its score is under the cutoff; "", "" when none
// holds. reason is the decision's (plans, records: "score 0.03 < cutoff 0.05"), why
// the stub's, without the threshold ("score 0.03": stubWhy).
func (a *Advisor) pruneReason(o *outState) (reason, why string) {
	switch {
	case o.dead:
		r := ruleReason(o.deadRule, o.deadBy)
		return r, r
	case o.retention == transcript.RetentionDisposable:
		return "disposable", "disposable"
	case a.scoredOut(o):
		sc, cut := scoreAndCutoff(o.score, a.cutoffOf(o))
		return "score " + sc + " < cutoff " + cut, stubWhy("", o.score)
	}
	return "", ""
}

// stubWhy is the reason a stub gives for a prune by score: the forced rewrite that
// made it, if any ("over budget", "hard limit"), and the score to two places, for
// example "over budget, score 0.03"; the threshold it fell under stays in the
// decision's reason (plans, records), not in the stub, where it would cost the
// agent about 6 tokens at every step (docs/EVALUATION.md, "A shorter stub frame").
// A negative score (not scored yet) gives the rewrite alone.
func stubWhy(rewrite string, score float64) string {
	switch {
	case score < 0:
		return rewrite
	case rewrite == "":
		return fmt.Sprintf("score %.2f", score)
	}
	return fmt.Sprintf("%s, score %.2f", rewrite, score)
}

// protection returns why o is not a candidate at step T ("" when it is one) and the
// first step at which that protection ends (0: never). docs/DESIGN.md step 2.
func (a *Advisor) protection(o *outState, T int) (string, int) {
	K := a.Config.ProtectedSteps
	switch {
	case o.fixed != "":
		return o.fixed, 0
	case T-o.step <= K:
		return fmt.Sprintf("recent (protected through step %d)", o.step+K), o.step + K + 1
	case o.protectTil >= T:
		return o.protectWhy, o.protectTil + 1
	}
	return "", 0
}

// keep makes o a kept candidate and schedules its next ask: at once when never
// asked, else once its back-off gap has passed (ripe: asked when re-asks are due).
func (a *Advisor) keep(st *state, sp *stepState, o *outState) {
	reason := "candidate, not yet scored"
	if o.lastOKAsk > 0 {
		reason = keepReason(o.score, a.cutoffOf(o))
		if o.score < a.cutoffOf(o) {
			reason = fmt.Sprintf("used at step %d, after its score %.2f", o.lastUse, o.score)
		}
	}
	a.setDecision(st, sp, o, DecisionKeep, reason)
	if !o.inKept {
		o.inKept = true
		st.kept = append(st.kept, o)
	}
	switch gap := a.askSchedule().Gap(o.asks); {
	case o.asks == 0:
		a.queueAsk(sp, o)
	case sp.T-o.lastAsk >= gap:
		if !o.inRipe {
			o.inRipe = true
			st.ripe = append(st.ripe, o)
		}
	default:
		st.wakeAt(o, o.lastAsk+gap)
	}
}

func (a *Advisor) queueAsk(sp *stepState, o *outState) {
	if !o.inDue {
		o.inDue = true
		sp.due = append(sp.due, o)
	}
}

// setDecision changes o's decision to d (not DecisionPending: pend makes an output
// pending) with reason, keeping the pending total, the plan item and the decision
// records right. With both unchanged only the item is refreshed (its score may be
// new).
func (a *Advisor) setDecision(st *state, sp *stepState, o *outState, d Decision, reason string) {
	if d == o.decision && reason == o.reason {
		st.items[o.i] = o.item()
		return
	}
	st.unpend(o)
	if d != DecisionPruned && d != DecisionRecalled {
		o.by = ""
	}
	a.change(st, sp, o, d, reason)
}

// pend makes o a pending prune for reason, with its stub text (n tokens) ready, so
// the pending total is exact.
func (a *Advisor) pend(st *state, sp *stepState, o *outState, reason, stub string, n int) {
	st.unpend(o)
	if o.dead {
		o.by = o.deadBy
	}
	o.stub, o.stubTokens = stub, n
	st.pendingTokens += o.tokens - n
	if !o.inPending {
		o.inPending = true
		st.pending = append(st.pending, o)
	}
	a.change(st, sp, o, DecisionPending, reason)
}

// unpend takes o out of the pending total when it was pending.
func (st *state) unpend(o *outState) {
	if o.decision == DecisionPending {
		st.pendingTokens -= o.tokens - o.stubTokens
		o.stub, o.stubTokens = "", 0
	}
}

// change records o's new decision: the item, the step's changed list and a
// decision record.
func (a *Advisor) change(st *state, sp *stepState, o *outState, d Decision, reason string) {
	o.decision, o.reason, o.decidedAt = d, reason, sp.T
	st.items[o.i] = o.item()
	sp.mark(o)
	sp.changes = append(sp.changes, a.record(st, o, sp.T))
}

const stubNotShorter = "stub not shorter than the output"

// askDue asks the scorer about the due cards in one batch (skipping any a rule
// killed meanwhile) and settles each asked output with its new score; with asks
// off the step's path (offPath) it hands them to askOffPath instead.
func (a *Advisor) askDue(ctx context.Context, st *state, sp *stepState) error {
	due := sp.due[:0]
	for _, o := range sp.due {
		o.inDue = false
		if o.decision == DecisionKeep {
			due = append(due, o)
		}
	}
	sp.due = due
	// With a cutoff of 0 no score can prune anything (scores are >= 0), so the
	// scorer is not asked: rules only, as calibrate recommends when no scorer stays
	// under the target miss rate.
	if a.Scorer == nil || a.cutoffNow() <= 0 {
		return nil
	}
	if a.offPath() {
		a.askOffPath(ctx, st, sp, due)
		return ctx.Err()
	}
	if len(due) == 0 {
		return nil
	}
	batch := a.batch(st, sp, due)
	start := time.Now()
	scores, err := a.Scorer.Score(ctx, batch)
	latency := time.Since(start)
	kind, scores := a.checkAnswer(st, scores, err, len(due))
	sp.plan.Asked = len(due)
	asks := make([]AskRecord, len(due))
	for i, o := range due {
		asks[i] = a.fold(st, sp, o, batch.Cards[i], scoreAt(scores, i), kind)
		asks[i].Latency = latency
	}
	if err := a.Store.RecordAsks(ctx, asks); err != nil {
		a.warnOnce(st, "storage-asks", "storage: cannot record asks", err)
	}
	return ctx.Err()
}

// checkAnswer returns the failure kind of a batch's answer ("" when the request
// succeeded with one score per card: n of them) and the scores to use (nil when
// it failed), logging a failure kind once per session.
func (a *Advisor) checkAnswer(st *state, scores []cards.Score, err error, n int) (string, []cards.Score) {
	if err == nil && len(scores) != n {
		err = fmt.Errorf("%w: %d scores for %d cards", ErrInvalidScores, len(scores), n)
	}
	if err == nil {
		return "", scores
	}
	kind := FailKind(err)
	a.warnOnce(st, "scorer-"+kind, "scorer failed; nothing pruned on its account", err)
	return kind, nil
}

func scoreAt(scores []cards.Score, i int) cards.Score {
	if i < len(scores) {
		return scores[i]
	}
	return cards.Score{}
}

// batch builds the step's batch: the task and the latest non-empty assistant text
// (each cut to cards.ContextChars), and each due output's card at this step with its
// use history and signals.
func (a *Advisor) batch(st *state, sp *stepState, due []*outState) cards.Batch {
	b := cards.Batch{
		Task:   cards.Cut(sp.s.Task, cards.ContextChars),
		Now:    cards.Cut(st.lastNow, cards.ContextChars),
		Corpus: st.corpus,
		Cards:  make([]cards.Card, len(due)),
	}
	lex := lexical.NewMatcher(lexical.Query(b.Task, b.Now), st.corpus)
	for i, o := range due {
		c := *o.card // a candidate's card (only outputs never asked about have none)
		c.Step, c.Age = sp.T, sp.T-o.step
		c.Uses = o.uses
		if o.uses > 0 {
			c.LastUseAgo = sp.T - o.lastUse
		}
		c.PathIdle = c.Age
		for _, p := range o.paths {
			if st.lastEdit[p] > o.step {
				c.EditedSince = true
			}
			c.PathIdle = min(c.PathIdle, sp.T-st.lastTouch[p])
			c.PathReads = max(c.PathReads, st.reads[p])
		}
		if st.tracker != nil {
			c.Names, c.Runs = st.tracker.Owned(o.key), st.tracker.Runs(o.key)
			liveNames(st.tracker, o, &c)
		}
		c.RecentUses = o.recentUses(sp.T)
		c.SessionUseRate = float64(st.allUses) / float64(len(st.outs))
		c.OutputsSince = len(st.outs) - 1 - o.i
		c.TokensAfter = st.offsets[len(st.offsets)-1] - st.offsets[min(o.msg+1, len(st.offsets)-1)]
		c.NamedByTask = named(sp.s.Task, o.names)
		c.NamedByNow = named(st.lastNow, o.names)
		c.Lexical = lex.Keep(c)
		b.Cards[i] = c
	}
	return b
}

// fold records one card's answer at this step (kind is the batch's failure kind,
// "" when the request succeeded) and settles its output with it.
func (a *Advisor) fold(st *state, sp *stepState, o *outState, c cards.Card, sc cards.Score, kind string) AskRecord {
	o.asks++
	o.lastAsk = sp.T
	rec, ok := a.answer(st, sp, o, sp.T, c, sc, kind)
	if ok {
		o.score, o.lastOKAsk = sc.Keep, sp.T
	}
	a.settle(st, sp, o)
	return rec
}

// answer returns the ask record of one card asked at step asked and whether its
// score is usable; a card with no score is counted in the plan by failure kind
// (kind is the batch's, "" when the request succeeded).
func (a *Advisor) answer(st *state, sp *stepState, o *outState, asked int, c cards.Card, sc cards.Score, kind string) (AskRecord, bool) {
	rec := AskRecord{
		SessionID: st.id, OutputKey: o.key, Step: asked, CardHash: transcript.TextHash(c.Text("c")),
		Scorer: a.Scorer.Name(), Score: sc.Keep, OK: sc.OK, Signals: c.Signals(),
	}
	switch {
	case kind != "":
	case !sc.OK:
		kind = "no-score"
	case math.IsNaN(sc.Keep) || sc.Keep < 0 || sc.Keep > 1:
		kind = "invalid"
		a.warnOnce(st, "scorer-invalid", "scorer failed; nothing pruned on its account",
			fmt.Errorf("%w: keep-probability %v for card %s", ErrInvalidScores, sc.Keep, o.key))
	}
	if kind == "" {
		return rec, true
	}
	rec.OK, rec.FailKind = false, kind
	if sp.plan.ScorerFailures == nil {
		sp.plan.ScorerFailures = map[string]int{}
	}
	sp.plan.ScorerFailures[kind]++
	return rec, false
}

// decide asks the planner whether the pending prunes become a rewrite now, and
// applies the ones it chose.
func (a *Advisor) decide(ctx context.Context, st *state, sp *stepState) {
	list := st.livePending()
	over := st.ctxTokens > sp.limit.Tokens
	overBudget := st.ctxTokens > sp.plan.Budget && a.Config.OverBudgetCutoff > 0
	if len(list) == 0 && (!over && !overBudget || len(st.liveKept()) == 0 && !(over && a.Config.LastResort)) {
		return
	}
	if !st.synced {
		// syncStore set StorageError: without the stored stubs a new stub could
		// contradict one another process applied.
		sp.plan.Waiting = "storage unreadable"
		return
	}
	in := a.plannerInput(st, sp, list)
	extra, prot := a.forcedCandidates(ctx, st, sp, &in, over)
	if !over && overBudget {
		extra = a.overBudgetCandidates(st, &in)
	}
	d := planner.Decide(in)
	sp.plan.Waiting = d.Wait
	if len(d.Apply) == 0 && len(d.Extra) == 0 && len(d.Protected) == 0 {
		if over {
			sp.plan.Waiting = "past the hard limit, but no candidate is left to prune"
		}
		return
	}
	chosen := make([]*outState, 0, len(d.Apply)+len(d.Extra)+len(d.Protected))
	for _, k := range d.Apply {
		chosen = append(chosen, list[k])
	}
	for _, e := range append(pick(extra, d.Extra), pick(prot, d.Protected)...) {
		a.pend(st, sp, e.o, e.reason, e.stub, e.n)
		chosen = append(chosen, e.o)
	}
	if a.apply(ctx, st, sp, chosen) {
		sp.plan.RewriteReason = string(d.Reason)
		sp.record.Rewrite, sp.record.Frees, sp.record.Suffix = string(d.Reason), d.Frees, d.Suffix
		sp.record.CostUSD, sp.record.SavingUSD = d.Cost, d.Saving
		sp.plan.RewriteCostUSD, sp.plan.RewriteSavingUSD = d.Cost, d.Saving
	}
}

// forcedCandidates fills in.Extra and in.Protected when the context is past the
// hard limit (over) and the pending prunes alone leave it above the low-water
// mark: the kept candidates (extraCandidates) and, with Config.LastResort, when
// those do not reach the mark either, the outputs protected only as recent that
// the agent's compaction would drop (lastResort). It returns them in the order of in.Extra and in.Protected.
func (a *Advisor) forcedCandidates(ctx context.Context, st *state, sp *stepState, in *planner.Input, over bool) (extra, prot []extraCandidate) {
	if !over || in.Context-st.pendingTokens <= in.LowWater {
		return nil, nil
	}
	extra = a.extraCandidates(ctx, st, sp)
	in.Extra = pendings(st, extra)
	freed := st.pendingTokens
	for _, e := range extra {
		freed += e.o.tokens - e.n
	}
	if a.Config.LastResort && in.Context-freed > in.LowWater && in.Context > a.lastResortLimit(sp) {
		prot = a.lastResort(st, sp)
		in.Protected = pendings(st, prot)
	}
	return extra, prot
}

// overBudgetCandidates fills in.Extra when the context is over the budget (not
// past the hard limit) and the pending prunes alone leave it above the low-water
// mark: the kept candidates scored under Config.OverBudgetCutoff whose stub is
// shorter (docs/DESIGN.md step 6(b), planner.Input.Extra), in the planner's order
// (lowest keep-probability, then the earliest) and only as many as reach the
// mark, so that a step renders the stubs of what a rewrite would take, not of
// every kept candidate. It returns them in the order of in.Extra.
func (a *Advisor) overBudgetCandidates(st *state, in *planner.Input) []extraCandidate {
	need := in.Context - st.pendingTokens - in.LowWater
	if need <= 0 {
		return nil
	}
	var under []*outState
	for _, o := range st.liveKept() {
		if o.lastOKAsk > 0 && o.score < a.Config.OverBudgetCutoff {
			under = append(under, o)
		}
	}
	slices.SortStableFunc(under, func(x, y *outState) int {
		if c := cmp.Compare(x.score, y.score); c != 0 {
			return c
		}
		return cmp.Compare(st.ctxOffset(x.msg), st.ctxOffset(y.msg))
	})
	var out []extraCandidate
	for freed := 0; len(under) > 0 && freed < need; under = under[1:] {
		o := under[0]
		sc, cut := scoreAndCutoff(o.score, a.Config.OverBudgetCutoff)
		reason := "over budget, score " + sc + " < over-budget cutoff " + cut
		stub := a.stubText(st, o, stubWhy("over budget", o.score))
		if n := tokencount.Count(stub); len(stub) < o.bytes && n < o.tokens {
			out = append(out, extraCandidate{o: o, reason: reason, stub: stub, n: n, keep: o.score})
			freed += o.tokens - n
		}
	}
	in.Extra = pendings(st, out)
	return out
}

// lastResortLimit is the context size past which the last resort may act: the
// hard limit with the configured margin (Config.Margin) in place of the session's
// largest one-step growth (sp.limit.Margin, never less than Config.Margin). The
// growth keeps ordinary candidates a step ahead of the point; a session that once
// grew by a 68,780-token output (a Gemini CLI session of ../shared/corpus) would
// otherwise stub its newest outputs far from its point, and with them what the
// agent is reading now.
func (a *Advisor) lastResortLimit(sp *stepState) int {
	if sp.limit.Point <= 0 {
		return sp.limit.Tokens
	}
	return sp.limit.Tokens + sp.limit.Margin - a.Config.Margin()
}

// pendings returns the planner's view of es.
func pendings(st *state, es []extraCandidate) []planner.Pending {
	out := make([]planner.Pending, len(es))
	for i, e := range es {
		out[i] = planner.Pending{Offset: st.ctxOffset(e.o.msg), Saves: e.o.tokens - e.n, Keep: e.keep}
	}
	return out
}

// pick returns es[k] for each k of ks, in that order.
func pick(es []extraCandidate, ks []int) []extraCandidate {
	out := make([]extraCandidate, len(ks))
	for i, k := range ks {
		out[i] = es[k]
	}
	return out
}

// extraCandidate is a candidate that is not pending, with the stub a rewrite
// forced by the hard limit would give it.
type extraCandidate struct {
	o      *outState
	reason string
	stub   string
	n      int     // the stub's tokens
	keep   float64 // its keep-probability; 1 when not scored yet
}

// extraCandidates returns the candidates that are not pending (kept: scored at or
// over the cutoff, or not scored yet) whose stub is shorter, for a rewrite forced by
// the hard limit (docs/DESIGN.md step 6(c)): it may prune them, lowest keep-probability
// first, when the pending prunes do not reach the low-water mark. Such a rewrite
// never waits for a score: a candidate not scored yet is ranked by the Fallback
// scorer when there is one (fallbackKeeps), else last.
func (a *Advisor) extraCandidates(ctx context.Context, st *state, sp *stepState) []extraCandidate {
	live := st.liveKept()
	fb := a.fallbackKeeps(ctx, st, sp, live)
	var out []extraCandidate
	for _, o := range live {
		keep, reason, shown := 1.0, "hard limit, not scored yet", -1.0
		if o.lastOKAsk > 0 {
			keep, reason, shown = o.score, fmt.Sprintf("hard limit, score %.2f the lowest kept", o.score), o.score
		} else if k, ok := fb[o]; ok {
			keep, reason, shown = k, fmt.Sprintf("hard limit, not asked yet, %s score %.2f", a.Fallback.Name(), k), k
		}
		stub := a.stubText(st, o, stubWhy("hard limit", shown))
		n := tokencount.Count(stub)
		if len(stub) >= o.bytes || n >= o.tokens {
			continue
		}
		out = append(out, extraCandidate{o: o, reason: reason, stub: stub, n: n, keep: keep})
	}
	return out
}

// fallbackKeeps scores the candidates of live that have no score yet with the
// Fallback scorer, in one batch, for the ranking of a rewrite forced by the hard
// limit; nil without a Fallback, or when it fails (they then rank last). These
// scores rank only: they are not asks, not recorded, and no prune's reason but
// that rewrite's names them.
func (a *Advisor) fallbackKeeps(ctx context.Context, st *state, sp *stepState, live []*outState) map[*outState]float64 {
	if a.Fallback == nil {
		return nil
	}
	var unscored []*outState
	for _, o := range live {
		if o.lastOKAsk == 0 && o.card != nil {
			unscored = append(unscored, o)
		}
	}
	if len(unscored) == 0 {
		return nil
	}
	scores, err := a.Fallback.Score(ctx, a.batch(st, sp, unscored))
	if err != nil || len(scores) != len(unscored) {
		return nil
	}
	out := make(map[*outState]float64, len(unscored))
	for i, o := range unscored {
		if sc := scores[i]; sc.OK && sc.Keep >= 0 && sc.Keep <= 1 {
			out[o] = sc.Keep
		}
	}
	return out
}

// liveKept drops outputs no longer kept candidates from st.kept and returns it: the
// list a rewrite forced by the hard limit looks at, so that a long session of
// outputs that can never be candidates costs it nothing per step.
func (st *state) liveKept() []*outState {
	list := st.kept[:0]
	for _, o := range st.kept {
		if o.decision == DecisionKeep && o.msg >= st.compactAt {
			list = append(list, o)
		} else {
			o.inKept = false
		}
	}
	clear(st.kept[len(list):])
	st.kept = list
	return list
}

// livePending drops outputs no longer pending from st.pending and returns it in
// session order.
func (st *state) livePending() []*outState {
	list := st.pending[:0]
	for _, o := range st.pending {
		if o.decision == DecisionPending {
			list = append(list, o)
		} else {
			o.inPending = false
		}
	}
	clear(st.pending[len(list):])
	st.pending = list
	slices.SortFunc(list, func(x, y *outState) int { return x.i - y.i })
	return list
}

// plannerInput describes the step to the planner.
func (a *Advisor) plannerInput(st *state, sp *stepState, list []*outState) planner.Input {
	cfg := a.Config
	// The budget is no higher than the hard limit (limit): an agent that compacts
	// early (Gemini CLI at half the window) has its low-water mark under it too.
	budget := sp.plan.Budget
	in := planner.Input{
		Context: st.ctxTokens, Budget: budget, HardLimit: sp.limit.Tokens,
		LowWater:     min(cfg.LowWaterTokens(), int(cfg.LowWaterFraction*float64(budget))),
		LeastRewrite: cfg.LeastRewriteTokens(), Cold: sp.cold,
		Remaining: cfg.Estimator().Remaining(sp.T), Read: sp.price.Read(),
		Premium:   max(sp.price.WriteFor(a.cacheTTL(sp.s, sp.price))-sp.price.Read(), 0),
		PayFactor: cfg.PayFactor, PriceForced: cfg.PriceForced, Pending: make([]planner.Pending, len(list)),
	}
	if in.Context > budget {
		in.Remaining = cfg.EstimatorOver().Remaining(sp.T)
	}
	in.HardLowWater = int(cfg.HardLimitLowWaterFraction * float64(sp.limit.Tokens))
	for i, o := range list {
		in.Pending[i] = planner.Pending{
			Offset: st.ctxOffset(o.msg), Saves: o.tokens - o.stubTokens, Keep: o.score,
			Rule: o.dead || o.retention == transcript.RetentionDisposable,
		}
	}
	return in
}

// apply commits the originals and stubs of the chosen pending outputs in one
// transaction, then applies the stubs. An output whose slot no longer holds its
// original stays pending; a storage failure prunes nothing and the plan says why.
// It reports whether stubs were applied.
func (a *Advisor) apply(ctx context.Context, st *state, sp *stepState, chosen []*outState) bool {
	ready, prunes := prunesOf(st, sp, chosen)
	if len(prunes) == 0 {
		return false
	}
	if err := a.Store.SavePrunes(ctx, prunes); err != nil {
		if errors.Is(err, ErrConflict) && a.lostRace(ctx, st, sp, ready) {
			return false
		}
		sp.plan.StorageError = fmt.Sprintf("originals and stubs not stored, pruning stopped: %v", err)
		a.warnOnce(st, "storage-original", "storage: cannot store originals and stubs; pruning stopped", err)
		return false
	}
	// st.frozen is not added to: it serves outputs not indexed yet, and these are.
	for _, o := range ready {
		a.prune(st, o, o.stub, o.stubTokens, o.reason, o.score, sp.T)
		sp.mark(o)
		sp.changes = append(sp.changes, a.record(st, o, sp.T))
	}
	sp.plan.Pruned = len(ready)
	// Our own stubs moved the store's version by one each: the next step's version
	// read (syncStore) tells whether anybody else wrote too, so this step need not
	// read it again.
	st.own += int64(len(ready))
	return true
}

// prunesOf returns the chosen outputs whose slot still holds their original, and
// for each its original and stub to store.
func prunesOf(st *state, sp *stepState, chosen []*outState) ([]*outState, []Prune) {
	var ready []*outState
	var prunes []Prune
	for _, o := range chosen {
		text, ok := outputText(sp.msgs, o)
		if !ok || transcript.TextHash(text) != o.hash {
			continue // the caller sent something else in the slot: no stub without the original
		}
		ready = append(ready, o)
		prunes = append(prunes, Prune{
			Original: Original{
				RecallID: o.recallID, SessionID: st.id, OutputKey: o.key, Tool: o.tool,
				Summary: o.summary, Text: text, Hash: o.hash, Tokens: o.tokens, Step: o.step,
			},
			Stub: StubRecord{
				RecallID: o.recallID, SessionID: st.id, OutputKey: o.key, Stub: o.stub,
				Step: sp.T, Reason: o.reason, Score: o.score, At: sp.now,
			},
		})
	}
	return ready, prunes
}

// lostRace handles a rewrite that another process sharing the store stored first
// (SavePrunes failed with ErrConflict and stored nothing of this one): the
// session's stubs are read again and adopted, so that this step sends the bytes the
// other process sent; outputs it did not prune stay pending. It reports whether the
// other process's stubs were found for some of ready; if not, the conflict is
// something else and the caller reports it.
func (a *Advisor) lostRace(ctx context.Context, st *state, sp *stepState, ready []*outState) bool {
	st.version = -1 // read the stubs back whatever the version says
	a.syncStore(ctx, st, sp)
	if !st.synced {
		return true // syncStore set StorageError
	}
	for _, o := range ready {
		if o.decision == DecisionPruned || o.decision == DecisionRecalled {
			sp.plan.Waiting = "another process sharing the store pruned first; its stubs were adopted"
			return true
		}
	}
	return false
}

// finish records the step and fills in the plan.
func (a *Advisor) finish(ctx context.Context, st *state, sp *stepState) {
	p := &sp.plan
	st.sentTokens = st.ctxTokens // the next step's growth counts from here
	p.Rewrite = p.Pruned > 0
	p.PendingTokens = st.pendingTokens
	p.ContextTokens = st.ctxTokens
	p.SavedTokens = st.fullTokens - st.ctxTokens
	p.Cold = sp.cold
	p.Items = st.items[:len(st.items):len(st.items)]
	if p.Items == nil {
		p.Items = []Item{} // an empty list, not null, in JSON
	}
	p.Stubs = st.stubs
	slices.Sort(sp.changed)
	p.Changed = sp.changed
	if len(sp.changes) > 0 {
		if err := a.Store.RecordDecisions(ctx, sp.changes); err != nil {
			a.warnOnce(st, "storage-decisions", "storage: cannot record decisions", err)
		}
	}
	r := &sp.record
	r.SessionID, r.Step, r.At, r.Pruned = st.id, sp.T, sp.now, p.Pruned
	r.ContextTokens, r.FullTokens, r.MaxGrowth = st.ctxTokens, st.fullTokens, st.growth.largest()
	st.seen = max(st.seen, sp.T)
	p.PrevFullTokens, p.PrevKnown = st.lastFull, st.fullKnown
	st.lastFull, st.fullKnown = st.fullTokens, true
	if err := a.Store.RecordSteps(ctx, []StepRecord{*r}); err != nil {
		a.warnOnce(st, "storage-steps", "storage: cannot record steps", err)
	}
}

// keepReason is the reason of a candidate scored at or above the cutoff.
func keepReason(score, cutoff float64) string {
	sc, cut := scoreAndCutoff(score, cutoff)
	return "score " + sc + " >= cutoff " + cut
}

// scoreAndCutoff prints a score and the cutoff it is compared with for a reason:
// to two places ("0.08", "0.05"), or to as many more, up to four, as it takes to
// tell them apart ("0.054" and "0.053", not "0.05 >= 0.05").
func scoreAndCutoff(score, cutoff float64) (string, string) {
	for d := 2; ; d++ {
		sc, cut := strconv.FormatFloat(score, 'f', d, 64), strconv.FormatFloat(cutoff, 'f', d, 64)
		if sc != cut || d == 4 {
			return sc, cut
		}
	}
}

// outputText finds o's current text in the session's messages; false when its
// message is not there (a caller let go of it, see Advise) or holds another output.
func outputText(msgs []*transcript.Message, o *outState) (string, bool) {
	if o.msg >= len(msgs) || msgs[o.msg] == nil || o.block >= len(msgs[o.msg].Outputs) {
		return "", false
	}
	out := msgs[o.msg].Outputs[o.block]
	if out.Key != o.key {
		return "", false
	}
	return out.Text, true
}

// stubText renders the stub of docs/DESIGN.md step 7 for o with the given reason (the
// stub's own, stubWhy or a rule's), for example `[pruned: Read /src/get.rs, 4,210
// tokens, score 0.08; recall("o_7f3a9c0b1d") restores it]`: tool and argument
// summary (cut to StubSummaryChars characters: cards.Cut), the original's size in
// tokens, the reason, and the recall call naming the recall tool
// the agent has (Config.RecallTool); with NoRecallTool, how the original can be had
// without one (NoRecallHint).
//
// With a digest (st's tracker, Config.DigestTokens within DigestBudget; none for
// a rule-dead output, whose content is in context again), the names it kept come
// before the recall, one space between two (evidence.DigestNameTokens): `…,
// score 0.08; it named src/server.go parseConfig MAX_SIZE; recall("o_7f3a9c0b1d")
// restores it]`. st may be nil (no digest).
func (a *Advisor) stubText(st *state, o *outState, reason string) string {
	what := strings.TrimSpace(o.tool + " " + cards.Cut(o.summary, StubSummaryChars))
	head := fmt.Sprintf("[pruned: %s, %s tokens, %s; ", what, thousands(o.tokens), reason)
	tail := fmt.Sprintf("%s(%q) restores it]", a.Config.RecallTool, o.stubID)
	if a.NoRecallTool {
		tail = NoRecallHint(o.stubID) + "]"
	}
	// A rule-dead output's content is in context again (the later read, the
	// identical output): its stub needs no digest.
	if st == nil || st.tracker == nil || a.Config.DigestTokens == 0 || o.dead {
		return head + tail
	}
	budget := DigestBudget(a.Config, tokencount.Count(head+tail), o.tokens)
	names := st.tracker.Digest(o.key, budget)
	if len(names) == 0 {
		return head + tail
	}
	return head + "it named " + strings.Join(names, " ") + "; " + tail
}

// StubSummaryChars is the most characters of a call's argument summary a stub
// repeats (cards.Cut: its head, "…" counted): 48. The call itself, with every
// argument, stays in context beside the stub; the summary only says which output
// this was. The 80 of earlier stubs held fewer digest names under the stub's
// share of its output (docs/EVALUATION.md, "A shorter stub frame", measures 24 to
// 80; the head kept more than the head and tail at the same length).
const StubSummaryChars = 48

// DigestFrameTokens is what a digest's framing ("it named " and the "; " after the
// names) adds to a stub, in o200k tokens: 3, measured on a real stub (46 against
// 43 tokens without it).
const DigestFrameTokens = 3

// DigestBudget returns the digest budget, in digest tokens, of a stub of stubTokens
// tokens without a digest for an output of tokens tokens: Config.DigestTokens
// (more for a long output under Config.DigestShare: evidence.DigestBudgetFor),
// less what passes Config.StubMaxShare of the output with the digest's framing
// (DigestFrameTokens) counted (never below 0).
func DigestBudget(cfg Config, stubTokens, tokens int) int {
	b := evidence.DigestBudgetFor(tokens, cfg.DigestTokens, cfg.DigestShare)
	return max(0, min(b, int(cfg.StubMaxShare*float64(tokens))-stubTokens-DigestFrameTokens))
}

// NoRecallHint is what a stub says in place of the recall call when the agent has
// no recall tool (Advisor.NoRecallTool), for recall id id: run the call again, or
// get the original by id from the command line or the proxy's HTTP route, for
// example `no recall tool: run the call again, or "pruneadvisor recall
// o_7f3a9c0b1d" (GET /v1/recall/o_7f3a9c0b1d) restores it`.
func NoRecallHint(id string) string {
	return fmt.Sprintf("no recall tool: run the call again, or %q (GET /v1/recall/%s) restores it", "pruneadvisor recall "+id, id)
}

// IsRecallTool reports whether a tool named name is the recall tool, configured
// being Config.RecallTool: that name, "recall", or an MCP-style name ending in
// "__recall" or "_recall" (mcp__pruneadvisor__recall, mcp_pruneadvisor_recall,
// pruneadvisor_recall, the names wrap's agents and `pruneadvisor mcp` give it),
// compared without regard to case.
func IsRecallTool(name, configured string) bool {
	name = strings.ToLower(name)
	return name == strings.ToLower(configured) || name == "recall" ||
		strings.HasSuffix(name, "__recall") || strings.HasSuffix(name, "_recall")
}

// recalledBy returns the output whose original a call to the recall tool asked for,
// nil when c is not such a call (IsRecallTool) or names no output of the session.
func (a *Advisor) recalledBy(st *state, c *transcript.ToolCall) *outState {
	if !IsRecallTool(c.Name, a.Config.RecallTool) {
		return nil
	}
	var args struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(c.Args, &args) != nil || args.ID == "" {
		return nil
	}
	return st.byRecall[args.ID]
}

func (a *Advisor) record(st *state, o *outState, T int) DecisionRecord {
	return DecisionRecord{
		SessionID: st.id, OutputKey: o.key, Step: T, Decision: o.decision,
		Reason: o.reason, Score: o.score, Superseder: o.by, Tokens: o.tokens,
	}
}

// warnOnce logs a failure the first time its kind happens in a session.
func (a *Advisor) warnOnce(st *state, kind, msg string, err error) {
	if _, loaded := st.warned.LoadOrStore(kind, true); loaded {
		return
	}
	a.Logger.Warn(msg, "session", st.id, "err", err)
}

// FailKind names the kind of a scorer failure for counting: the scorer's own kind
// when its error has a Kind() string method, "timeout" for deadline errors,
// "canceled" for a canceled context, "invalid" for ErrInvalidScores, else "error".
func FailKind(err error) string {
	var k interface{ Kind() string }
	switch {
	case errors.As(err, &k):
		return k.Kind()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrInvalidScores):
		return "invalid"
	default:
		return "error"
	}
}

// thousands formats n with comma separators ("4,210").
func thousands(n int) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// StubTokens returns the size in tokens of a stub like the one the advisor with cfg
// gives an output of the tool, argument summary and size (a score decision with the
// recall id RecallIDZero, whose token count every id of the current shape shares),
// without its digest (DigestBudget bounds that): what replay and calibrate price a
// prune's saving with.
func StubTokens(cfg Config, tool, summary string, tokens int) int {
	o := &outState{tool: tool, summary: summary, tokens: tokens, stubID: RecallIDZero}
	a := &Advisor{Config: cfg}
	return tokencount.Count(a.stubText(nil, o, stubWhy("", 0)))
}

// cards.Card.LiveShapes holds one count per evidence.NameShape: the two lengths
// must agree, or the build fails here.
const (
	_ = uint(len(cards.Card{}.LiveShapes) - evidence.NumShapes)
	_ = uint(evidence.NumShapes - len(cards.Card{}.LiveShapes))
)

// liveNames adds to c's Live, LiveUndigested and LiveShapes the live names of o
// (evidence.Tracker.Live and LiveShapes) and of the outputs it supersedes,
// directly or through others (outState.supersedes): the later-use label credits
// their uses from the rule's step on to o, their live copy (tuning's
// creditLiveCopies), so a later use of one of their names is a use of o.
func liveNames(tr *evidence.Tracker, o *outState, c *cards.Card) {
	live, undigested := tr.Live(o.key)
	c.Live, c.LiveUndigested = c.Live+live, c.LiveUndigested+undigested
	for i, n := range tr.LiveShapes(o.key) {
		c.LiveShapes[i] += n
	}
	for _, s := range o.supersedes {
		liveNames(tr, s, c)
	}
}
