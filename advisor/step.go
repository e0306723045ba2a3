package advisor

import (
	"context"
	"errors"
	"fmt"
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
	if st.indexed > len(msgs) || st.indexed > 0 && fingerprint(msgs[st.indexed-1]) != st.lastPrint {
		st.reset()
	}
	if !st.loaded {
		frozen, err := a.Store.SessionStubs(ctx, st.id)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return plan, nil, cerr
			}
			plan.StorageError = err.Error()
			a.warnOnce(st, "storage", "storage: cannot load frozen stubs", err)
		} else {
			st.frozen = frozen
			st.loaded = true
		}
	}
	a.index(st, msgs)
	T := st.steps + 1
	plan.Step = T
	now := a.Clock()
	cold := !st.lastCall.IsZero() && now.Sub(st.lastCall) > time.Duration(cfg.CacheTTL)
	st.lastCall = now

	var changes []DecisionRecord
	a.applyRecalls(ctx, st, T, &plan, &changes)

	over := st.ctxTokens > plan.Budget
	plan.OverBudget = over

	// Protect, apply rules, collect due asks.
	var due []*outState
	for _, o := range st.outs {
		if o.decision == DecisionPruned {
			continue
		}
		prev := o.decision
		prevReason := o.reason
		if why := a.protection(o, T); why != "" {
			if o.decision != DecisionPending {
				o.decision, o.reason = DecisionProtected, why
			}
		} else if o.decision != DecisionPending {
			switch {
			case o.dead:
				o.decision, o.by = DecisionPending, o.deadBy
				o.reason = fmt.Sprintf("%s by call %s", o.deadRule, o.deadBy)
			case o.retention == transcript.RetentionDisposable:
				o.decision, o.reason = DecisionPending, "disposable"
			default:
				if o.decision == DecisionProtected || o.decision == DecisionRecalled {
					o.decision, o.reason = DecisionKeep, "candidate, not yet scored"
				}
				if o.asks == 0 || a.schedule.Due(o.lastAsk, o.asks, T, over) {
					due = append(due, o)
				}
			}
		}
		if o.decision != prev || o.reason != prevReason && o.decision != DecisionKeep {
			o.decidedAt = T
			changes = append(changes, a.record(st, o, T))
		}
	}

	// Ask: every due card in one batch.
	if len(due) > 0 && a.Scorer != nil {
		a.ask(ctx, st, s, due, T, &plan, &changes)
		if err := ctx.Err(); err != nil {
			return plan, nil, err
		}
	}

	// Decide whether pending prunes are applied now.
	pending := 0
	for _, o := range st.outs {
		if o.decision == DecisionPending {
			pending += o.tokens - a.stubTokensEstimate(o)
		}
	}
	switch {
	case pending == 0:
	case st.ctxTokens > plan.HardLimit:
		plan.RewriteReason = "hard limit"
	case cold:
		plan.RewriteReason = "cache cold"
	case float64(pending) >= cfg.RewriteFraction*float64(plan.Budget):
		plan.RewriteReason = fmt.Sprintf("pending >= %g%% of budget", cfg.RewriteFraction*100)
	}
	if plan.RewriteReason != "" {
		a.apply(ctx, st, s, T, &plan, &changes)
	}
	for _, o := range st.outs {
		if o.decision == DecisionPending {
			plan.PendingTokens += o.tokens - a.stubTokensEstimate(o)
		}
	}

	if len(changes) > 0 {
		if err := a.Store.RecordDecisions(ctx, changes); err != nil {
			a.warnOnce(st, "storage-decisions", "storage: cannot record decisions", err)
		}
	}
	plan.ContextTokens = st.ctxTokens
	plan.SavedTokens = st.fullTokens - st.ctxTokens
	plan.Items = make([]Item, len(st.outs))
	stubs := make(map[string]string)
	for i, o := range st.outs {
		plan.Items[i] = o.item()
		if o.decision == DecisionPruned {
			stubs[o.key] = o.stub
		}
	}
	return plan, s.WithStubs(msgs, stubs), nil
}

// protection returns why o is not a candidate at step T, or "".
func (a *Advisor) protection(o *outState, T int) string {
	cfg := a.Config
	switch {
	case o.retention == transcript.RetentionKeep:
		return "caller marked keep"
	case o.excluded:
		return "excluded tool " + o.tool
	case T-o.step <= cfg.ProtectedSteps:
		return fmt.Sprintf("recent (age %d <= %d steps)", T-o.step, cfg.ProtectedSteps)
	case o.protectTill >= T:
		return fmt.Sprintf("recalled at step %d", o.recalledAt)
	case o.tokens < cfg.MinCandidateTokens:
		return fmt.Sprintf("small (%d < %d tokens)", o.tokens, cfg.MinCandidateTokens)
	}
	return ""
}

// ask sends the due cards in one batch and folds the scores into the states.
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
	if err != nil {
		kind = FailKind(err)
		a.warnOnce(st, "scorer-"+kind, "scorer failed; nothing pruned on its account", err)
	}
	plan.Asked = len(due)
	asks := make([]AskRecord, len(due))
	for i, o := range due {
		o.asks++
		o.lastAsk = T
		sc := cards.Score{}
		if err == nil && i < len(scores) {
			sc = scores[i]
		}
		asks[i] = AskRecord{
			SessionID: st.id, OutputKey: o.key, Step: T,
			CardHash: transcript.TextHash(batch.Cards[i].Text("c")),
			Scorer:   a.Scorer.Name(), Score: sc.Keep, OK: sc.OK, Latency: latency,
		}
		if !sc.OK {
			k := kind
			if k == "" {
				k = "no-score"
			}
			asks[i].FailKind = k
			if plan.ScorerFailures == nil {
				plan.ScorerFailures = map[string]int{}
			}
			plan.ScorerFailures[k]++
			continue
		}
		o.score = sc.Keep
		prev, prevReason := o.decision, o.reason
		if sc.Keep < a.Config.Cutoff {
			o.decision = DecisionPending
			o.reason = fmt.Sprintf("score %.2f < cutoff %.2f", sc.Keep, a.Config.Cutoff)
		} else {
			o.decision = DecisionKeep
			o.reason = fmt.Sprintf("score %.2f >= cutoff %.2f", sc.Keep, a.Config.Cutoff)
		}
		if o.decision != prev || o.reason != prevReason {
			o.decidedAt = T
			*changes = append(*changes, a.record(st, o, T))
		}
	}
	if err := a.Store.RecordAsks(ctx, asks); err != nil {
		a.warnOnce(st, "storage-asks", "storage: cannot record asks", err)
	}
}

// apply turns pending prunes into stubs, original first. A storage failure stops
// the rewrite: what was not committed stays pending, and the plan says why.
func (a *Advisor) apply(ctx context.Context, st *state, s *transcript.Session, T int, plan *Plan, changes *[]DecisionRecord) {
	now := a.Clock()
	for _, o := range st.outs {
		if o.decision != DecisionPending {
			continue
		}
		text, ok := outputText(s.Messages, o)
		if !ok {
			continue
		}
		stub := a.stubText(o)
		if len(stub) >= len(text) {
			o.decision, o.reason = DecisionProtected, "stub not shorter than the output"
			continue
		}
		orig := Original{
			RecallID: o.recallID, SessionID: st.id, OutputKey: o.key, Tool: o.tool,
			Summary: o.summary, Text: text, Hash: o.hash, Tokens: o.tokens, Step: o.step,
		}
		if err := a.Store.SaveOriginal(ctx, orig); err != nil {
			plan.StorageError = "original not stored, nothing pruned: " + err.Error()
			a.warnOnce(st, "storage-original", "storage: cannot store originals; pruning stopped", err)
			return
		}
		rec := StubRecord{
			RecallID: o.recallID, SessionID: st.id, OutputKey: o.key, Stub: stub,
			Step: T, Reason: o.reason, Score: o.score, At: now,
		}
		if err := a.Store.SaveStub(ctx, rec); err != nil {
			plan.StorageError = "stub not stored, nothing pruned: " + err.Error()
			a.warnOnce(st, "storage-stub", "storage: cannot store stubs; pruning stopped", err)
			return
		}
		o.stub = stub
		o.stubTokens = transcript.CountTokens(stub)
		o.decision = DecisionPruned
		o.decidedAt = T
		st.ctxTokens -= o.tokens - o.stubTokens
		plan.Pruned++
		*changes = append(*changes, a.record(st, o, T))
	}
	plan.Rewrite = plan.Pruned > 0
	if !plan.Rewrite {
		plan.RewriteReason = ""
	}
}

// applyRecalls brings back outputs recalled since the last step.
func (a *Advisor) applyRecalls(ctx context.Context, st *state, T int, plan *Plan, changes *[]DecisionRecord) {
	evs, err := a.Store.SessionRecalls(ctx, st.id)
	if err != nil {
		a.warnOnce(st, "storage-recalls", "storage: cannot read recalls", err)
		return
	}
	if len(evs) <= st.recalls {
		return
	}
	window := a.schedule.Gap(0)
	for _, e := range evs[st.recalls:] {
		o, ok := st.byKey[e.OutputKey]
		if !ok || o.decision != DecisionPruned {
			continue
		}
		st.ctxTokens += o.tokens - o.stubTokens
		o.stub, o.stubTokens = "", 0
		o.decision, o.reason = DecisionRecalled, "recalled"
		o.recalledAt, o.protectTill, o.decidedAt = T, T+window, T
		o.dead = false
		*changes = append(*changes, a.record(st, o, T))
	}
	st.recalls = len(evs)
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

// stubText renders the stub of DESIGN.md step 7, for example
// `[pruned: Read /src/get.rs, 4,210 tokens, score 0.08 < cutoff 0.25; recall("o_7f3a9c0b1d") restores it]`.
func (a *Advisor) stubText(o *outState) string {
	what := strings.TrimSpace(o.tool + " " + cards.Cut(o.summary, 80))
	return fmt.Sprintf("[pruned: %s, %s tokens, %s; %s(%q) restores it]",
		what, thousands(o.tokens), o.reason, a.Config.RecallTool, o.recallID)
}

// stubTokensEstimate is the token count a stub for o will have, used to size
// pending prunes before the stub exists.
func (a *Advisor) stubTokensEstimate(o *outState) int {
	if o.stubTokens > 0 {
		return o.stubTokens
	}
	return min(o.tokens, 40)
}

func (a *Advisor) record(st *state, o *outState, T int) DecisionRecord {
	return DecisionRecord{
		SessionID: st.id, OutputKey: o.key, Step: T, Decision: o.decision,
		Reason: o.reason, Score: o.score, Superseder: o.by, Tokens: o.tokens,
	}
}

func (o *outState) item() Item {
	return Item{
		Key: o.key, Tool: o.tool, Summary: o.summary, Step: o.step, Tokens: o.tokens,
		Decision: o.decision, Reason: o.reason, By: o.by, Score: o.score,
		DecidedAt: o.decidedAt, RecallID: o.recallID, Stub: o.stub,
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
// when its error has a Kind() string method, "timeout" for deadline errors, else
// "error".
func FailKind(err error) string {
	var k interface{ Kind() string }
	switch {
	case errors.As(err, &k):
		return k.Kind()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "error"
	}
}

// thousands formats n with comma separators ("4,210").
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
