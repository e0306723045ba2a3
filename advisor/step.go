package advisor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// step runs the pipeline for one step; st is locked.
func (a *Advisor) step(ctx context.Context, st *state, s *transcript.Session) (Plan, []*transcript.Message, error) {
	msgs := s.Messages
	cfg := a.Config
	plan := Plan{SessionID: st.id, Budget: cfg.BudgetTokens(), HardLimit: cfg.HardLimitTokens()}

	// A client that rewrote or shortened its history invalidates the index: start
	// over (frozen stubs come back from the store by output key).
	if st.indexed > len(msgs) || st.indexed > 0 && (msgs[st.indexed-1] == nil || fingerprint(msgs[st.indexed-1]) != st.lastPrint) {
		st.reset()
	}
	T := st.steps + 1
	for i, m := range msgs[st.indexed:] {
		if m == nil {
			return plan, nil, fmt.Errorf("%w: message %d is nil", ErrNoSession, st.indexed+i)
		}
		if m.Role == transcript.RoleAssistant {
			T++
		}
	}
	plan.Step = T
	var changes []DecisionRecord
	// Originals restored by recalls are reported at the first step that completes.
	st.restored += a.syncStore(ctx, st, T, &plan, &changes)
	if err := ctx.Err(); err != nil {
		return plan, nil, err
	}
	a.prepareView(st, msgs)
	a.index(st, msgs, T)
	now := a.Clock()
	cold := !st.lastCall.IsZero() && now.Sub(st.lastCall) > time.Duration(cfg.CacheTTL)
	st.lastCall = now

	// Protect, apply rules, collect due asks: only the outputs whose state can
	// change at this step are looked at.
	var due []*outState
	settle := func(o *outState) { a.settle(st, o, T, &due, &changes) }
	st.due(T, settle)
	for _, o := range st.touched {
		settle(o)
	}
	clear(st.touched)
	st.touched = st.touched[:0]
	over := st.ctxTokens > plan.Budget
	plan.OverBudget = over
	if over && len(st.ripe) > 0 {
		for _, o := range st.ripe {
			o.inRipe = false
			if o.decision == DecisionKeep && !o.inDue {
				o.inDue = true
				due = append(due, o)
			}
		}
		clear(st.ripe)
		st.ripe = st.ripe[:0]
	}

	// Ask: every due card in one batch. A rule may have killed a due output after it
	// was queued at this step: the rule decides, it is not asked.
	if len(due) > 0 {
		keep := due[:0]
		for _, o := range due {
			if o.decision == DecisionKeep {
				keep = append(keep, o)
			} else {
				o.inDue = false
			}
		}
		due = keep
	}
	if len(due) > 0 {
		// With a cutoff of 0 no score can prune anything (scores are >= 0), so the
		// scorer is not asked: rules only, as calibrate recommends when no scorer
		// stays under the target miss rate.
		if a.Scorer != nil && a.Config.Cutoff > 0 {
			a.ask(ctx, st, s, due, T, &plan, &changes)
		}
		for _, o := range due {
			o.inDue = false
		}
		if err := ctx.Err(); err != nil {
			return plan, nil, err
		}
	}

	// Decide whether pending prunes are applied now.
	if st.pendingTokens > 0 {
		switch {
		case !st.synced:
			// syncStore set StorageError: without the stored stubs a new stub could
			// contradict one another process applied.
		case st.ctxTokens > plan.HardLimit:
			plan.RewriteReason = "hard limit"
		case cold:
			plan.RewriteReason = "cache cold"
		case float64(st.pendingTokens) >= cfg.RewriteFraction*float64(plan.Budget):
			plan.RewriteReason = fmt.Sprintf("pending >= %g%% of budget", cfg.RewriteFraction*100)
		}
	}
	if plan.RewriteReason != "" {
		a.apply(ctx, st, msgs, T, &plan, &changes)
	}
	switch {
	case plan.Pruned > 0 && st.restored > 0:
		plan.Rewrite, plan.RewriteReason = true, "recall; "+plan.RewriteReason
	case plan.Pruned > 0:
		plan.Rewrite = true
	case st.restored > 0:
		plan.Rewrite, plan.RewriteReason = true, "recall"
	default:
		plan.RewriteReason = ""
	}
	st.restored = 0

	if len(changes) > 0 {
		if err := a.Store.RecordDecisions(ctx, changes); err != nil {
			a.warnOnce(st, "storage-decisions", "storage: cannot record decisions", err)
		}
	}
	a.patchView(st, msgs)
	plan.PendingTokens = st.pendingTokens
	plan.ContextTokens = st.ctxTokens
	plan.SavedTokens = st.fullTokens - st.ctxTokens
	plan.Items = st.items[:len(st.items):len(st.items)]
	if plan.Items == nil {
		plan.Items = []Item{} // an empty list, not null, in JSON
	}
	st.viewShared = true
	return plan, st.view[:len(st.view):len(st.view)], nil
}

// syncStore reads the session's stubs and recalls when they may have changed (every
// step with a plain Store; when SessionVersion moved with a VersionedStore): recalls
// since the last read bring originals back, and stubs applied by another process
// are adopted so every process sends the same bytes. It returns how many originals
// were restored. On a read error it sets plan.StorageError and st.synced = false:
// nothing new is pruned at this step.
func (a *Advisor) syncStore(ctx context.Context, st *state, T int, plan *Plan, changes *[]DecisionRecord) int {
	st.synced = false
	fail := func(what string, err error) int {
		plan.StorageError = fmt.Sprintf("cannot read %s, nothing new pruned: %v", what, err)
		a.warnOnce(st, "storage-read", "storage: cannot read the session's stubs and recalls; pruning paused", err)
		return 0
	}
	var version int64
	vs, versioned := a.Store.(VersionedStore)
	if versioned {
		v, err := vs.SessionVersion(ctx, st.id)
		if err != nil {
			return fail("the session version", err)
		}
		if st.loaded && v == st.version {
			st.synced = true
			return 0
		}
		version = v
	}
	stubs, err := a.Store.SessionStubs(ctx, st.id)
	if err != nil {
		return fail("stubs", err)
	}
	evs, err := a.Store.SessionRecalls(ctx, st.id)
	if err != nil {
		return fail("recalls", err)
	}
	restored := 0
	if len(evs) < st.recalls {
		st.recalls = len(evs) // the store lost events; nothing to replay
	}
	for _, e := range evs[st.recalls:] {
		if at, ok := st.recalledAt[e.OutputKey]; !ok || e.At.After(at) {
			st.recalledAt[e.OutputKey] = e.At
		}
		if o := st.byKey[e.OutputKey]; o != nil {
			if a.recall(st, o, T, changes) {
				restored++
			}
		}
	}
	st.recalls = len(evs)
	st.frozen = stubs
	for key, s := range stubs {
		o := st.byKey[key]
		if o == nil || o.decision == DecisionPruned && o.stub == s.Stub || !a.stubStands(st, key, s) {
			continue
		}
		a.prune(st, o, s.Stub, transcript.CountTokens(s.Stub), s.Reason, s.Score, T)
		*changes = append(*changes, a.record(st, o, T))
	}
	st.loaded, st.synced = true, true
	if versioned {
		st.version = version
	}
	return restored
}

// recall handles a recall event of o at step T: a pruned output gets its original
// back (reported true); any other output (a pending one included: another process
// pruned it and it was recalled there) is protected for one back-off window; either
// is asked afresh when the window ends.
func (a *Advisor) recall(st *state, o *outState, T int, changes *[]DecisionRecord) bool {
	was := o.decision
	switch was {
	case DecisionPruned:
		st.ctxTokens += o.tokens - o.stubTokens
		if st.stubbed[o.msg]--; st.stubbed[o.msg] <= 0 {
			delete(st.stubbed, o.msg)
		}
		st.dirty[o.msg] = true
		o.stub, o.stubTokens = "", 0
	}
	o.dead, o.by, o.asks = false, "", 0
	o.protectTil = T + a.schedule.Gap(0)
	o.protectWhy = fmt.Sprintf("recalled at step %d", T)
	if was == DecisionPruned {
		a.set(st, o, DecisionRecalled, o.protectWhy, T, changes)
		st.wakeAt(o, o.protectTil+1)
		return true
	}
	if o.fixed == "" {
		a.set(st, o, DecisionProtected, o.protectWhy, T, changes)
		st.wakeAt(o, o.protectTil+1)
	}
	return false
}

// settle brings o's decision up to date at step T: which protection holds, whether
// a rule killed it, whether it is due for an ask (appended to due), and when it
// must be looked at again.
func (a *Advisor) settle(st *state, o *outState, T int, due *[]*outState, changes *[]DecisionRecord) {
	if o.decision == DecisionPruned {
		return
	}
	K := a.Config.ProtectedSteps
	switch {
	case o.fixed != "":
		a.set(st, o, DecisionProtected, o.fixed, T, changes)
	case T-o.step <= K:
		a.set(st, o, DecisionProtected, fmt.Sprintf("recent (protected through step %d)", o.step+K), T, changes)
		st.wakeAt(o, o.step+K+1)
	case o.protectTil >= T:
		if o.decision != DecisionRecalled {
			a.set(st, o, DecisionProtected, o.protectWhy, T, changes)
		}
		st.wakeAt(o, o.protectTil+1)
	case o.dead:
		o.by = o.deadBy
		a.set(st, o, DecisionPending, fmt.Sprintf("%s by call %s", o.deadRule, o.deadBy), T, changes)
	case o.decision == DecisionPending:
		// scored under the cutoff or disposable: stays pending until applied
	case o.retention == transcript.RetentionDisposable:
		a.set(st, o, DecisionPending, "disposable", T, changes)
	default:
		if o.decision != DecisionKeep {
			reason := "candidate, not yet scored"
			if o.asks > 0 && o.score >= 0 {
				reason = keepReason(o.score, a.Config.Cutoff)
			}
			a.set(st, o, DecisionKeep, reason, T, changes)
		}
		switch gap := a.schedule.Gap(o.asks); {
		case o.asks == 0:
			if !o.inDue {
				o.inDue = true
				*due = append(*due, o)
			}
		case T-o.lastAsk >= gap:
			if !o.inRipe {
				o.inRipe = true
				st.ripe = append(st.ripe, o)
			}
		default:
			st.wakeAt(o, o.lastAsk+gap)
		}
	}
}

// set changes o's decision and reason (no-op when both are unchanged), keeping the
// pending total, the plan item and the decision records right. A pending prune gets
// its stub text now, so its size is exact; an output whose stub would not be shorter
// is protected instead, for good.
func (a *Advisor) set(st *state, o *outState, d Decision, reason string, T int, changes *[]DecisionRecord) {
	if d == o.decision && reason == o.reason {
		return
	}
	if o.decision == DecisionPending {
		st.pendingTokens -= o.tokens - o.stubTokens
		o.stub, o.stubTokens = "", 0
	}
	if d == DecisionPending {
		stub := a.stubText(o, reason)
		n := transcript.CountTokens(stub)
		if len(stub) >= o.bytes || n >= o.tokens {
			o.fixed = stubNotShorter
			d, reason = DecisionProtected, stubNotShorter
		} else {
			o.stub, o.stubTokens = stub, n
			st.pendingTokens += o.tokens - n
			if !o.inPending {
				o.inPending = true
				st.pending = append(st.pending, o)
			}
		}
	}
	if d != DecisionPending && d != DecisionPruned {
		o.by = ""
	}
	o.decision, o.reason, o.decidedAt = d, reason, T
	st.items[o.i] = o.item()
	*changes = append(*changes, a.record(st, o, T))
}

// ask sends the due cards in one batch and folds the scores into the states. The
// batch's task is the session's Task and its now the latest non-empty assistant
// text (a message with only tool calls does not replace it), each cut to
// cards.ContextChars. An answer that is not one score per card, or a score that is
// not OK, not finite or outside [0,1], is "no score" for that card.
func (a *Advisor) ask(ctx context.Context, st *state, s *transcript.Session, due []*outState, T int, plan *Plan, changes *[]DecisionRecord) {
	batch := cards.Batch{
		Task:   cards.Cut(s.Task, cards.ContextChars),
		Now:    cards.Cut(st.lastNow, cards.ContextChars),
		Corpus: st.corpus,
		Cards:  make([]cards.Card, len(due)),
	}
	for i, o := range due {
		c := o.card
		c.Age = T - o.step
		batch.Cards[i] = c
	}
	start := time.Now()
	scores, err := a.Scorer.Score(ctx, batch)
	latency := time.Since(start)
	kind := ""
	switch {
	case err != nil:
		kind = FailKind(err)
	case len(scores) != len(due):
		kind = "invalid"
		err = fmt.Errorf("%w: %d scores for %d cards", ErrInvalidScores, len(scores), len(due))
	}
	if err != nil {
		a.warnOnce(st, "scorer-"+kind, "scorer failed; nothing pruned on its account", err)
	}
	plan.Asked = len(due)
	name := a.Scorer.Name()
	asks := make([]AskRecord, len(due))
	for i, o := range due {
		o.asks++
		o.lastAsk = T
		sc := cards.Score{}
		if kind == "" {
			sc = scores[i]
		}
		asks[i] = AskRecord{
			SessionID: st.id, OutputKey: o.key, Step: T,
			CardHash: transcript.TextHash(batch.Cards[i].Text("c")),
			Scorer:   name, Score: sc.Keep, OK: sc.OK, Latency: latency,
		}
		k := kind
		switch {
		case k != "":
		case !sc.OK:
			k = "no-score"
		case math.IsNaN(sc.Keep) || sc.Keep < 0 || sc.Keep > 1:
			k = "invalid"
			a.warnOnce(st, "scorer-invalid", "scorer failed; nothing pruned on its account",
				fmt.Errorf("%w: keep-probability %v for card %s", ErrInvalidScores, sc.Keep, o.key))
		}
		if k != "" {
			asks[i].OK, asks[i].FailKind = false, k
			if plan.ScorerFailures == nil {
				plan.ScorerFailures = map[string]int{}
			}
			plan.ScorerFailures[k]++
			st.wakeAt(o, T+a.schedule.Gap(o.asks))
			continue
		}
		o.score = sc.Keep
		if sc.Keep < a.Config.Cutoff {
			a.set(st, o, DecisionPending, fmt.Sprintf("score %.2f < cutoff %.2f", sc.Keep, a.Config.Cutoff), T, changes)
			continue
		}
		a.set(st, o, DecisionKeep, keepReason(o.score, a.Config.Cutoff), T, changes)
		st.items[o.i] = o.item()
		st.wakeAt(o, T+a.schedule.Gap(o.asks))
	}
	if err := a.Store.RecordAsks(ctx, asks); err != nil {
		a.warnOnce(st, "storage-asks", "storage: cannot record asks", err)
	}
}

// apply turns pending prunes into stubs, in session order, original first. A
// storage failure stops the rewrite: what was not committed stays pending, and the
// plan says why.
func (a *Advisor) apply(ctx context.Context, st *state, msgs []*transcript.Message, T int, plan *Plan, changes *[]DecisionRecord) {
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
	now := a.Clock()
	if ps, ok := a.Store.(PruneStore); ok {
		a.applyBatch(ctx, ps, st, msgs, list, T, now, plan, changes)
		return
	}
	kept := 0
	for n, o := range list {
		text, ok := outputText(msgs, o)
		if !ok || transcript.TextHash(text) != o.hash {
			// The slot no longer holds the original (the caller sent something
			// else): no stub without the original.
			list[kept] = o
			kept++
			continue
		}
		orig := Original{
			RecallID: o.recallID, SessionID: st.id, OutputKey: o.key, Tool: o.tool,
			Summary: o.summary, Text: text, Hash: o.hash, Tokens: o.tokens, Step: o.step,
		}
		rec := StubRecord{
			RecallID: o.recallID, SessionID: st.id, OutputKey: o.key, Stub: o.stub,
			Step: T, Reason: o.reason, Score: o.score, At: now,
		}
		err := a.Store.SaveOriginal(ctx, orig)
		what := "original"
		if err == nil {
			what = "stub"
			err = a.Store.SaveStub(ctx, rec)
		}
		if err != nil {
			plan.StorageError = fmt.Sprintf("%s not stored, pruning stopped: %v", what, err)
			a.warnOnce(st, "storage-"+what, "storage: cannot store "+what+"s; pruning stopped", err)
			kept += copy(list[kept:], list[n:])
			break
		}
		o.inPending = false
		a.prune(st, o, o.stub, o.stubTokens, o.reason, o.score, T)
		if st.frozen == nil {
			st.frozen = map[string]StubRecord{}
		}
		st.frozen[o.key] = rec
		plan.Pruned++
		*changes = append(*changes, a.record(st, o, T))
	}
	clear(list[kept:])
	st.pending = list[:kept]
	a.syncVersion(ctx, st, plan)
}

// applyBatch is apply for a PruneStore: the originals and stubs of every pending
// output whose slot still holds its original go to the store in one transaction; on
// failure nothing is pruned and the plan says why.
func (a *Advisor) applyBatch(ctx context.Context, ps PruneStore, st *state, msgs []*transcript.Message, list []*outState, T int, now time.Time, plan *Plan, changes *[]DecisionRecord) {
	var (
		ready  []*outState
		prunes []Prune
		kept   = list[:0]
	)
	for _, o := range list {
		text, ok := outputText(msgs, o)
		if !ok || transcript.TextHash(text) != o.hash {
			// The slot no longer holds the original: no stub without the original.
			kept = append(kept, o)
			continue
		}
		ready = append(ready, o)
		prunes = append(prunes, Prune{
			Original: Original{
				RecallID: o.recallID, SessionID: st.id, OutputKey: o.key, Tool: o.tool,
				Summary: o.summary, Text: text, Hash: o.hash, Tokens: o.tokens, Step: o.step,
			},
			Stub: StubRecord{
				RecallID: o.recallID, SessionID: st.id, OutputKey: o.key, Stub: o.stub,
				Step: T, Reason: o.reason, Score: o.score, At: now,
			},
		})
	}
	if len(prunes) > 0 {
		if err := ps.SavePrunes(ctx, prunes); err != nil {
			plan.StorageError = fmt.Sprintf("originals and stubs not stored, pruning stopped: %v", err)
			a.warnOnce(st, "storage-original", "storage: cannot store originals and stubs; pruning stopped", err)
			kept = append(kept, ready...)
			ready = nil
		}
	}
	for i, o := range ready {
		o.inPending = false
		a.prune(st, o, o.stub, o.stubTokens, o.reason, o.score, T)
		if st.frozen == nil {
			st.frozen = map[string]StubRecord{}
		}
		st.frozen[o.key] = prunes[i].Stub
		plan.Pruned++
		*changes = append(*changes, a.record(st, o, T))
	}
	slices.SortFunc(kept, func(x, y *outState) int { return x.i - y.i })
	clear(list[len(kept):])
	st.pending = kept
	a.syncVersion(ctx, st, plan)
}

// syncVersion: our own stubs moved the store's version by one each; when nobody else
// wrote meanwhile, the next step need not read the stubs back.
func (a *Advisor) syncVersion(ctx context.Context, st *state, plan *Plan) {
	if vs, ok := a.Store.(VersionedStore); ok && plan.Pruned > 0 && st.synced {
		if v, err := vs.SessionVersion(ctx, st.id); err == nil && v == st.version+int64(plan.Pruned) {
			st.version = v
		}
	}
}

// keepReason is the reason of a candidate scored at or above the cutoff.
func keepReason(score, cutoff float64) string {
	return fmt.Sprintf("score %.2f >= cutoff %.2f", score, cutoff)
}

// outputText finds o's current text in the session's messages.
func outputText(msgs []*transcript.Message, o *outState) (string, bool) {
	if o.msg >= len(msgs) || o.block >= len(msgs[o.msg].Outputs) {
		return "", false
	}
	out := msgs[o.msg].Outputs[o.block]
	if out.Key != o.key {
		return "", false
	}
	return out.Text, true
}

// stubText renders the stub of DESIGN.md step 7 for o with the given reason, for
// example `[pruned: Read /src/get.rs, 4,210 tokens, score 0.08 < cutoff 0.25;
// recall("o_7f3a9c0b1d") restores it]`: tool and argument summary (cut to 80
// characters), the original's size in tokens, the reason, and the recall call.
func (a *Advisor) stubText(o *outState, reason string) string {
	what := strings.TrimSpace(o.tool + " " + cards.Cut(o.summary, 80))
	return fmt.Sprintf("[pruned: %s, %s tokens, %s; %s(%q) restores it]",
		what, thousands(o.tokens), reason, a.Config.RecallTool, o.recallID)
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
