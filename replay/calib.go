package replay

import (
	"github.com/pruneadvisor/pruneadvisor/calibrate"
)

// CalibrateSessionName is the calibrate session name of a record: its content hash,
// so that replays of one file under different settings (different session ids)
// line up as the same outputs in a report.
func (r *Record) CalibrateSessionName() string { return r.ContentHash }

// CalibrateOutputs returns the calibrate records of r's outputs, in session order:
// the facts (Tokens, Step, CandidateFrom, RuleDeadAt, EndStep), the asks of r's
// scorer (every ask, OK or not, in the order made), and Uses, the steps of the
// counting uses in r.Evidence (Weight >= UseThreshold, the Tracker's UseSteps),
// ascending. Asks outside [CandidateFrom, EndStep] and uses outside (Step,
// EndStep] cannot come from Replay; records read back from elsewhere are filtered
// to those bounds so that calibrate.Output.Validate holds.
func (r *Record) CalibrateOutputs() []calibrate.Output {
	name := r.CalibrateSessionName()
	asks := map[string][]calibrate.Ask{}
	for _, a := range r.Asks {
		asks[a.OutputKey] = append(asks[a.OutputKey], calibrate.Ask{Step: a.Step, Keep: a.Score, OK: a.OK})
	}
	uses := map[string][]int{}
	for _, u := range r.Evidence {
		if u.Counts() {
			uses[u.Key] = append(uses[u.Key], u.Step)
		}
	}
	out := make([]calibrate.Output, len(r.Outputs))
	for i, f := range r.Outputs {
		o := calibrate.Output{
			Session: name, Key: f.Key, Tokens: f.Tokens, Step: f.Step,
			CandidateFrom: f.CandidateFrom, EndStep: f.EndStep, RuleDeadAt: f.RuleDeadAt,
		}
		if o.CandidateFrom != 0 {
			prev := 0
			for _, a := range asks[f.Key] {
				if a.Step >= o.CandidateFrom && a.Step <= o.EndStep && a.Step >= prev {
					o.Asks = append(o.Asks, a)
					prev = a.Step
				}
			}
		}
		prev := o.Step
		for _, u := range uses[f.Key] {
			if u > prev && u <= o.EndStep {
				o.Uses = append(o.Uses, u)
				prev = u
			}
		}
		out[i] = o
	}
	return out
}

// CalibrateSession returns the calibrate session of r: its name and the context
// size, nothing pruned, at every step.
func (r *Record) CalibrateSession() calibrate.Session {
	ctx := make([]int, len(r.StepFacts))
	for i, s := range r.StepFacts {
		ctx[i] = s.ContextTokens
	}
	return calibrate.Session{Name: r.CalibrateSessionName(), Context: ctx}
}

// PendingSteps returns, for each of r's outputs in order, the step at which the
// advisor made it a pending prune (OutputFacts.PendingAt; 0 = never): the
// decisions of the replay itself, for calibrate.Evaluator.Evaluate.
func (r *Record) PendingSteps() []int {
	out := make([]int, len(r.Outputs))
	for i, f := range r.Outputs {
		out[i] = f.PendingAt
	}
	return out
}
