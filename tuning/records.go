package tuning

import (
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// SessionName is the calibrate session name of a record (calibrate.Output.Session,
// calibrate.Calls.Name): its content hash, so that replays of one file under
// different settings (different session ids) line up as the same outputs in a
// report.
func SessionName(r *replay.Record) string { return r.ContentHash }

// Outputs returns the calibrate records of r's outputs, in session order: the
// facts (Tokens, Step, CandidateFrom, RuleDeadAt, EndStep), the asks of r's scorer
// (every ask, OK or not, in the order made), and Uses, the steps of the counting
// uses in r.Evidence (Weight >= UseThreshold, the Tracker's UseSteps), ascending.
// Asks outside [CandidateFrom, EndStep] and uses outside (Step, EndStep] cannot
// come from Replay; records read back from elsewhere are filtered to those bounds
// so that calibrate.Output.Validate holds.
func Outputs(r *replay.Record) []calibrate.Output {
	return OutputsAt(r, r.Settings.Config.DigestTokens)
}

// OutputsAt is Outputs with stubs whose digest budget is b tokens instead of the
// replay's (calibrate's digest budget sweep; growing to the replay's
// Config.DigestShare of a long output, as the replay's own did): each output's StubTokens is its stub
// without a digest plus the smaller of its whole digest and its budget
// (replay.StubDigest), and a use is Held when its digest need is within that
// budget.
func OutputsAt(r *replay.Record, b int) []calibrate.Output {
	ev := usesOf(r)
	out := make([]calibrate.Output, len(r.Outputs))
	for i, f := range r.Outputs {
		o := calibrate.Output{
			Session: SessionName(r), Key: f.Key, Tokens: f.Tokens, Step: f.Step,
			CandidateFrom: f.CandidateFrom, EndStep: f.EndStep, RuleDeadAt: f.RuleDeadAt,
			Offset: f.Offset, StubTokens: f.StubTokens,
		}
		stub, budget := replay.StubTokensAt(r.Settings.Config, &r.Outputs[i], b, r.Settings.Config.DigestShare)
		if b != r.Settings.Config.DigestTokens && (f.CandidateFrom != 0 || f.RuleDeadAt != 0) {
			o.StubTokens = stub
		}
		if o.CandidateFrom != 0 {
			prev := 0
			for _, a := range ev.asks[f.Key] {
				if a.Step >= o.CandidateFrom && a.Step <= o.EndStep && a.Step >= prev {
					o.Asks = append(o.Asks, a)
					prev = a.Step
				}
			}
		}
		ev.addUses(&o, budget)
		out[i] = o
	}
	return out
}

// recordUses is what OutputsAt reads from a record's asks and evidence, by output
// key.
type recordUses struct {
	asks    map[string][]calibrate.Ask
	uses    map[string][]int        // counting use steps, ascending (live copies credited)
	need    map[string]map[int]int  // use step -> digest budget that holds it
	preview map[string]map[int]bool // use step -> held by Gemini CLI's preview
}

// usesOf gathers r's asks and counting uses by output, the uses of rule-dead
// outputs credited to their live copies (creditLiveCopies).
func usesOf(r *replay.Record) recordUses {
	u := recordUses{asks: map[string][]calibrate.Ask{}, uses: map[string][]int{}, need: map[string]map[int]int{}, preview: map[string]map[int]bool{}}
	for _, a := range r.Asks {
		u.asks[a.OutputKey] = append(u.asks[a.OutputKey], calibrate.Ask{Step: a.Step, Keep: a.Score, OK: a.OK})
	}
	for _, e := range r.Evidence {
		if !e.Counts() {
			continue
		}
		u.uses[e.Key] = append(u.uses[e.Key], e.Step)
		if e.Preview {
			if u.preview[e.Key] == nil {
				u.preview[e.Key] = map[int]bool{}
			}
			u.preview[e.Key][e.Step] = true
		}
		if e.Digest > 0 {
			if u.need[e.Key] == nil {
				u.need[e.Key] = map[int]int{}
			}
			u.need[e.Key][e.Step] = e.Digest
		}
	}
	creditLiveCopies(r.Outputs, u.uses)
	return u
}

// addUses sets o's Uses within (Step, EndStep], each Held when its digest need is
// within budget and Previewed when Gemini CLI's preview holds it.
func (u recordUses) addUses(o *calibrate.Output, budget int) {
	prev := o.Step
	for _, s := range u.uses[o.Key] {
		if s > prev && s <= o.EndStep {
			o.Uses = append(o.Uses, s)
			// A use moved here from a dead copy (creditLiveCopies) has no need
			// of this output's: not held.
			n := u.need[o.Key][s]
			o.Held = append(o.Held, n > 0 && n <= budget)
			o.Previewed = append(o.Previewed, u.preview[o.Key][s])
			prev = s
		}
	}
}

// Calls returns the calibrate.Calls of r: its name (SessionName), the context size
// with nothing pruned at every step, the call times, its provider, its agent
// (replay.Record.Agent), the agent the replay's advisor took its hard limit from,
// the turns, and the compactions its transcript records (StepFacts.CompactionDropped).
func Calls(r *replay.Record) calibrate.Calls {
	ctx := make([]int, len(r.StepFacts))
	var at []time.Time
	var turn []bool
	var rec []calibrate.RecordedCompaction
	for i, s := range r.StepFacts {
		ctx[i] = s.ContextTokens
		if !s.At.IsZero() {
			if at == nil {
				at = make([]time.Time, len(r.StepFacts))
			}
			at[i] = s.At
		}
		if s.Prompt {
			if turn == nil {
				turn = make([]bool, len(r.StepFacts))
			}
			turn[i] = true
		}
		if s.CompactionDropped > 0 {
			rec = append(rec, calibrate.RecordedCompaction{Call: s.Step, Dropped: s.CompactionDropped, SummaryTokens: s.CompactionSummary})
		}
	}
	return calibrate.Calls{Name: SessionName(r), Context: ctx, At: at, Provider: r.Provider, Agent: r.Agent(), TurnStart: turn, Recorded: rec}
}

// CompactionOf returns calibrate's compaction model under cfg
// (calibrate.Options.CompactionOf): a session of a known agent compacts at the
// agent's point for the window (Config.PointOf, CompactionPoint.At) with the
// row's summary size (MeanSummaryTokens when the row has none) and what it keeps,
// counts its context as the row says (CompactionPoint.Counts: the last usage or
// an estimate of its next request; calibrate.Compaction.Decides), and its hard
// limit is the point less the margin as live (Config.HardLimitFor: the answer
// margin for an agent that counts its last usage, else Config.Margin or the
// session's largest step); when that point is not above the margin, or the agent
// is unknown, the session compacts at the window itself (an agent cannot send
// more, counted as sent) and the hard limit is calibrate's Options.HardLimit (the
// window fraction), as live.
func CompactionOf(cfg advisor.Config) func(agent string, window int) calibrate.Compaction {
	return CompactionCounted(cfg, OwnCount)
}

// OwnCount, as CompactionCounted's decides, keeps each agent's own count (its
// row's CompactionPoint.Counts).
const OwnCount = "agent"

// CompactionCounted is CompactionOf with every known agent counting its context
// as decides says (calibrate.DecidesSent, DecidesUsage, DecidesTurn or
// DecidesEstimate) instead of its own row's count; OwnCount keeps each row's. The
// margin follows the count: the answer margin for usage and turn, else the
// growth margin; an agent that counts only between turns also compacts past the
// window (calibrate.Compaction.Window).
func CompactionCounted(cfg advisor.Config, decides string) func(agent string, window int) calibrate.Compaction {
	return func(agent string, window int) calibrate.Compaction {
		p, ok := cfg.PointOf(agent)
		c := calibrate.Compaction{Point: window, SummaryTokens: advisor.MeanSummaryTokens}
		if !ok || p.Reserve >= window {
			return c
		}
		c.Decides = decides
		if decides == OwnCount {
			c.Decides = ownDecides(p)
		}
		if c.Decides == calibrate.DecidesTurn {
			c.Window = window
		}
		margin := cfg.Margin()
		if c.CountsLastUsage() {
			margin = cfg.AnswerMarginTokens()
		}
		c.Point = p.At(window)
		if c.Point > margin {
			c.Margin = margin
		}
		if p.SummaryTokens > 0 {
			c.SummaryTokens = p.SummaryTokens
		}
		c.KeepTokens, c.KeepFraction, c.KeepSteps = p.KeepTokens, p.KeepFraction, p.KeepSteps
		return c
	}
}

// ownDecides is calibrate's name for the count of p's row (CompactionPoint.Counts):
// an agent whose row says nothing estimates its next request.
func ownDecides(p advisor.CompactionPoint) string {
	switch p.Counts {
	case advisor.CountsUsage:
		return calibrate.DecidesUsage
	case advisor.CountsTurn:
		return calibrate.DecidesTurn
	}
	return calibrate.DecidesEstimate
}

// PendingPrunes returns, for each of r's outputs in order, the advisor's own
// choice: the step at which it made the output a pending prune
// (OutputFacts.PendingAt; 0 = never), a rule's when a rule made it dead then; for
// calibrate.Evaluator.Evaluate.
func PendingPrunes(r *replay.Record) []calibrate.PruneAt {
	out := make([]calibrate.PruneAt, len(r.Outputs))
	for i, f := range r.Outputs {
		out[i] = calibrate.PruneAt{Step: f.PendingAt, Rule: f.RuleDeadAt != 0 && f.RuleDeadAt == f.PendingAt}
	}
	return out
}

// creditLiveCopies moves the uses of a rule-dead output, from the step the rule
// applied on, to the output whose call made it dead: a superseded read's content is
// in context again in the later read, a duplicate's in the later identical output,
// so a use after that step is a use of the live copy, not a miss of the dead one
// (docs/DESIGN.md: the rules are never wrong). The evidence definition credits a name to
// the first output it appeared in, which is the dead one; without this, replay of
// ../shared/sessions counted 19 of the 66 rule prunes as misses. The live copy's key
// is its call id (transcript.ToolOutput.Key); uses stay in step order.
func creditLiveCopies(outs []replay.OutputFacts, uses map[string][]int) {
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
