package server

import (
	"bytes"
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/report"
)

// The live page, GET /ui/ (report.WriteLive): the sessions advised now with their
// context and stubs, the ledger's savings so far and the recent recalls. It is
// behind the same checks as every other route (the Host check, and the token when
// one is set: 401 without it) and sends report.UIHeaderCSP: the page loads nothing,
// not even from this server, and runs only its own hashed script.

// liveSteps bounds the steps /ui/ keeps per session (the latest ones).
const liveSteps = 1000

// liveRecalls bounds the recalls /ui/ lists.
const liveRecalls = 20

// liveState is one session's latest plan and its course, for /ui/.
type liveState struct {
	mu    sync.Mutex
	plan  advisor.Plan
	steps []report.LiveStep
	set   bool
}

// note records a step's plan (a clone the caller will not change). Only the
// stubbed items are kept (pruned or recalled: what the page lists), without the
// stub texts, so that a session held in memory keeps a few hundred bytes a stub
// for the page, not its whole item table.
func (l *liveState) note(p advisor.Plan) {
	var stubbed []advisor.Item
	for _, it := range p.Items {
		if it.Decision == advisor.DecisionPruned || it.Decision == advisor.DecisionRecalled {
			it.Stub = ""
			stubbed = append(stubbed, it)
		}
	}
	p.Items, p.Stubs, p.Changed = stubbed, nil, nil
	l.mu.Lock()
	defer l.mu.Unlock()
	l.plan, l.set = p, true
	st := report.LiveStep{Step: p.Step, Context: p.ContextTokens, Saved: p.SavedTokens, Rewrite: p.Rewrite}
	if n := len(l.steps); n > 0 && l.steps[n-1].Step >= p.Step {
		// The same step again (a retried request) or an earlier one (a
		// rewritten history): the course restarts there.
		k := sort.Search(n, func(i int) bool { return l.steps[i].Step >= p.Step })
		l.steps = l.steps[:k]
	}
	if len(l.steps) >= liveSteps {
		l.steps = append(l.steps[:0], l.steps[len(l.steps)-liveSteps+1:]...)
	}
	l.steps = append(l.steps, st)
}

// get returns a copy of the state; false before the session's first plan.
func (l *liveState) get() (report.LiveSession, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return report.LiveSession{Plan: l.plan, Steps: append([]report.LiveStep(nil), l.steps...)}, l.set
}

// ledgerReader is the part of a ledger store /ui/ reads (storage.DB has it): what
// `pruneadvisor ledger` prints.
type ledgerReader interface {
	LedgerSessions(ctx context.Context, sessionID string) ([]ledger.SessionTotals, error)
}

// ui serves the live page.
func (s *Server) ui(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/ui/" {
		writeError(w, http.StatusNotFound, "no page %s: the live page is /ui/", r.URL.Path)
		return
	}
	ctx := r.Context()
	live := report.Live{Generated: time.Now(), Sessions: s.sessions.snapshot()}
	live.Ledger, live.LedgerNote = s.liveLedger(ctx)
	live.Recalls = s.liveRecalls(ctx, live.Sessions)
	var buf bytes.Buffer
	if err := report.WriteLive(&buf, live); err != nil {
		s.log.Warn("live page failed", "route", "ui", "err", err)
		writeError(w, http.StatusInternalServerError, "live page: %v", err)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", report.UIHeaderCSP)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// liveLedger reads the ledger as `ledger --json` prints it (its sessions and their
// ledger.Sum), or says why there is none.
func (s *Server) liveLedger(ctx context.Context) (*report.LiveLedger, string) {
	if s.ledger == nil || s.ledger.store == nil {
		return nil, "No ledger: this proxy keeps its ledger in /metrics only."
	}
	lr, ok := s.ledger.store.(ledgerReader)
	if !ok {
		return nil, "No ledger: this proxy's ledger store cannot be read back."
	}
	sessions, err := lr.LedgerSessions(ctx, "")
	if err != nil {
		s.log.Warn("live page: reading the ledger failed", "route", "ui", "err", err)
		return nil, "The ledger could not be read (the log says why)."
	}
	if sessions == nil {
		sessions = []ledger.SessionTotals{}
	}
	return &report.LiveLedger{Sessions: sessions, Total: ledger.Sum(sessions)}, ""
}

// liveRecalls returns the store's recall events of the sessions shown, newest
// first, at most liveRecalls.
func (s *Server) liveRecalls(ctx context.Context, sessions []report.LiveSession) []advisor.RecallEvent {
	var out []advisor.RecallEvent
	seen := map[string]bool{}
	for _, ls := range sessions {
		id := ls.Plan.SessionID
		if seen[id] {
			continue
		}
		seen[id] = true
		evs, err := s.store.SessionRecalls(ctx, id)
		if err != nil {
			s.log.Warn("live page: reading recalls failed", "route", "ui", "session", id, "err", err)
			continue
		}
		out = append(out, evs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	if len(out) > liveRecalls {
		out = out[:liveRecalls]
	}
	return out
}
