package tuning

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// ErrSchedules means the schedule runs given to CompareSchedules do not line up
// (no runs, or different sessions or outputs).
var ErrSchedules = errors.New("schedule runs do not line up")

// ScheduleRun is the replays of a set of sessions under one back-off schedule.
// Every run compared must hold the same sessions in the same order.
type ScheduleRun struct {
	Schedule string           // as given, e.g. "3,6,12,24"
	Records  []*replay.Record // one per session
}

// ScheduleResult is what one schedule did over the sessions, beside the reference
// (every-step asking).
type ScheduleResult struct {
	Schedule   string `json:"schedule"`
	Outputs    int    `json:"outputs"`    // tool outputs in the sessions
	Candidates int    `json:"candidates"` // outputs that were a candidate at some step
	Asks       int    `json:"asks"`       // cards scored
	// AsksPerCandidate = Asks / Candidates (0 with no candidates).
	AsksPerCandidate float64 `json:"asks_per_candidate"`
	// ScorerTokens sums the asks' scorer tokens (replay.Record.Asks Tokens, see
	// replay.Replayer.Replay).
	ScorerTokens int64 `json:"scorer_tokens"`
	// ScorerTime sums the wall time of the scorer's batches (one per step with
	// asks).
	ScorerTime      time.Duration `json:"scorer_time_ns"`
	OverBudgetSteps int           `json:"over_budget_steps"` // steps at which re-asks were possible
	// Later counts outputs pruned under both schedules, later under this one;
	// LaterTokenSteps is the token-steps those late prunes saved less (decision
	// level, see calibrate.Result).
	Later           int   `json:"later"`
	LaterTokenSteps int64 `json:"later_token_steps"`
	Earlier         int   `json:"earlier"` // outputs pruned under both, earlier under this one
	// Changed counts outputs pruned under one schedule and never under the other.
	Changed int `json:"changed"`
	// Result evaluates the replay's own prune decisions (PendingPrunes)
	// with calibrate's accounting: misses, token-steps, rewrites, net dollars.
	Result calibrate.Result `json:"result"`
	// AppliedTokenSteps is what the advisor's stubs actually saved in the replay
	// (replay.Record.SavedTokenSteps, summed).
	AppliedTokenSteps int64 `json:"applied_token_steps"`
}

// BackoffReport compares schedules and recommends one.
type BackoffReport struct {
	Reference string           `json:"reference"` // the first run's schedule
	Cutoff    float64          `json:"cutoff"`
	Tolerance float64          `json:"tolerance"`
	Sessions  int              `json:"sessions"`
	Results   []ScheduleResult `json:"results"` // in the order given, reference first
	// Recommended is the schedule chosen (see CompareSchedules); Reason says why.
	Recommended string `json:"recommended"`
	Reason      string `json:"reason"`
}

// CompareSchedules evaluates every run (runs[0] is the reference, normally every-step
// asking "1") at the advisor's cutoff with calibrate's accounting under opts, and
// recommends the schedule with the fewest scorer tokens (then fewest asks, then
// the earlier in runs) among those that save at least (1 - tolerance) of the
// reference's token-steps and make no more misses than the reference (decision
// level; a count, not a rate: each miss costs a recall, and a schedule that prunes
// fewer outputs may show a higher rate with the same misses). The reference itself
// always qualifies. It is a Comparison fed every session in turn. Errors:
// ErrSchedules when the runs do not hold the same sessions and outputs in the same
// order; calibrate's ErrInvalid for bad options or records.
func CompareSchedules(runs []ScheduleRun, cutoff float64, opts calibrate.Options, tolerance float64) (BackoffReport, error) {
	names := make([]string, len(runs))
	for k, run := range runs {
		names[k] = run.Schedule
	}
	c, err := NewComparison(names, cutoff, opts, tolerance)
	if err != nil {
		return c.rep, err
	}
	n := len(runs[0].Records)
	for _, run := range runs {
		if len(run.Records) != n {
			return c.rep, fmt.Errorf("%w: schedule %q has %d sessions, %q has %d", ErrSchedules, run.Schedule, len(run.Records), runs[0].Schedule, n)
		}
	}
	recs := make([]*replay.Record, len(runs))
	for i := range n {
		for k, run := range runs {
			recs[k] = run.Records[i]
		}
		if err := c.Add(recs); err != nil {
			return c.rep, err
		}
	}
	return c.Report(), nil
}

// Comparison compares back-off schedules one session at a time: Add folds a
// session's replays under every schedule into running totals and keeps nothing
// else of them, so memory does not grow with the number of sessions (the
// calibrate figures of a set of sessions are sums over its sessions). Report gives
// what CompareSchedules gives for the sessions added, in the order added. A
// Comparison is not safe for concurrent use.
type Comparison struct {
	rep  BackoffReport
	opts calibrate.Options
}

// NewComparison starts a comparison of the schedules (names as given; the first
// is the reference) at the cutoff, under opts, with the tolerance of
// CompareSchedules. Errors: ErrSchedules with no schedule; calibrate.ErrInvalid
// for a tolerance outside [0,1] or invalid opts.
func NewComparison(schedules []string, cutoff float64, opts calibrate.Options, tolerance float64) (*Comparison, error) {
	c := &Comparison{rep: BackoffReport{Cutoff: cutoff, Tolerance: tolerance}, opts: opts}
	if len(schedules) == 0 {
		return c, fmt.Errorf("%w: no runs", ErrSchedules)
	}
	if math.IsNaN(tolerance) || tolerance < 0 || tolerance > 1 {
		return c, fmt.Errorf("%w: tolerance %v outside [0,1]", calibrate.ErrInvalid, tolerance)
	}
	if err := opts.Validate(); err != nil {
		return c, err
	}
	c.rep.Reference = schedules[0]
	c.rep.Results = make([]ScheduleResult, len(schedules))
	for k, s := range schedules {
		c.rep.Results[k].Schedule = s
		c.rep.Results[k].Result.Cutoff = cutoff
		c.rep.Results[k].Result.Name = "schedule " + s
	}
	return c, nil
}

// Add folds one session's replays into the comparison: recs[k] is its replay
// under schedule k (the reference first). Errors: ErrSchedules when recs does not
// hold one record per schedule of the same content and outputs in the same order;
// calibrate's ErrInvalid for records it cannot evaluate. After an error the
// comparison is left as it was.
func (c *Comparison) Add(recs []*replay.Record) error {
	i := c.rep.Sessions
	if len(recs) != len(c.rep.Results) {
		return fmt.Errorf("%w: session %d has %d replays for %d schedules", ErrSchedules, i, len(recs), len(c.rep.Results))
	}
	ref := recs[0]
	rows := make([]ScheduleResult, len(recs))
	prunes := make([][]calibrate.PruneAt, len(recs))
	var refOuts []calibrate.Output
	for k, rec := range recs {
		if rec.ContentHash != ref.ContentHash || len(rec.Outputs) != len(ref.Outputs) {
			return fmt.Errorf("%w: session %d of schedule %q is %s (%d outputs), the reference's is %s (%d outputs)",
				ErrSchedules, i, c.rep.Results[k].Schedule, rec.Path, len(rec.Outputs), ref.Path, len(ref.Outputs))
		}
		outs := Outputs(rec)
		if k == 0 {
			refOuts = outs
		}
		for j := range outs {
			if outs[j].Key != refOuts[j].Key {
				return fmt.Errorf("%w: output %d of session %d under schedule %q is %q, the reference's is %q", ErrSchedules, j, i, c.rep.Results[k].Schedule, outs[j].Key, refOuts[j].Key)
			}
		}
		prunes[k] = PendingPrunes(rec)
		row, err := c.sessionRow(rec, outs, prunes[k])
		if err != nil {
			return fmt.Errorf("schedule %q: %w", c.rep.Results[k].Schedule, err)
		}
		rows[k] = row
	}
	for k := range rows {
		compareTo(&rows[k], refOuts, prunes[0], prunes[k])
		c.rep.Results[k].add(rows[k])
	}
	c.rep.Sessions++
	return nil
}

// sessionRow is one session's figures under one schedule.
func (c *Comparison) sessionRow(rec *replay.Record, outs []calibrate.Output, prune []calibrate.PruneAt) (ScheduleResult, error) {
	var res ScheduleResult
	res.Outputs = len(outs)
	res.Asks = len(rec.Asks)
	lastStep := -1
	for _, a := range rec.Asks {
		res.ScorerTokens += int64(a.Tokens)
		if a.Step != lastStep {
			res.ScorerTime += a.Latency
			lastStep = a.Step
		}
	}
	for _, s := range rec.StepFacts {
		if s.OverBudget {
			res.OverBudgetSteps++
		}
	}
	for _, f := range rec.Outputs {
		if f.CandidateFrom > 0 {
			res.Candidates++
		}
	}
	res.AppliedTokenSteps = rec.SavedTokenSteps()
	ev, err := calibrate.NewEvaluator(outs, []calibrate.Calls{Calls(rec)}, c.opts)
	if err != nil {
		return res, err
	}
	if res.Result, err = ev.Evaluate("", c.rep.Cutoff, prune); err != nil {
		return res, err
	}
	return res, nil
}

// compareTo counts the prunes of row's schedule (ps) that came later or earlier
// than the reference's (pr), or under one of them only.
func compareTo(row *ScheduleResult, outs []calibrate.Output, pr, ps []calibrate.PruneAt) {
	for i := range outs {
		a, b := pr[i].Step, ps[i].Step
		switch {
		case (a == 0) != (b == 0):
			row.Changed++
		case a > 0 && b > a:
			row.Later++
			row.LaterTokenSteps += savedAt(&outs[i], a) - savedAt(&outs[i], b)
		case a > 0 && b < a:
			row.Earlier++
		}
	}
}

// add sums one session's row into a schedule's totals (calibrate's figures are
// sums over sessions; the rates are computed again, the peak is the largest).
func (r *ScheduleResult) add(s ScheduleResult) {
	r.Outputs += s.Outputs
	r.Candidates += s.Candidates
	r.Asks += s.Asks
	r.ScorerTokens += s.ScorerTokens
	r.ScorerTime += s.ScorerTime
	r.OverBudgetSteps += s.OverBudgetSteps
	r.Later += s.Later
	r.LaterTokenSteps += s.LaterTokenSteps
	r.Earlier += s.Earlier
	r.Changed += s.Changed
	r.AppliedTokenSteps += s.AppliedTokenSteps
	if r.Candidates > 0 {
		r.AsksPerCandidate = float64(r.Asks) / float64(r.Candidates)
	}
	t, x := &r.Result, s.Result
	t.Outputs += x.Outputs
	t.Pruned += x.Pruned
	t.Misses += x.Misses
	t.TokenSteps += x.TokenSteps
	t.TotalTokenSteps += x.TotalTokenSteps
	t.StubTokenSteps += x.StubTokenSteps
	if t.Outputs > 0 {
		t.PruneRate = float64(t.Pruned) / float64(t.Outputs)
	}
	if t.Pruned > 0 {
		t.MissRate = float64(t.Misses) / float64(t.Pruned)
	}
	t.Decision.Merge(x.Decision) // one session's totals: compactions included
	t.Applied.Merge(x.Applied)
	t.Sessions = append(t.Sessions, x.Sessions...)
}

// Report recommends a schedule over the sessions added so far (see
// CompareSchedules); Sessions is their number.
func (c *Comparison) Report() BackoffReport {
	rep := c.rep
	rep.Results = append([]ScheduleResult(nil), c.rep.Results...)
	best := 0
	refRes := rep.Results[0].Result
	floor := (1 - rep.Tolerance) * float64(refRes.TokenSteps)
	qualifying := 0
	for k, r := range rep.Results {
		if float64(r.Result.TokenSteps) < floor || r.Result.Misses > refRes.Misses {
			continue
		}
		qualifying++
		b := rep.Results[best]
		if r.ScorerTokens < b.ScorerTokens || r.ScorerTokens == b.ScorerTokens && r.Asks < b.Asks {
			best = k
		}
	}
	rep.Recommended = rep.Results[best].Schedule
	b := rep.Results[best]
	rep.Reason = fmt.Sprintf("fewest scorer tokens (%d, %d asks) among %d of %d schedules that save at least %.0f%% of %q's token-steps (%d) with no more misses (%d); it saves %d with %d misses",
		b.ScorerTokens, b.Asks, qualifying, len(rep.Results), 100*(1-rep.Tolerance), rep.Reference, refRes.TokenSteps, refRes.Misses, b.Result.TokenSteps, b.Result.Misses)
	return rep
}

// savedAt is the decision-level token-steps an output pruned at step p saves
// (calibrate.Result): until its first use at or after p, else to the session's end.
func savedAt(o *calibrate.Output, p int) int64 {
	if p < 1 || p > o.EndStep {
		return 0
	}
	stop := o.EndStep + 1
	if u := o.UsedFrom(p); u != 0 {
		stop = u
	}
	return int64(o.Tokens) * int64(stop-p)
}
