package report

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// LiveRefresh is how often the live page reloads itself, in seconds.
const LiveRefresh = 5

// Live is what the live page (serve's /ui/) shows.
type Live struct {
	// Sessions are the sessions the proxy advises now (their state in memory), in
	// the order to show them.
	Sessions []LiveSession
	// Ledger is what `ledger --json` prints for the proxy's store: its sessions
	// and their total (LedgerSessions, ledger.Sum); nil when the proxy keeps no
	// ledger store (LedgerNote then says so, or why it could not be read).
	Ledger     *LiveLedger
	LedgerNote string
	// Recalls are the recent recalls of the sessions advised now, newest first
	// (the store's recall events).
	Recalls []advisor.RecallEvent
	// Generated is when the page was made (shown in UTC).
	Generated time.Time
}

// LiveLedger is `ledger --json`'s sessions and total.
type LiveLedger struct {
	Sessions []ledger.SessionTotals `json:"sessions"`
	Total    ledger.Totals          `json:"total"`
}

// LiveSession is one session advised now: its latest plan (what /v1/advise
// returns for the step) and its course so far.
type LiveSession struct {
	Plan advisor.Plan
	// Steps are its advised steps in order, the latest last (a bounded window:
	// the server keeps the latest ones).
	Steps []LiveStep
}

// LiveStep is one advised step of a live session, from its plan.
type LiveStep struct {
	Step int // Plan.Step
	// Context is Plan.ContextTokens (after the step's rewrite) and Saved
	// Plan.SavedTokens (what the stubs keep out), in tokens.
	Context, Saved int
	Rewrite        bool // Plan.Rewrite
}

// ledgerHeader names the ledger rows' cells, in order.
var ledgerHeader = []string{"requests", "paid $", "keep-all $", "saved $", "rewrites", "rewrite $", "recalls", "token-steps kept out"}

type ledgerRow struct {
	Name  string
	Cells []figure
}

func ledgerRowOf(name, p string, t ledger.Totals) ledgerRow {
	return ledgerRow{Name: name, Cells: []figure{
		count(p+".requests", t.Requests), usd4(p+".paid_usd", t.PaidUSD), usd4(p+".keep_all_usd", t.KeepAllUSD), usd4(p+".saved_usd", t.SavedUSD),
		count(p+".rewrites", t.Rewrites), usd4(p+".rewrite_usd", t.RewriteUSD), count(p+".recalls", t.Recalls), count(p+".removed_tokens", t.RemovedTokens),
	}}
}

func usd4(path string, v float64) figure {
	return figure{Path: path, Value: exact(v), Text: dollars(v, 4)}
}

type liveSessionView struct {
	Index                                            int
	Name                                             string
	Step, Context, Saved, Budget, HardLimit, Pending figure
	Waiting                                          string
	Chart                                            *chart
	StubTable                                        stubTable
}

type liveView struct {
	Page         page
	Generated    string
	Sessions     []LiveSession
	LedgerNote   string
	LedgerHeader []string
	LedgerRows   []ledgerRow
	Recalls      []recallRow
	SessionViews []liveSessionView
}

type recallRow struct {
	At                             string
	SessionID, OutputKey, RecallID string
	Step                           int
}

// liveChart draws a live session's context over its advised steps: as sent
// (after each rewrite) and with nothing pruned (sent plus what the stubs keep
// out), the budget and hard limit when within range, a tick per rewrite.
func liveChart(id string, s LiveSession) *chart {
	p := s.Plan
	n := len(s.Steps)
	peak, first, last := 1, 1, 2
	if n > 0 {
		first, last = s.Steps[0].Step, max(s.Steps[n-1].Step, s.Steps[0].Step+1)
	}
	for _, st := range s.Steps {
		peak = max(peak, st.Context+st.Saved)
	}
	ch := newChart(id, "", 860, 220, float64(first), float64(last), 0, niceMax(float64(peak)*1.02))
	ch.XLabel, ch.YLabel = "step", "context (tokens)"
	ch.ticks(stepTicks(float64(first), float64(last)), true, stepLabel, tokensLabel)
	xs, sent, full := make([]float64, n), make([]float64, n), make([]float64, n)
	for i, st := range s.Steps {
		xs[i], sent[i], full[i] = float64(st.Step), float64(st.Context), float64(st.Context+st.Saved)
		if st.Rewrite {
			ch.Marks = append(ch.Marks, mark{X: ch.x(xs[i]), Y1: ch.Top + ch.PH, Y2: ch.Top + ch.PH - 10, Color: palette(0), Title: fmt.Sprintf("rewrite at step %d", st.Step)})
		}
	}
	ch.polyline("nothing pruned", "#999", "", xs, full)
	ch.polyline("sent (advisor)", palette(0), "", xs, sent)
	if n <= 3 { // too few steps for a line to show: a dot each
		for i := range xs {
			ch.Dots = append(ch.Dots, dot{X: ch.x(xs[i]), Y: ch.y(full[i]), R: 3, Color: "#999", Title: fmt.Sprintf("step %d: %s tokens with nothing pruned", s.Steps[i].Step, thousands(int64(full[i])))},
				dot{X: ch.x(xs[i]), Y: ch.y(sent[i]), R: 3, Color: palette(0), Title: fmt.Sprintf("step %d: %s tokens sent", s.Steps[i].Step, thousands(int64(sent[i])))})
		}
	}
	if !ch.hrule(float64(p.Budget), "budget "+thousands(int64(p.Budget)), "#e69f00", "6 3") {
		ch.Caption = "budget " + thousands(int64(p.Budget)) + " above the plot"
	}
	if !ch.hrule(float64(p.HardLimit), "hard limit "+thousands(int64(p.HardLimit)), "#d62728", "2 2") {
		if ch.Caption != "" {
			ch.Caption += "; "
		}
		ch.Caption += "hard limit " + thousands(int64(p.HardLimit)) + " above the plot"
	}
	return ch.done()
}

// WriteLive writes the live page of l to w: the ledger's savings, the recent
// recalls, and each session advised now with its context and its stubs. Errors:
// w's.
func WriteLive(w io.Writer, l Live) error {
	v := liveView{Page: newPage("pruneadvisor live", LiveRefresh), Generated: l.Generated.UTC().Format(time.DateTime + " UTC"),
		Sessions: l.Sessions, LedgerNote: l.LedgerNote, LedgerHeader: ledgerHeader}
	if l.Ledger != nil {
		for i, s := range l.Ledger.Sessions {
			v.LedgerRows = append(v.LedgerRows, ledgerRowOf(s.SessionID, fmt.Sprintf("sessions.%d", i), s.Totals))
		}
		v.LedgerRows = append(v.LedgerRows, ledgerRowOf("total", "total", l.Ledger.Total))
	} else if v.LedgerNote == "" {
		v.LedgerNote = "No ledger: this proxy records none."
	}
	for _, r := range l.Recalls {
		v.Recalls = append(v.Recalls, recallRow{At: r.At.UTC().Format(time.DateTime), SessionID: r.SessionID, OutputKey: r.OutputKey, RecallID: r.RecallID, Step: r.Step})
	}
	for i, s := range l.Sessions {
		p := s.Plan
		sv := liveSessionView{Index: i, Name: p.SessionID,
			Step: count("step", p.Step), Context: count("context_tokens", p.ContextTokens), Saved: count("saved_tokens", p.SavedTokens),
			Budget: count("budget", p.Budget), HardLimit: count("hard_limit", p.HardLimit), Pending: count("pending_tokens", p.PendingTokens),
			Waiting: p.Waiting, Chart: liveChart(fmt.Sprintf("live-context-%d", i), s),
			StubTable: stubTable{ID: fmt.Sprintf("live-stubs-%d", i)},
		}
		for _, it := range p.Items {
			if it.Decision != advisor.DecisionPruned && it.Decision != advisor.DecisionRecalled {
				continue
			}
			sv.StubTable.Rows = append(sv.StubTable.Rows, stubRow{Tool: it.Tool, Summary: it.Summary, Reason: it.Reason, RecallID: it.RecallID,
				Tokens: it.Tokens, PrunedAt: it.DecidedAt, Score: score(it.Score), StubTokens: strconv.Itoa(tokencount.Count(it.Stub))})
		}
		v.SessionViews = append(v.SessionViews, sv)
	}
	if err := tmpl.ExecuteTemplate(w, "live", v); err != nil {
		return fmt.Errorf("live page: %w", err)
	}
	return nil
}
