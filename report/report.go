// Package report renders what pruneadvisor did as HTML: the report page of a
// replay store (`pruneadvisor report`: one self-contained file) and the live page
// of a proxy (`serve`'s /ui/). Both are drawn by the same templates
// (templates/*.html, html/template: every name, path, summary and reason is
// escaped as text), with plots as inline SVG computed here and one small inline
// script (the stub filter) allowed by its hash in the Content-Security-Policy
// (CSP); the pages load nothing else.
//
// Every figure on a page is read from the structure the command line prints for
// the same data: tuning.Calibration (what `calibrate --json` prints) and
// calibrate.SessionTrace for the report; advisor.Plan (what /v1/advise returns)
// and ledger.SessionTotals (what `ledger --json` prints) for the live page. Each figure
// carries its JSON path and exact value in data attributes (data-field,
// data-value), so a test checks the page against the JSON field by field. Nothing
// here prices, sums or simulates; the one ratio drawn (the Pareto front's share of
// the oracle's token-steps) is of two figures of the JSON, both in its tooltip.
//
// The package imports the domain (calibrate, replay, tuning, advisor, ledger), not
// net/http: server serves the live page, the command writes the report.
package report

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"time"

	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/tuning"
)

//go:embed templates/*.html
var templateFS embed.FS

// css is the pages' one style sheet, inlined and allowed by its hash.
const css = `body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:0 16px 48px;color:#222}
h1{margin:16px 0 4px}h2{margin-top:32px;border-bottom:1px solid #ddd}h3{margin:20px 0 6px;font-size:15px}
.muted{color:#666}code{font:12px ui-monospace,monospace}.path{word-break:break-all}
nav a{color:#1f5fa8}dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 16px}dl.facts dt{color:#555}dl.facts dd{margin:0}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#f6f6f6;position:sticky;top:0}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.advisor td{font-weight:600}td.summary{max-width:420px;word-break:break-all}td.reason{max-width:360px;color:#555}
.fig.missing{color:#999}figure.chart{margin:8px 0}figcaption{color:#666;font-size:12px}
svg .area{fill:#fcfcfc;stroke:#ccc}svg .grid{stroke:#eee}svg .tick,svg .legend,svg .rulelabel,svg .dotlabel{font-size:11px;fill:#444}
svg .axis{font-size:12px;fill:#333}svg .title{font-size:13px;font-weight:600;fill:#222}svg .rule{stroke-width:1.2}
input[type=search]{width:320px;padding:3px 6px}`

// filterJS filters each table named by an input's data-filter to the rows holding
// the input's text (case-insensitive); the pages' only script.
const filterJS = `document.querySelectorAll('input[data-filter]').forEach(function(inp){var t=document.getElementById(inp.getAttribute('data-filter'));if(!t)return;inp.addEventListener('input',function(){var q=inp.value.toLowerCase();t.querySelectorAll('tbody tr').forEach(function(tr){tr.hidden=q!==''&&tr.textContent.toLowerCase().indexOf(q)<0;});});});`

func hashSource(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// CSP is the Content-Security-Policy of both pages: nothing from anywhere (no
// other origin, and not even the page's own: it loads nothing), inline SVG, the
// one style sheet and the one script allowed by their SHA-256 hashes. The report
// file carries it in a meta element; /ui/ also sends it as a header (with
// frame-ancestors 'none', which only a header can carry: UIHeaderCSP).
var CSP = "default-src 'none'; style-src " + hashSource(css) + "; script-src " + hashSource(filterJS) + "; img-src data:; base-uri 'none'; form-action 'none'"

// UIHeaderCSP is CSP with frame-ancestors 'none': the header /ui/ sends.
var UIHeaderCSP = CSP + "; frame-ancestors 'none'"

var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"add":    func(a, b float64) float64 { return round1(a + b) },
	"sub":    func(a, b float64) float64 { return round1(a - b) },
	"half":   func(a float64) float64 { return round1(a / 2) },
	"bottom": func(c *chart) float64 { return c.Top + c.PH },
	"right":  func(c *chart) float64 { return c.Left + c.PW },
	"tickY":  func(c *chart) float64 { return c.Top + c.PH + 14 },
}).ParseFS(templateFS, "templates/*.html"))

// page is what the head and the foot of both pages need.
type page struct {
	Title   string
	CSP     string
	CSS     template.CSS
	JS      template.JS
	Refresh int // seconds between reloads, 0 for none
}

func newPage(title string, refresh int) page {
	return page{Title: title, CSP: CSP, CSS: template.CSS(css), JS: template.JS(filterJS), Refresh: refresh}
}

// Data is what the report page shows: one calibration of a replay store and the
// per-session traces and stubs of the same replays.
type Data struct {
	// Calibration is what `calibrate --json` prints for the store (required).
	Calibration *tuning.Calibration
	// Traces holds one trace per Calibration.Sessions entry, in the same order
	// (calibrate.Traces over the same records), at Budget.
	Traces []calibrate.SessionTrace
	// Budget is the budget the Pareto front and the traces are drawn at, in
	// tokens: the replay's own (the advisor's real rewrites). A budget the
	// calibration was not priced at means its first.
	Budget int
	// Stubs are the advisor's stubs of the same replays (replay.Record.Stubs).
	Stubs []replay.Stub
	// Generated is when the report was made (shown in UTC).
	Generated time.Time
}

// stubRow is one row of a table of stubs, shared by both pages.
type stubRow struct {
	Session, Tool, Summary, Reason, RecallID string
	StubTokens, Score                        string
	Tokens, PrunedAt                         int
}

type stubTable struct {
	ID          string
	WithSession bool
	Rows        []stubRow
}

func score(s float64) string {
	if s < 0 {
		return "rule" // a rule decided it (superseded, duplicate), not a score
	}
	return fmt.Sprintf("%.3f", s)
}

type facts struct {
	Sessions, Outputs, Untimed, Cold, Target, Digest figure
}

type reportView struct {
	Page           page
	DB             string
	Generated      string
	Sessions       []string
	Groups         []string
	Dropped        []string
	Objective      string
	Facts          facts
	Scorers        []scorerView
	Budgets        []budgetView
	OverviewHeader []string
	MainBudget     string // the Pareto front's budget
	TraceBudget    string // the traces' budget (Data.Budget)
	Pareto         *chart
	Reliability    *chart
	SessionViews   []sessionView
	StubTable      stubTable
}

// Write writes the report page of d to w: one HTML document that loads nothing
// (inline CSS, SVG and script; CSP in a meta element). Errors: d without a
// calibration or with traces not matching its sessions (one per session, in
// order), and w's.
func Write(w io.Writer, d Data) error {
	c := d.Calibration
	if c == nil {
		return fmt.Errorf("report: no calibration")
	}
	if len(d.Traces) != len(c.Sessions) {
		return fmt.Errorf("report: %d traces for %d sessions", len(d.Traces), len(c.Sessions))
	}
	if len(c.Report.Budgets) == 0 {
		return fmt.Errorf("report: the calibration priced no budget")
	}
	bi := mainBudget(c, d.Budget)
	v := reportView{
		Page: newPage("pruneadvisor report", 0), DB: c.DB, Generated: d.Generated.UTC().Format(time.DateTime + " UTC"),
		Sessions: c.Sessions, Groups: c.Groups, Dropped: append(append([]string(nil), c.Dropped...), c.Omitted...),
		Objective: string(c.Report.Objective),
		Facts: facts{
			Sessions: count("report.sessions", c.Report.Sessions), Outputs: count("report.outputs", c.Report.Outputs),
			Untimed: count("report.sessions_untimed", c.Report.SessionsUntimed), Cold: count("report.cold_calls", c.Report.ColdCalls),
			Target: rate("report.target_miss", c.Report.TargetMiss), Digest: digestFigure(c.DigestBudget, c.DigestShare),
		},
		Scorers: scorerViews(c, bi), Budgets: budgetViews(c, c.Report.Budgets[bi].Budget), OverviewHeader: overviewHeader,
		MainBudget: thousands(int64(c.Report.Budgets[bi].Budget)), TraceBudget: thousands(int64(d.Budget)),
		Pareto: paretoChart(c, bi), Reliability: reliabilityChart(c),
		StubTable: stubTable{ID: "stub-table", WithSession: true},
	}
	perSession := map[string]int{}
	for _, s := range d.Stubs {
		perSession[s.Session]++
		v.StubTable.Rows = append(v.StubTable.Rows, stubRow{Session: s.Session, Tool: s.Tool, Summary: s.Summary, Reason: s.Reason,
			RecallID: s.RecallID, Tokens: s.Tokens, StubTokens: strconv.Itoa(s.StubTokens), PrunedAt: s.PrunedAt, Score: score(s.Score)})
	}
	for i, t := range d.Traces {
		sv := sessionView{Index: i, Name: c.Sessions[i], Steps: len(t.KeepAll), Chart: contextChart(fmt.Sprintf("context-%d", i), t), Stubs: perSession[c.Sessions[i]]}
		if t.Advisor != nil {
			sv.Rewrites, sv.Recalls = t.Advisor.Rewrites, t.Advisor.Recalls
		}
		v.SessionViews = append(v.SessionViews, sv)
	}
	if err := tmpl.ExecuteTemplate(w, "report", v); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// digestFigure is the recommended stub digest budget, in tokens, with the share
// of a long output it grows to when one is recommended (share > 0:
// digest_share_recommended), or a dash when none is recommended (-1 in
// calibrate --json).
func digestFigure(b int, share float64) figure {
	if b < 0 {
		return missing("no digest budget recommended (digest_budget_recommended -1)")
	}
	f := count("digest_budget_recommended", b)
	if share > 0 {
		f.Text += fmt.Sprintf(", growing to %.4g%% of a long output", 100*share)
		f.Note = fmt.Sprintf("digest_share_recommended %g: the budget is max(%d, %g x the output's tokens)", share, b, share)
	}
	return f
}
