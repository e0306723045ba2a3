package replay

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pruneadvisor/pruneadvisor/calibrate"
)

// ErrSchedules means the schedule runs given to CompareSchedules do not line up
// (no runs, or different sessions or outputs).
var ErrSchedules = errors.New("schedule runs do not line up")

// ScheduleRun is the replays of a set of sessions under one back-off schedule.
// Every run compared must hold the same sessions in the same order.
type ScheduleRun struct {
	Schedule string    // as given, e.g. "3,6,12,24"
	Records  []*Record // one per session
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
	// ScorerTokens sums the asks' scorer tokens (Record.Asks Tokens, see
	// Replayer.Replay).
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
	// Result evaluates the replay's own prune decisions (OutputFacts.PendingAt)
	// with calibrate's accounting: misses, token-steps, rewrites, net dollars.
	Result calibrate.Result `json:"result"`
	// AppliedTokenSteps is what the advisor's stubs actually saved in the replay
	// (Record.SavedTokenSteps, summed).
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
// always qualifies. Errors: ErrSchedules when the runs
// do not hold the same sessions and outputs in the same order; calibrate's
// ErrInvalid for bad options or records.
func CompareSchedules(runs []ScheduleRun, cutoff float64, opts calibrate.Options, tolerance float64) (BackoffReport, error) {
	rep := BackoffReport{Cutoff: cutoff, Tolerance: tolerance}
	if len(runs) == 0 {
		return rep, fmt.Errorf("%w: no runs", ErrSchedules)
	}
	if math.IsNaN(tolerance) || tolerance < 0 || tolerance > 1 {
		return rep, fmt.Errorf("%w: tolerance %v outside [0,1]", calibrate.ErrInvalid, tolerance)
	}
	rep.Reference = runs[0].Schedule
	rep.Sessions = len(runs[0].Records)
	type evaluated struct {
		outs  []calibrate.Output
		prune []calibrate.Decision
	}
	evs := make([]evaluated, len(runs))
	for k, run := range runs {
		if len(run.Records) != rep.Sessions {
			return rep, fmt.Errorf("%w: schedule %q has %d sessions, %q has %d", ErrSchedules, run.Schedule, len(run.Records), rep.Reference, rep.Sessions)
		}
		var outs []calibrate.Output
		var sessions []calibrate.Session
		var prune []calibrate.Decision
		res := ScheduleResult{Schedule: run.Schedule}
		for i, rec := range run.Records {
			ref := runs[0].Records[i]
			if rec.ContentHash != ref.ContentHash || len(rec.Outputs) != len(ref.Outputs) {
				return rep, fmt.Errorf("%w: session %d of schedule %q is %s (%d outputs), the reference's is %s (%d outputs)",
					ErrSchedules, i, run.Schedule, rec.Path, len(rec.Outputs), ref.Path, len(ref.Outputs))
			}
			outs = append(outs, rec.CalibrateOutputs()...)
			sessions = append(sessions, rec.CalibrateSession())
			prune = append(prune, rec.PendingDecisions()...)
			res.Asks += len(rec.Asks)
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
			res.AppliedTokenSteps += rec.SavedTokenSteps()
		}
		res.Outputs = len(outs)
		if res.Candidates > 0 {
			res.AsksPerCandidate = float64(res.Asks) / float64(res.Candidates)
		}
		ev, err := calibrate.NewEvaluator(outs, sessions, opts)
		if err != nil {
			return rep, fmt.Errorf("schedule %q: %w", run.Schedule, err)
		}
		if res.Result, err = ev.Evaluate("schedule "+run.Schedule, cutoff, prune); err != nil {
			return rep, fmt.Errorf("schedule %q: %w", run.Schedule, err)
		}
		evs[k] = evaluated{outs: outs, prune: prune}
		rep.Results = append(rep.Results, res)
	}
	ref := evs[0]
	for k := range runs {
		res := &rep.Results[k]
		for i := range ref.outs {
			if evs[k].outs[i].Key != ref.outs[i].Key {
				return rep, fmt.Errorf("%w: output %d of schedule %q is %q, the reference's is %q", ErrSchedules, i, runs[k].Schedule, evs[k].outs[i].Key, ref.outs[i].Key)
			}
			pr, ps := ref.prune[i].Step, evs[k].prune[i].Step
			switch {
			case (pr == 0) != (ps == 0):
				res.Changed++
			case pr > 0 && ps > pr:
				res.Later++
				o := &ref.outs[i]
				res.LaterTokenSteps += savedAt(o, pr) - savedAt(o, ps)
			case pr > 0 && ps < pr:
				res.Earlier++
			}
		}
	}
	best := 0
	refRes := rep.Results[0].Result
	floor := (1 - tolerance) * float64(refRes.TokenSteps)
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
	c := rep.Results[best]
	rep.Reason = fmt.Sprintf("fewest scorer tokens (%d, %d asks) among %d of %d schedules that save at least %.0f%% of %q's token-steps (%d) with no more misses (%d); it saves %d with %d misses",
		c.ScorerTokens, c.Asks, qualifying, len(rep.Results), 100*(1-tolerance), rep.Reference, refRes.TokenSteps, refRes.Misses, c.Result.TokenSteps, c.Result.Misses)
	return rep, nil
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
