package replay

import (
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
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
	return r.CalibrateOutputsAt(r.Settings.Config.DigestTokens)
}

// CalibrateOutputsAt is CalibrateOutputs with stubs whose digest budget is b
// tokens instead of the replay's (calibrate's digest budget sweep): each output's
// StubTokens is its stub without a digest plus the smaller of its whole digest and
// its budget (stubDigest), and a use is Held when its digest need is within that
// budget.
func (r *Record) CalibrateOutputsAt(b int) []calibrate.Output {
	name := r.CalibrateSessionName()
	asks := map[string][]calibrate.Ask{}
	for _, a := range r.Asks {
		asks[a.OutputKey] = append(asks[a.OutputKey], calibrate.Ask{Step: a.Step, Keep: a.Score, OK: a.OK})
	}
	uses := map[string][]int{}
	need := map[string]map[int]int{}     // output -> use step -> digest budget that holds it
	preview := map[string]map[int]bool{} // output -> use step -> held by Gemini CLI's preview
	for _, u := range r.Evidence {
		if u.Counts() {
			uses[u.Key] = append(uses[u.Key], u.Step)
			if u.Preview {
				if preview[u.Key] == nil {
					preview[u.Key] = map[int]bool{}
				}
				preview[u.Key][u.Step] = true
			}
			if u.Digest > 0 {
				if need[u.Key] == nil {
					need[u.Key] = map[int]int{}
				}
				need[u.Key][u.Step] = u.Digest
			}
		}
	}
	creditLiveCopies(r.Outputs, uses)
	out := make([]calibrate.Output, len(r.Outputs))
	for i, f := range r.Outputs {
		o := calibrate.Output{
			Session: name, Key: f.Key, Tokens: f.Tokens, Step: f.Step,
			CandidateFrom: f.CandidateFrom, EndStep: f.EndStep, RuleDeadAt: f.RuleDeadAt,
			Offset: f.Offset, StubTokens: f.StubTokens,
		}
		base, budget := stubDigest(r.Settings.Config, &r.Outputs[i], b)
		if b != r.Settings.Config.DigestTokens && (f.CandidateFrom != 0 || f.RuleDeadAt != 0) {
			o.StubTokens = base + min(budget, f.DigestTokens)
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
				// A use moved here from a dead copy (creditLiveCopies) has no need
				// of this output's: not held.
				n := need[f.Key][u]
				o.Held = append(o.Held, n > 0 && n <= budget)
				o.Previewed = append(o.Previewed, preview[f.Key][u])
				prev = u
			}
		}
		out[i] = o
	}
	return out
}

// CalibrateSession returns the calibrate session of r: its name, the context size
// with nothing pruned at every step, the call times, its provider, and its agent
// (the config's Agent when set, else the one its format names: advisor.AgentOf),
// the agent the replay's advisor took its hard limit from.
func (r *Record) CalibrateSession() calibrate.Calls {
	ctx := make([]int, len(r.StepFacts))
	var at []time.Time
	for i, s := range r.StepFacts {
		ctx[i] = s.ContextTokens
		if !s.At.IsZero() {
			if at == nil {
				at = make([]time.Time, len(r.StepFacts))
			}
			at[i] = s.At
		}
	}
	return calibrate.Calls{Name: r.CalibrateSessionName(), Context: ctx, At: at, Provider: r.Provider, Agent: r.agent()}
}

// CompactionOf returns calibrate's compaction model under cfg
// (calibrate.Options.CompactionOf): a session of a known agent compacts at the
// agent's point for the window (Config.PointOf, CompactionPoint.At) with the
// row's summary size (MeanSummaryTokens when the row has none) and what it keeps,
// and its hard limit is the point less the margin (Config.Margin, or the session's
// largest step), as live; when that point is not above the margin, or the agent
// is unknown, the session compacts at the window itself (an agent cannot send
// more) and the hard limit is calibrate's Options.HardLimit (the window fraction),
// as live.
func CompactionOf(cfg advisor.Config) func(agent string, window int) calibrate.Compaction {
	return func(agent string, window int) calibrate.Compaction {
		p, ok := cfg.PointOf(agent)
		c := calibrate.Compaction{Point: window, SummaryTokens: advisor.MeanSummaryTokens}
		if !ok || p.Reserve >= window {
			return c
		}
		c.Point = p.At(window)
		if c.Point > cfg.Margin() {
			c.Margin = cfg.Margin()
		}
		if p.SummaryTokens > 0 {
			c.SummaryTokens = p.SummaryTokens
		}
		c.KeepTokens, c.KeepFraction, c.KeepSteps = p.KeepTokens, p.KeepFraction, p.KeepSteps
		return c
	}
}

// PendingDecisions returns, for each of r's outputs in order, the advisor's own
// decision: the step at which it made the output a pending prune
// (OutputFacts.PendingAt; 0 = never), a rule decision when a rule made it dead then;
// for calibrate.Evaluator.Evaluate.
func (r *Record) PendingDecisions() []calibrate.PruneAt {
	out := make([]calibrate.PruneAt, len(r.Outputs))
	for i, f := range r.Outputs {
		out[i] = calibrate.PruneAt{Step: f.PendingAt, Rule: f.RuleDeadAt != 0 && f.RuleDeadAt == f.PendingAt}
	}
	return out
}

// AppliedSteps returns, for each of r's outputs in order, the step at which the
// advisor's stub was applied (OutputFacts.PrunedAt; 0 = never): what the advisor
// really did, for calibrate.Evaluator.Applied.
func (r *Record) AppliedSteps() []int {
	out := make([]int, len(r.Outputs))
	for i, f := range r.Outputs {
		out[i] = f.PrunedAt
	}
	return out
}

// creditLiveCopies moves the uses of a rule-dead output, from the step the rule
// applied on, to the output whose call made it dead: a superseded read's content is
// in context again in the later read, a duplicate's in the later identical output,
// so a use after that step is a use of the live copy, not a miss of the dead one
// (DESIGN.md: the rules are never wrong). The evidence definition credits a name to
// the first output it appeared in, which is the dead one; without this, replay of
// ../shared/sessions counted 19 of the 66 rule prunes as misses. The live copy's key
// is its call id (transcript.ToolOutput.Key); uses stay in step order.
func creditLiveCopies(outs []OutputFacts, uses map[string][]int) {
	keys := make(map[string]bool, len(outs))
	for _, f := range outs {
		keys[f.Key] = true
	}
	for _, f := range outs {
		if f.RuleBy == "" || f.RuleDeadAt == 0 || !keys[f.RuleBy] {
			continue
		}
		var keep, moved []int
		for _, u := range uses[f.Key] {
			if u >= f.RuleDeadAt {
				moved = append(moved, u)
			} else {
				keep = append(keep, u)
			}
		}
		if len(moved) == 0 {
			continue
		}
		uses[f.Key] = keep
		uses[f.RuleBy] = mergeSteps(uses[f.RuleBy], moved)
	}
}

// mergeSteps merges two ascending step lists into one ascending list without
// repeats.
func mergeSteps(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var v int
		if j >= len(b) || i < len(a) && a[i] <= b[j] {
			v, i = a[i], i+1
		} else {
			v, j = b[j], j+1
		}
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// stubDigest returns the tokens of the stub the advisor with cfg gives output f
// without its digest (advisor.StubTokens; 0 for an output never stubbed: neither
// a candidate nor rule-dead) and the digest budget that stub has when the
// configured budget is b (advisor.DigestBudget, StubMaxShare applied): 0 for an
// output that is never a candidate or that the rules kill, whose stub has no
// digest (its content is in context again). The one rule replay, calibrate and
// the digest coverage share.
func stubDigest(cfg advisor.Config, f *OutputFacts, b int) (base, budget int) {
	if f.CandidateFrom == 0 && f.RuleDeadAt == 0 {
		return 0, 0
	}
	base = advisor.StubTokens(cfg, f.Tool, f.Summary, f.Tokens)
	if f.CandidateFrom == 0 || f.RuleDeadAt > 0 {
		return base, 0
	}
	cfg.DigestTokens = b
	return base, advisor.DigestBudget(cfg, base, f.Tokens)
}

// agent is the agent of r's session: the config's, else its format's.
func (r *Record) agent() string {
	if a := r.Settings.Config.Agent; a != "" {
		return a
	}
	return advisor.AgentOf(r.Format)
}
