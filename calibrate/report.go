package calibrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pruneadvisor/pruneadvisor/internal/forecast"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// ScorerInput is one scorer's replay records: the same outputs as the report's base
// outputs, with this scorer's asks.
type ScorerInput struct {
	Name    string   // scorer name as stored, e.g. "lexical", "fitted", "ollama:qwen2.5:0.5b:p2"
	Outputs []Output // one record per base output (any order)
	// ReplayCutoff is the cutoff the replay that made the asks pruned this
	// scorer's candidates under (advisor.Config.CutoffFor; 0 when unknown): it
	// asked no more about what it pruned, so under that cutoff the sweep sees
	// fewer prunes than a replay that pruned nothing by score would
	// (ScorerSweep.ReplayCutoff).
	ReplayCutoff float64
}

// ScorerReport is the calibration of one scorer: its reliability (independent of the
// budget).
type ScorerReport struct {
	Scorer      string      `json:"scorer"`
	Reliability Reliability `json:"reliability"`
}

// ScorerSweep is one scorer's sweep at one budget.
type ScorerSweep struct {
	Scorer string `json:"scorer"`
	// ReplayCutoff is ScorerInput.ReplayCutoff: under it the sweep and the front
	// are lower bounds of the token-steps (what a replay that pruned there would
	// have gone on asking is not recorded); replay --asks-only records every ask.
	ReplayCutoff float64  `json:"replay_cutoff"`
	Sweep        []Result `json:"sweep"` // one per cutoff, in cutoff order
	// Random holds the random baseline at the prune rate of each sweep entry (same
	// index, same cutoff).
	Random         []Result       `json:"random"`
	Recommendation Recommendation `json:"recommendation"`
	// Front is the sweep refined between neighbouring cutoffs whose miss rates are
	// more than FrontGap apart (Evaluator.Front), in cutoff order; Dominance sets
	// each anchor regime beside it.
	Front     []Result    `json:"front"`
	Dominance []Dominance `json:"dominance"`
}

// Dominance is one anchor regime set beside a scorer's front: the front's point
// with no higher miss rate and no fewer token-steps (the one with the most
// token-steps among them), or none.
type Dominance struct {
	Anchor     string  `json:"anchor"`
	MissRate   float64 `json:"miss_rate"`
	TokenSteps int64   `json:"token_steps"`
	// Cutoff is the dominating point's cutoff, -1 when no point dominates;
	// PointMissRate and PointTokenSteps are its figures.
	Cutoff          float64 `json:"cutoff"`
	PointMissRate   float64 `json:"point_miss_rate"`
	PointTokenSteps int64   `json:"point_token_steps"`
}

// DominanceOf sets each anchor regime (Evaluator.Anchors) beside a scorer's front
// (Evaluator.Front): the front's point with no higher miss rate and no fewer
// token-steps, the one with the most token-steps among them, or Cutoff -1 when
// none; in the anchors' order.
func DominanceOf(front, anchors []Result) []Dominance { return dominance(front, anchors) }

// dominance sets each anchor beside front.
func dominance(front, anchors []Result) []Dominance {
	var out []Dominance
	for _, a := range anchors {
		d := Dominance{Anchor: a.Name, MissRate: a.MissRate, TokenSteps: a.TokenSteps, Cutoff: -1}
		for _, r := range front {
			if r.MissRate <= a.MissRate && r.TokenSteps >= a.TokenSteps && (d.Cutoff < 0 || r.TokenSteps > d.PointTokenSteps) {
				d.Cutoff, d.PointMissRate, d.PointTokenSteps = r.Cutoff, r.MissRate, r.TokenSteps
			}
		}
		out = append(out, d)
	}
	return out
}

// BudgetReport is everything priced at one budget in one modelled window.
type BudgetReport struct {
	// Window is the modelled context window in tokens (Options.Window): where
	// the agents compact (Options.CompactionOf).
	Window     int     `json:"window"`
	Budget     int     `json:"budget"`
	KeepAllUSD float64 `json:"keep_all_usd"` // what doing nothing pays for input
	// Advisor is what the advisor did in the replay (its own rewrites, when the budget
	// is the replay's; else its scorer's decisions at its cutoff under the planner);
	// nil when the report has no advisor.
	Advisor   *Result       `json:"advisor,omitempty"`
	Baselines []Result      `json:"baselines"` // keep-all, rules, recency-N…, oracle
	Anchors   []Result      `json:"anchors"`   // the regimes of other tools (anchors.go)
	Scorers   []ScorerSweep `json:"scorers"`
}

// Report is a whole calibration: baselines, anchors and scorers over the same outputs,
// at each budget.
type Report struct {
	Options    Options   `json:"-"`
	TargetMiss float64   `json:"target_miss"`
	Objective  Objective `json:"objective"`
	Outputs    int       `json:"outputs"`
	Sessions   int       `json:"sessions"`
	// SessionsUntimed is how many of the sessions carry no call time (no timestamps
	// in their transcripts): they are priced on a warm cache throughout, an upper
	// bound on their rewrites' cost. ColdCalls counts the model calls of the other
	// sessions that came after a pause longer than the cache TTL (free rewrites).
	SessionsUntimed int            `json:"sessions_untimed"`
	ColdCalls       int            `json:"cold_calls"`
	Scorers         []ScorerReport `json:"scorers"`
	Budgets         []BudgetReport `json:"budgets"`
}

// AdvisorInput is the advisor's own replay: which scorer it ran with at what cutoff,
// the budget it ran under, and the step at which it stubbed each base output (0 =
// never).
type AdvisorInput struct {
	Scorer    string
	Cutoff    float64
	Budget    int
	Window    int // the replay's context window in tokens; 0: Options.Window
	AppliedAt []int
}

// ReportConfig selects what NewReport computes. The zero value of each field means
// its default.
type ReportConfig struct {
	Options Options // simulation settings; Budget is overridden by each of Budgets
	Budgets []int   // the budgets to price at, in tokens; nil: Options.Budget alone
	// Windows are the context windows to model, in tokens; nil: Options.Window
	// alone. In a window w other than Options.Window the hard limit is
	// Options.HardLimit scaled by w / Options.Window, and with Budgets nil the
	// budget is Options.Budget scaled the same way (the window fractions).
	Windows []int
	Cutoffs []float64
	Recency []int
	// TargetMiss is the miss-rate target of the recommendation, in [0,1]; 0 is a
	// valid target (no misses at all), so there is no default: set it.
	TargetMiss float64
	Objective  Objective // what the recommendation maximises; "": ObjectiveNet
	// Advisor, when set, adds the advisor's own row at every budget.
	Advisor *AdvisorInput
}

// NewReport evaluates, at every budget: the baselines over base (asks ignored), the
// anchors, the advisor's own replay, and for every scorer its sweep over the cutoffs
// (sorted ascending), random at the prune rate of each cutoff, and the recommended
// cutoff; and each scorer's reliability once. A scorer without a qualifying cutoff
// gets a Recommendation with None set; that is not an error. Budgets change the
// regime's budget, not its hard limit (a share of the model's window, whatever
// budget the user prefers), which only rises to a budget above it. It fails (ErrInvalid, ErrNoSession) on invalid
// options, records, cutoffs, target or objective, and when a scorer's outputs are
// not the base outputs.
func NewReport(base []Output, sessions []Calls, scorers []ScorerInput, cfg ReportConfig) (Report, error) {
	if cfg.Options.Budget == 0 {
		cfg.Options = DefaultOptions()
	}
	if err := cfg.check(); err != nil {
		return Report{}, err
	}
	rep := Report{Options: cfg.Options, TargetMiss: cfg.TargetMiss, Objective: cfg.Objective, Outputs: len(base)}
	inputs, err := alignScorers(base, scorers)
	if err != nil {
		return Report{}, err
	}
	for _, w := range cfg.windows() {
		for _, b := range cfg.budgetsAt(w) {
			br, err := cfg.budgetReport(w, b, base, sessions, inputs)
			if err != nil {
				return Report{}, err
			}
			rep.Budgets = append(rep.Budgets, br)
		}
	}
	ev, err := NewEvaluator(base, sessions, cfg.Options)
	if err != nil {
		return Report{}, err
	}
	rep.Sessions = len(ev.sessions)
	rep.SessionsUntimed, rep.ColdCalls = ev.Timing()
	for _, sc := range inputs {
		rep.Scorers = append(rep.Scorers, ScorerReport{Scorer: sc.Name, Reliability: ReliabilityOf(sc.Outputs, cfg.Options.Bins)})
	}
	return rep, nil
}

// check validates the config and fills its defaults.
func (c *ReportConfig) check() error {
	if math.IsNaN(c.TargetMiss) || c.TargetMiss < 0 || c.TargetMiss > 1 {
		return fmt.Errorf("%w: target miss rate %v outside [0,1]", ErrInvalid, c.TargetMiss)
	}
	if c.Objective == "" {
		c.Objective = ObjectiveNet
	}
	if c.Objective != ObjectiveNet && c.Objective != ObjectiveTokenSteps {
		return fmt.Errorf("%w: objective %q", ErrInvalid, c.Objective)
	}
	if c.Cutoffs == nil {
		c.Cutoffs = DefaultCutoffs()
	}
	if c.Advisor != nil && !slices.Contains(c.Cutoffs, c.Advisor.Cutoff) {
		c.Cutoffs = append(slices.Clone(c.Cutoffs), c.Advisor.Cutoff)
	}
	c.Cutoffs = slices.Clone(c.Cutoffs)
	slices.Sort(c.Cutoffs)
	for _, x := range c.Cutoffs {
		if math.IsNaN(x) || x < 0 || x > 1 {
			return fmt.Errorf("%w: cutoff %v outside [0,1]", ErrInvalid, x)
		}
	}
	for _, b := range c.Budgets {
		if b <= 0 {
			return fmt.Errorf("%w: budget %d: want a positive number of tokens", ErrInvalid, b)
		}
	}
	for _, w := range c.Windows {
		if w <= 0 {
			return fmt.Errorf("%w: window %d: want a positive number of tokens", ErrInvalid, w)
		}
	}
	return c.Options.Validate()
}

// windows returns the windows to model (Windows, else Options.Window).
func (c *ReportConfig) windows() []int {
	if len(c.Windows) == 0 {
		return []int{c.Options.Window}
	}
	return c.Windows
}

// scaled returns n scaled from Options.Window to window w (n when either is 0).
func (c *ReportConfig) scaled(n, w int) int {
	if c.Options.Window <= 0 || w == c.Options.Window {
		return n
	}
	return int(int64(n) * int64(w) / int64(c.Options.Window))
}

// budgetsAt returns the budgets to price at in window w: Budgets, else
// Options.Budget scaled to w.
func (c *ReportConfig) budgetsAt(w int) []int {
	if len(c.Budgets) == 0 {
		return []int{max(c.scaled(c.Options.Budget, w), 1)}
	}
	return c.Budgets
}

// alignScorers checks each scorer's outputs against base and returns them in base
// order.
func alignScorers(base []Output, scorers []ScorerInput) ([]ScorerInput, error) {
	index := map[[2]string]int{}
	for i, o := range base {
		index[[2]string{o.Session, o.Key}] = i
	}
	out := make([]ScorerInput, len(scorers))
	for k, sc := range scorers {
		if len(sc.Outputs) != len(base) {
			return nil, fmt.Errorf("%w: scorer %q: %d outputs, base has %d", ErrInvalid, sc.Name, len(sc.Outputs), len(base))
		}
		aligned := make([]Output, len(base))
		for _, o := range sc.Outputs {
			i, ok := index[[2]string{o.Session, o.Key}]
			if !ok {
				return nil, fmt.Errorf("%w: scorer %q: output %q of session %q is not in the base outputs", ErrInvalid, sc.Name, o.Key, o.Session)
			}
			if !sameOutput(o, base[i]) {
				return nil, fmt.Errorf("%w: scorer %q: output %q of session %q differs from the base record beyond its asks", ErrInvalid, sc.Name, o.Key, o.Session)
			}
			aligned[i] = o
		}
		out[k] = ScorerInput{Name: sc.Name, Outputs: aligned, ReplayCutoff: sc.ReplayCutoff}
	}
	return out, nil
}

// budgetReport prices everything at budget b in window w.
func (c *ReportConfig) budgetReport(w, b int, base []Output, sessions []Calls, scorers []ScorerInput) (BudgetReport, error) {
	opts := c.Options
	opts.Window = w
	opts.Budget, opts.HardLimit = b, max(c.scaled(opts.HardLimit, w), b)
	be, err := NewEvaluator(base, sessions, opts)
	if err != nil {
		return BudgetReport{}, fmt.Errorf("base outputs: %w", err)
	}
	br := BudgetReport{Window: w, Budget: b, KeepAllUSD: be.KeepAllUSD(), Baselines: be.Baselines(c.Recency), Anchors: be.Anchors(ClearAtLeast(b))}
	for _, sc := range scorers {
		ev, err := NewEvaluator(sc.Outputs, sessions, opts)
		if err != nil {
			return BudgetReport{}, fmt.Errorf("scorer %q: %w", sc.Name, err)
		}
		ss := ScorerSweep{Scorer: sc.Name, ReplayCutoff: sc.ReplayCutoff, Sweep: ev.Sweep(sc.Name, c.Cutoffs)}
		ss.Front = ev.Front(sc.Name, ss.Sweep, FrontGap, FrontPoints)
		ss.Dominance = dominance(ss.Front, br.Anchors)
		for _, r := range ss.Sweep {
			ss.Random = append(ss.Random, ev.Random(r))
		}
		rec, err := recommendFront(ss, c.TargetMiss, c.Objective)
		if err != nil && !errors.Is(err, ErrNoCutoff) {
			return BudgetReport{}, fmt.Errorf("scorer %q: %w", sc.Name, err)
		}
		ss.Recommendation = rec
		br.Scorers = append(br.Scorers, ss)
	}
	if a := c.Advisor; a != nil {
		r, err := c.advisorRow(a, w, b, be, br)
		if err != nil {
			return BudgetReport{}, err
		}
		br.Advisor = &r
	}
	return br, nil
}

// recommendFront recommends a cutoff from ss's sweep (RecommendBy), or from its
// refined front (the sweep's cutoffs and those Front added between them) when
// that does strictly better on the objective: a target that falls between two
// swept cutoffs is then met by one between them, not by the lower of the two,
// and where a swept cutoff does as well it is the one recommended (a round
// cutoff, not one just over a score). Errors: RecommendBy's.
func recommendFront(ss ScorerSweep, targetMiss float64, ob Objective) (Recommendation, error) {
	rec, err := RecommendBy(ss.Sweep, targetMiss, ob)
	if err != nil && !errors.Is(err, ErrNoCutoff) {
		return rec, err
	}
	fr, ferr := RecommendBy(ss.Front, targetMiss, ob)
	if ferr == nil && (rec.None || ob.value(fr.Result) > ob.value(rec.Result)) {
		return fr, nil
	}
	return rec, err
}

// advisorRow is the advisor's own rewrites at its replay's budget and window, and
// its scorer's sweep entry at its cutoff (the planner over its decisions) at any
// other.
func (c *ReportConfig) advisorRow(a *AdvisorInput, w, b int, be *Evaluator, br BudgetReport) (Result, error) {
	aw := a.Window
	if aw == 0 {
		aw = c.Options.Window
	}
	if b == a.Budget && w == aw && a.AppliedAt != nil {
		r, err := be.Applied("advisor", a.AppliedAt)
		if err == nil {
			r.Cutoff = a.Cutoff
		}
		return r, err
	}
	for _, ss := range br.Scorers {
		if ss.Scorer != a.Scorer {
			continue
		}
		for _, r := range ss.Sweep {
			if r.Cutoff == a.Cutoff {
				r.Name = "advisor"
				return r, nil
			}
		}
	}
	return Result{}, fmt.Errorf("%w: advisor: no sweep of scorer %q at cutoff %s", ErrInvalid, a.Scorer, CutoffText(a.Cutoff))
}

// sameOutput compares every field but Asks.
func sameOutput(a, b Output) bool {
	return a.Session == b.Session && a.Key == b.Key && a.Tokens == b.Tokens && a.Step == b.Step &&
		a.CandidateFrom == b.CandidateFrom && a.EndStep == b.EndStep && a.RuleDeadAt == b.RuleDeadAt &&
		a.Offset == b.Offset && a.StubTokens == b.StubTokens && slices.Equal(a.Uses, b.Uses)
}

// countWords says what the agents count before they compact
// (Options.CompactionCount), for the settings line.
func countWords(c string) string {
	switch c {
	case "", "agent":
		return "each agent counts its context as it does (compaction table)"
	case "sent":
		return "every agent counts what a call sends after the rewrite"
	}
	return "every agent counts its context by " + c
}

// WriteText writes the report as plain-text tables: the reliability of each scorer,
// then per budget the advisor, the baselines, the anchors, and each scorer's sweep
// (with random at equal prune rate) and recommendation. Money is in US dollars;
// "net $" is keep-all's price minus the pruner's (positive: cheaper than doing
// nothing), at the decision level ("dec") and the applied level (the planner's
// regime), compactions included. "compactions", "lost" (compaction misses) and
// "stub misses" are the applied level's.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	o := r.Options
	fmt.Fprintf(tw, "%d outputs in %d sessions; low-water %.0f%% and least rewrite %.0f%% of the budget, the hard limit's rewrites down to %.0f%% of it at most, pay factor %.2f, remaining steps %.2f x steps (over the budget %.2f; at least %.0f), over-budget cutoff %.2f, cache TTL %s, recall overhead %d tokens, last resort %s; %s\n",
		r.Outputs, r.Sessions, 100*o.LowWaterFraction, 100*o.RewriteFraction, 100*o.HardLimitLowWaterFraction, o.PayFactor, o.Estimator.Factor, o.estimatorAt(true).Factor, o.Estimator.Min, o.OverBudgetCutoff, o.CacheTTL, o.RecallOverheadTokens, onOff(o.LastResort), countWords(o.CompactionCount))
	fmt.Fprintf(tw, "call times: %d of %d sessions carry none (no timestamps: priced on a warm cache throughout); %d calls of the others came after a pause longer than the cache TTL (cold: their rewrites are free)\n",
		r.SessionsUntimed, r.Sessions, r.ColdCalls)
	for _, s := range r.Scorers {
		rel := s.Reliability
		fmt.Fprintf(tw, "\nscorer %s: %d asks (%d without score), %d used later; Brier %.4f, AUC %.4f\n", s.Scorer, rel.N, rel.Failed, rel.Used, rel.Brier, rel.AUC)
		fmt.Fprint(tw, "bin\tn\tused later\trate\tmean score\t\n")
		for _, b := range rel.Bins {
			fmt.Fprintf(tw, "[%.2f,%.2f)\t%d\t%d\t%.3f\t%.3f\t\n", b.Lo, b.Hi, b.N, b.Used, b.Rate, b.MeanScore)
		}
	}
	for _, b := range r.Budgets {
		b.writeText(tw)
	}
	return tw.Flush()
}

// CutoffText prints a cutoff for a table: two decimals ("0.05"), or three or
// four when two would round it ("0.045", "0.0563"), so that a replay's own
// cutoff reads as it was set.
func CutoffText(x float64) string {
	for d, p := 2, 100.0; d < 4; d, p = d+1, p*10 {
		if math.Abs(math.Round(x*p)/p-x) < 1e-9 {
			return fmt.Sprintf("%.*f", d, x)
		}
	}
	return fmt.Sprintf("%.4f", x)
}

const resultHeader = "pruner\tcutoff\tpruned\tmiss rate\tshare\tdec net $\tdec costlier\tnet $\tcostlier\tover budget\tpeak\trewrites\tcompactions\tlost\tstub misses\t\n"

func resultRow(tw io.Writer, x Result) {
	c := "-"
	if x.Cutoff >= 0 {
		c = CutoffText(x.Cutoff)
	}
	fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.3f\t%.2f\t%d\t%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", x.Name, c, x.Pruned, x.MissRate, x.SavedShare(),
		x.Decision.NetUSD, x.Decision.SessionsCostlier, x.Applied.NetUSD, x.Applied.SessionsCostlier, x.Applied.StepsOverBudget, x.Applied.PeakContext, x.Applied.Rewrites,
		x.Applied.Compactions, x.Applied.CompactionMisses, x.Applied.Misses)
}

// recorded returns the compactions the transcripts record (Level.RecordedCompactions),
// as keep-all went through them.
func (b BudgetReport) recorded() int {
	for _, x := range b.Baselines {
		if x.Name == "keep-all" {
			return x.Applied.RecordedCompactions
		}
	}
	return 0
}

func (b BudgetReport) writeText(tw io.Writer) {
	fmt.Fprintf(tw, "\nbudget %d tokens, window %d: keep-all pays $%.2f for input, its compactions included", b.Budget, b.Window, b.KeepAllUSD)
	if n := b.recorded(); n > 0 {
		// The same for every pruner: not a column.
		fmt.Fprintf(tw, "; every pruner goes through the %d compactions the transcripts record (priced, not counted under compactions)", n)
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, resultHeader)
	if b.Advisor != nil {
		resultRow(tw, *b.Advisor)
	}
	for _, x := range b.Baselines {
		resultRow(tw, x)
	}
	for _, x := range b.Anchors {
		resultRow(tw, x)
	}
	for _, s := range b.Scorers {
		fmt.Fprintf(tw, "\nscorer %s at budget %d\n%s", s.Scorer, b.Budget, resultHeader)
		for i, x := range s.Sweep {
			resultRow(tw, x)
			if i < len(s.Random) {
				resultRow(tw, s.Random[i])
			}
		}
		rec := s.Recommendation
		if rec.None {
			fmt.Fprintf(tw, "recommended cutoff: none (%s)\n", rec.Reason)
		} else {
			fmt.Fprintf(tw, "recommended cutoff: %s (%s)\n", CutoffText(rec.Cutoff), rec.Reason)
			if net := rec.Result.Applied.NetUSD; net < 0 {
				fmt.Fprintf(tw, "  (at this cutoff the advisor pays $%.2f more than doing nothing at budget %d and this window; --objective net picks the cutoff that nets the most within the target)\n", -net, b.Budget)
			}
		}
		writeDominance(tw, s)
	}
}

// MinReplayCutoffNote is the least replay cutoff writeDominance notes as making the
// front a lower bound under it: smaller ones (replay --asks-only's) prune nothing a
// scorer scores in practice.
const MinReplayCutoffNote = 1e-9

// writeDominance prints each anchor beside the scorer's refined front.
func writeDominance(tw io.Writer, s ScorerSweep) {
	if len(s.Dominance) == 0 {
		return
	}
	fmt.Fprintf(tw, "anchors beside scorer %s's front (%d cutoffs, neighbours within %.0f point of miss rate where the scores allow):\n", s.Scorer, len(s.Front), 100*FrontGap)
	if s.ReplayCutoff >= MinReplayCutoffNote {
		fmt.Fprintf(tw, "  (the replay these asks come from, stored or run in this process, pruned at cutoff %.4g and asked no more about what it pruned: under it the front is a lower bound; replay --asks-only records every ask)\n", s.ReplayCutoff)
	}
	WriteDominance(tw, s.Dominance)
}

// WriteDominance writes one line per anchor of ds (DominanceOf): its miss rate and
// token-steps, and the dominating point or "not dominated". Errors are w's, not
// reported (the callers write to a tabwriter or a terminal).
func WriteDominance(w io.Writer, ds []Dominance) {
	for _, d := range ds {
		if d.Cutoff < 0 {
			fmt.Fprintf(w, "  %-28s miss rate %.3f, %d token-steps: not dominated\n", d.Anchor, d.MissRate, d.TokenSteps)
			continue
		}
		fmt.Fprintf(w, "  %-28s miss rate %.3f, %d token-steps: dominated at cutoff %.4f (miss rate %.3f, %d token-steps)\n",
			d.Anchor, d.MissRate, d.TokenSteps, d.Cutoff, d.PointMissRate, d.PointTokenSteps)
	}
}

// MarshalJSON writes NaN Brier and AUC (no examples, or one class only) as null.
func (r Reliability) MarshalJSON() ([]byte, error) {
	type plain Reliability
	return json.Marshal(struct {
		plain
		Brier *float64 `json:"brier"`
		AUC   *float64 `json:"auc"`
	}{plain(r), forecast.NullNaN(r.Brier), forecast.NullNaN(r.AUC)})
}

// onOff renders a switch as "on" or "off".
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
