package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/tuning"
)

// figure is one number on a page: the value as read from the structure printed by
// `calibrate --json` (or the ledger), its JSON path there (Path, e.g.
// "report.budgets.0.advisor.applied.net_usd"), and the text shown. The page carries
// the path and the exact value in data attributes, so a test can check every
// figure against the JSON field by field.
type figure struct {
	Path  string
	Value string // strconv 'g' -1 of the value: exactly the float64 encoding/json writes
	Text  string
	Note  string // a tooltip ("" for none)
}

func usd(path string, v float64) figure {
	return figure{Path: path, Value: exact(v), Text: dollars(v, 2)}
}

func count(path string, v int) figure {
	return figure{Path: path, Value: strconv.Itoa(v), Text: thousands(int64(v))}
}

func count64(path string, v int64) figure {
	return figure{Path: path, Value: strconv.FormatInt(v, 10), Text: thousands(v)}
}

func rate(path string, v float64) figure {
	return figure{Path: path, Value: exact(v), Text: fmt.Sprintf("%.3f", v)}
}

func exact(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// missing is a figure the structure does not hold (yet): shown as a dash with why.
func missing(note string) figure { return figure{Text: "–", Note: note} }

// prunerRow is one pruner's row of an overview table.
type prunerRow struct {
	Name, Kind string
	Cells      []figure
}

// overviewHeader names prunerRow's cells, in order.
var overviewHeader = []string{"paid $", "net $ (vs keep-all)", "sessions costlier", "pruned", "stub misses (applied)", "miss rate (decisions)", "token-steps kept out", "calls over budget", "peak context", "rewrites", "compactions", "lost to compaction"}

// rowOf is the overview row of r, found at JSON path p.
func rowOf(kind, p string, r calibrate.Result) prunerRow {
	a := p + ".applied"
	return prunerRow{Name: r.Name, Kind: kind, Cells: []figure{
		usd(a+".paid_usd", r.Applied.PaidUSD),
		usd(a+".net_usd", r.Applied.NetUSD),
		count(a+".sessions_costlier", r.Applied.SessionsCostlier),
		count(p+".pruned", r.Pruned),
		count(a+".misses", r.Applied.Misses),
		rate(p+".miss_rate", r.MissRate),
		count64(a+".token_steps", r.Applied.TokenSteps),
		count(a+".steps_over_budget", r.Applied.StepsOverBudget),
		count(a+".peak_context", r.Applied.PeakContext),
		count(a+".rewrites", r.Applied.Rewrites),
		count(a+".compactions", r.Applied.Compactions),
		count(a+".compaction_misses", r.Applied.CompactionMisses),
	}}
}

// budgetView is the overview of one budget.
type budgetView struct {
	Budget  figure
	KeepAll figure
	Main    bool // the replay's own budget (the advisor's real rewrites)
	Header  []string
	Rows    []prunerRow
}

func budgetViews(c *tuning.Calibration, main int) []budgetView {
	var out []budgetView
	for bi, b := range c.Report.Budgets {
		p := fmt.Sprintf("report.budgets.%d", bi)
		v := budgetView{Budget: count(p+".budget", b.Budget), KeepAll: usd(p+".keep_all_usd", b.KeepAllUSD), Main: b.Budget == main, Header: overviewHeader}
		if b.Advisor != nil {
			v.Rows = append(v.Rows, rowOf("advisor", p+".advisor", *b.Advisor))
		}
		for i, x := range b.Baselines {
			v.Rows = append(v.Rows, rowOf("baseline", fmt.Sprintf("%s.baselines.%d", p, i), x))
		}
		for i, x := range b.Anchors {
			v.Rows = append(v.Rows, rowOf("anchor", fmt.Sprintf("%s.anchors.%d", p, i), x))
		}
		out = append(out, v)
	}
	return out
}

// mainBudget returns the index of the budget the report is drawn at: the one equal
// to want, else the first.
func mainBudget(c *tuning.Calibration, want int) int {
	for i, b := range c.Report.Budgets {
		if b.Budget == want {
			return i
		}
	}
	return 0
}

// scorerView is one scorer's reliability figures and recommendation.
type scorerView struct {
	Name       string
	Figures    []figure // asks, failed, used, Brier, AUC
	Recommends figure   // the recommended cutoff at the main budget
	Reason     string
}

func scorerViews(c *tuning.Calibration, bi int) []scorerView {
	var out []scorerView
	for i, s := range c.Report.Scorers {
		p := fmt.Sprintf("report.scorers.%d.reliability", i)
		rel := s.Reliability
		v := scorerView{Name: s.Scorer, Figures: []figure{
			count(p+".n", rel.N), count(p+".failed", rel.Failed), count(p+".used", rel.Used),
			maybeRate(p+".brier", rel.Brier), maybeRate(p+".auc", rel.AUC),
		}}
		if len(c.Report.Budgets) > bi {
			for k, ss := range c.Report.Budgets[bi].Scorers {
				if ss.Scorer != s.Scorer {
					continue
				}
				rp := fmt.Sprintf("report.budgets.%d.scorers.%d.recommendation", bi, k)
				if ss.Recommendation.None {
					v.Recommends = missing("no cutoff meets the target miss rate")
				} else {
					v.Recommends = figure{Path: rp + ".cutoff", Value: exact(ss.Recommendation.Cutoff), Text: fmt.Sprintf("%.2f", ss.Recommendation.Cutoff)}
				}
				v.Reason = ss.Recommendation.Reason
			}
		}
		out = append(out, v)
	}
	return out
}

// maybeRate is rate, or a dash for NaN (written null by calibrate --json).
func maybeRate(path string, v float64) figure {
	if v != v {
		return missing("undefined: no asks, or one class only (null in calibrate --json)")
	}
	return figure{Path: path, Value: exact(v), Text: fmt.Sprintf("%.4f", v)}
}

// paretoChart draws miss rate against the share of the oracle's token-steps at
// budget bi: each scorer's sweep as a line over its cutoffs, the advisor, each
// baseline and each anchor as a dot. The share is a ratio of two figures of the JSON (the result's
// token_steps over the oracle's), both named in each dot's tooltip.
func paretoChart(c *tuning.Calibration, bi int) *chart {
	b := c.Report.Budgets[bi]
	var oracle int64
	for _, x := range b.Baselines {
		if x.Name == "oracle" {
			oracle = x.TokenSteps
		}
	}
	share := func(r calibrate.Result) float64 {
		if oracle == 0 {
			return 0
		}
		return float64(r.TokenSteps) / float64(oracle)
	}
	xmax, ymax := 1.0, 0.0
	all := append(append([]calibrate.Result(nil), b.Baselines...), b.Anchors...)
	if b.Advisor != nil {
		all = append(all, *b.Advisor)
	}
	for _, s := range b.Scorers {
		all = append(all, s.Sweep...)
	}
	for _, r := range all {
		xmax, ymax = max(xmax, share(r)), max(ymax, r.MissRate)
	}
	ch := newChart("pareto", fmt.Sprintf("Miss rate against share of the oracle's token-steps (budget %s)", thousands(int64(b.Budget))), 860, 420, 0, xmax*1.02, 0, niceMax(max(ymax*1.02, c.Report.TargetMiss*1.5, 0.01)))
	ch.XLabel, ch.YLabel = "token-steps kept out, share of the oracle's", "miss rate (pruned outputs used later)"
	ch.ticks(5, false, fixed2, func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) })
	ch.hrule(c.Report.TargetMiss, fmt.Sprintf("target miss %.3f", c.Report.TargetMiss), "#888", "2 3")
	for i, s := range b.Scorers {
		xs, ys := make([]float64, len(s.Sweep)), make([]float64, len(s.Sweep))
		for k, r := range s.Sweep {
			xs[k], ys[k] = share(r), r.MissRate
			ch.Dots = append(ch.Dots, dot{X: ch.x(xs[k]), Y: ch.y(ys[k]), R: 2.5, Color: palette(i),
				Title: fmt.Sprintf("%s at cutoff %s: miss rate %.4f, %s token-steps", s.Scorer, calibrate.CutoffText(r.Cutoff), r.MissRate, thousands(r.TokenSteps))})
		}
		ch.polyline("scorer "+s.Scorer+" (sweep)", palette(i), "", xs, ys)
	}
	named := all[:len(b.Baselines)+len(b.Anchors)]
	if b.Advisor != nil {
		named = append([]calibrate.Result{*b.Advisor}, named...)
	}
	for j, r := range named {
		col := palette(len(b.Scorers) + j)
		ch.Dots = append(ch.Dots, dot{X: ch.x(share(r)), Y: ch.y(r.MissRate), R: 5, Color: col, Label: r.Name,
			Title: fmt.Sprintf("%s: miss rate %.4f, %s token-steps (oracle %s)", r.Name, r.MissRate, thousands(r.TokenSteps), thousands(oracle))})
	}
	return ch.done()
}

// reliabilityChart draws each scorer's observed later-use rate against its mean
// keep-probability per non-empty bin, with the diagonal.
func reliabilityChart(c *tuning.Calibration) *chart {
	ch := newChart("reliability", "Reliability: later use against keep-probability", 520, 420, 0, 1, 0, 1)
	ch.XLabel, ch.YLabel = "keep-probability (bin mean)", "used later (rate)"
	ch.ticks(5, false, fixed2, fixed2)
	ch.polyline("perfect calibration", "#aaa", "4 3", []float64{0, 1}, []float64{0, 1})
	for i, s := range c.Report.Scorers {
		var xs, ys []float64
		for _, b := range s.Reliability.Bins {
			if b.N == 0 {
				continue
			}
			xs, ys = append(xs, b.MeanScore), append(ys, b.Rate)
			ch.Dots = append(ch.Dots, dot{X: ch.x(b.MeanScore), Y: ch.y(b.Rate), R: 3, Color: palette(i),
				Title: fmt.Sprintf("%s [%.2f,%.2f): %d asks, %d used later (rate %.3f, mean score %.3f)", s.Scorer, b.Lo, b.Hi, b.N, b.Used, b.Rate, b.MeanScore)})
		}
		ch.polyline("scorer "+s.Scorer, palette(i), "", xs, ys)
	}
	return ch.done()
}

// sessionView is one session's section: its name, its context chart and the steps
// of its rewrites and recalls.
type sessionView struct {
	Index    int
	Name     string
	Steps    int
	Chart    *chart
	Rewrites []int
	Recalls  []int
	Stubs    int
}

// contextChart draws a session's context over its calls: keep-all, the advisor's
// own rewrites and the oracle, the budget and the hard limit (when within the
// plot's range), a tick for each advisor rewrite and recall.
func contextChart(id string, t calibrate.SessionTrace) *chart {
	peak := 0
	for _, c := range t.KeepAll {
		peak = max(peak, c)
	}
	if t.Advisor != nil {
		for _, c := range t.Advisor.Context {
			peak = max(peak, c)
		}
	}
	for _, c := range t.Oracle.Context {
		peak = max(peak, c)
	}
	n := len(t.KeepAll)
	last := float64(max(n, 2))
	ch := newChart(id, "", 860, 240, 1, last, 0, niceMax(float64(max(peak, 1))*1.02))
	ch.XLabel, ch.YLabel = "model call (step)", "context sent (tokens)"
	ch.ticks(stepTicks(1, last), true, stepLabel, tokensLabel)
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	series := func(name, color, dash string, ctx []int) {
		ys := make([]float64, len(ctx))
		for i, c := range ctx {
			ys[i] = float64(c)
		}
		ch.polyline(name, color, dash, xs[:len(ys)], ys)
	}
	series("keep-all", "#999", "", t.KeepAll)
	if t.Advisor != nil {
		series("advisor", palette(0), "", t.Advisor.Context)
	}
	series("oracle", "#2ca02c", "5 3", t.Oracle.Context)
	var notes []string
	if !ch.hrule(float64(t.Budget), "budget "+thousands(int64(t.Budget)), "#e69f00", "6 3") {
		notes = append(notes, "budget "+thousands(int64(t.Budget))+" above the plot")
	}
	if t.CompactionPoint > 0 {
		if !ch.hrule(float64(t.CompactionPoint), "compaction point "+thousands(int64(t.CompactionPoint)), "#d62728", "2 2") {
			notes = append(notes, "the agent's compaction point "+thousands(int64(t.CompactionPoint))+" above the plot")
		}
	} else if !ch.hrule(float64(t.HardLimit), "hard limit "+thousands(int64(t.HardLimit)), "#d62728", "2 2") {
		notes = append(notes, "hard limit (compaction point less a step) "+thousands(int64(t.HardLimit))+" above the plot")
	}
	for _, s := range t.KeepAllCompactions {
		ch.Marks = append(ch.Marks, mark{X: ch.x(float64(s)), Y1: ch.Top, Y2: ch.Top + 16, Color: "#999", Title: fmt.Sprintf("keep-all: the agent compacts before call %d", s)})
	}
	if len(t.KeepAllCompactions) > 0 {
		ch.legend("keep-all compacts (grey tick at the top)", "#999", "")
	}
	if t.Advisor != nil {
		for _, s := range t.Advisor.Rewrites {
			ch.Marks = append(ch.Marks, mark{X: ch.x(float64(s)), Y1: ch.Top + ch.PH, Y2: ch.Top + ch.PH - 10, Color: palette(0), Title: fmt.Sprintf("advisor rewrite at call %d", s)})
		}
		for _, s := range t.Advisor.Compactions {
			ch.Marks = append(ch.Marks, mark{X: ch.x(float64(s)), Y1: ch.Top, Y2: ch.Top + 16, Color: palette(0), Title: fmt.Sprintf("advisor: the agent compacts before call %d", s)})
		}
		for _, s := range t.Advisor.Recalls {
			ch.Marks = append(ch.Marks, mark{X: ch.x(float64(s)), Y1: ch.Top, Y2: ch.Top + 10, Color: "#d62728", Title: fmt.Sprintf("recall after call %d (a miss)", s)})
		}
		if len(t.Advisor.Rewrites) > 0 {
			ch.legend("rewrite (tick at the bottom)", palette(0), "")
		}
		if len(t.Advisor.Recalls) > 0 {
			ch.legend("recall (tick at the top)", "#d62728", "")
		}
	}
	for i, n := range notes {
		if i > 0 {
			ch.Caption += "; "
		}
		ch.Caption += n
	}
	return ch.done()
}

// dollars writes v with the sign before the dollar: -$0.26, $1.50.
func dollars(v float64, decimals int) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', decimals, 64)
	if v < 0 && strings.Trim(s, "0.") != "" {
		return "-$" + s
	}
	return "$" + s
}
