package fitted

import (
	"math"

	"github.com/pruneadvisor/pruneadvisor/cards"
	"github.com/pruneadvisor/pruneadvisor/evidence"
)

// Feature is one input of the fitted model: a number computed from a card's signals
// (cards.Signals), which hold only what the advisor knew at the card's step.
type Feature struct {
	Name string // as it appears in a model file
	Doc  string // how it is computed
	f    func(s *cards.Signals) float64
}

// Value computes the feature from signals.
func (f Feature) Value(s *cards.Signals) float64 { return f.f(s) }

// idle is the steps since the output was last touched: since its latest use, else
// since it was made.
func idle(s *cards.Signals) int {
	if s.Uses > 0 {
		return s.LastUseAgo
	}
	return s.Age
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func lg(n int) float64 { return math.Log1p(float64(max(n, 0))) }

// liveShape is the feature ln(1 + live names of shape sh) (cards.Signals.LiveShapes).
func liveShape(sh evidence.NameShape) func(*cards.Signals) float64 {
	return func(s *cards.Signals) float64 { return lg(s.LiveShapes[sh]) }
}

// Features is the feature table, in the order of a model's weights (docs/DESIGN.md step
// 5: use history, age, tokens, tool and action, error flag, whether the file was
// edited since, whether task or now names its path or command, the lexical score).
// Every feature depends on the card's signals alone, and every signal is known at
// the card's step (TestFeaturesKnownAtStep proves it on real sessions), so a model
// never sees the future. Logarithms are natural, of 1 + the count, so 0 stays 0.
var Features = []Feature{
	{"log_age", "ln(1 + age): steps since the output", func(s *cards.Signals) float64 { return lg(s.Age) }},
	{"log_tokens", "ln(1 + tokens): the output's o200k_base size", func(s *cards.Signals) float64 { return lg(s.Tokens) }},
	{"never_used", "1 when the agent has not used the output so far (use history empty)", func(s *cards.Signals) float64 { return b2f(s.Uses == 0) }},
	{"log_uses", "ln(1 + uses): how many of the agent's messages used it so far", func(s *cards.Signals) float64 { return lg(s.Uses) }},
	{"log_idle", "ln(1 + idle): steps since its latest use, or since it was made when never used", func(s *cards.Signals) float64 { return lg(idle(s)) }},
	{"idle_le_3", "1 when it was made or last used at most 3 steps ago", func(s *cards.Signals) float64 { return b2f(idle(s) <= 3) }},
	{"idle_le_8", "1 when it was made or last used at most 8 steps ago", func(s *cards.Signals) float64 { return b2f(idle(s) <= 8) }},
	{"idle_le_20", "1 when it was made or last used at most 20 steps ago", func(s *cards.Signals) float64 { return b2f(idle(s) <= 20) }},
	{"idle_le_50", "1 when it was made or last used at most 50 steps ago", func(s *cards.Signals) float64 { return b2f(idle(s) <= 50) }},
	{"used_recently", "1 when its latest use is at most 5 steps old", func(s *cards.Signals) float64 { return b2f(s.Uses > 0 && s.LastUseAgo <= 5) }},
	{"read", "1 for a file read (transcript.ActionRead)", func(s *cards.Signals) float64 { return b2f(s.Action == "read") }},
	{"edit", "1 for an edit", func(s *cards.Signals) float64 { return b2f(s.Action == "edit") }},
	{"write", "1 for a file write", func(s *cards.Signals) float64 { return b2f(s.Action == "write") }},
	{"search", "1 for a search (grep, glob, find)", func(s *cards.Signals) float64 { return b2f(s.Action == "search") }},
	{"shell", "1 for any other shell command", func(s *cards.Signals) float64 { return b2f(s.Action == "shell") }},
	{"error", "1 when the call failed", func(s *cards.Signals) float64 { return b2f(s.IsError) }},
	{"edited_since", "1 when a file it read was edited or written after it", func(s *cards.Signals) float64 { return b2f(s.EditedSince) }},
	{"read_edited", "read x edited_since: a read whose file changed since", func(s *cards.Signals) float64 { return b2f(s.Action == "read" && s.EditedSince) }},
	{"named_by_task", "1 when the task names its file or command", func(s *cards.Signals) float64 { return b2f(s.NamedByTask) }},
	{"named_by_now", "1 when the agent's latest words name its file or command", func(s *cards.Signals) float64 { return b2f(s.NamedByNow) }},
	{"lexical", "its BM25 match against task and now as a keep-probability (advisor/lexical.CardKeep); 0 without a query", func(s *cards.Signals) float64 { return max(s.Lexical, 0) }},
	{"no_query", "1 when task and now hold no terms (lexical is then unknown)", func(s *cards.Signals) float64 { return b2f(s.Lexical < 0) }},
	{"has_reaction", "1 when the agent said or did something after it", func(s *cards.Signals) float64 { return b2f(s.HasReaction) }},
	{"shared_reaction", "1 when that reaction followed several parallel outputs", func(s *cards.Signals) float64 { return b2f(s.SharedReaction) }},
	{"log_step", "ln(1 + step): how far the session has gone", func(s *cards.Signals) float64 { return lg(s.Step) }},
	{"age_share", "age / step: how old the output is relative to the session", func(s *cards.Signals) float64 {
		return float64(s.Age) / float64(max(s.Step, 1))
	}},
	{"never_x_log_age", "never_used x log_age: the older an output nobody used, the less it will be", func(s *cards.Signals) float64 {
		return b2f(s.Uses == 0) * lg(s.Age)
	}},
	{"tokens_x_never", "never_used x log_tokens", func(s *cards.Signals) float64 { return b2f(s.Uses == 0) * lg(s.Tokens) }},
	{"log_names", "ln(1 + names): its distinctive names, whose later use would count", func(s *cards.Signals) float64 { return lg(s.Names) }},
	{"log_path_idle", "ln(1 + path idle): steps since any call touched its files (its age without a file)", func(s *cards.Signals) float64 { return lg(s.PathIdle) }},
	{"path_idle_le_5", "1 when a call touched its files at most 5 steps ago", func(s *cards.Signals) float64 { return b2f(s.PathIdle <= 5) }},
	{"log_path_reads", "ln(1 + reads of its files so far)", func(s *cards.Signals) float64 { return lg(s.PathReads) }},
	{"rerun", "1 when the same call had been made before (a command run again)", func(s *cards.Signals) float64 { return b2f(s.Runs > 1) }},
	{"log_runs", "ln(1 + runs of the same call so far)", func(s *cards.Signals) float64 { return lg(s.Runs) }},
	{"recent_uses", "its uses in the last 10 steps", func(s *cards.Signals) float64 { return float64(s.RecentUses) }},
	{"session_use_rate", "the session's uses so far per output so far", func(s *cards.Signals) float64 { return s.SessionUseRate }},
	{"log_outputs_since", "ln(1 + outputs after it): its recency rank among outputs", func(s *cards.Signals) float64 { return lg(s.OutputsSince) }},
	{"log_tokens_after", "ln(1 + tokens of the messages after its own): how deep in the context it sits", func(s *cards.Signals) float64 { return lg(s.TokensAfter) }},
	{"never_x_log_outputs_since", "never_used x log_outputs_since", func(s *cards.Signals) float64 {
		return b2f(s.Uses == 0) * lg(s.OutputsSince)
	}},
	{"log_live", "ln(1 + live names): the specific names a later use would still credit to it (evidence.Tracker.Live), with those of the outputs it made dead", func(s *cards.Signals) float64 { return lg(s.Live) }},
	{"no_live", "1 when it has no live name: only a recall can use it", func(s *cards.Signals) float64 { return b2f(s.Live == 0) }},
	{"log_live_undigested", "ln(1 + live names its stub's digest would not hold)", func(s *cards.Signals) float64 { return lg(s.LiveUndigested) }},
	{"no_live_undigested", "1 when its digest holds every live name: a use by name would be no miss", func(s *cards.Signals) float64 { return b2f(s.LiveUndigested == 0) }},
	{"log_live_plain", "ln(1 + live names that are plain words, rare in the word statistics (evidence.ShapePlain))", liveShape(evidence.ShapePlain)},
	{"log_live_phrase", "ln(1 + live names that are quoted phrases (evidence.ShapePhrase))", liveShape(evidence.ShapePhrase)},
	{"log_live_path", "ln(1 + live names that are paths (evidence.ShapePath))", liveShape(evidence.ShapePath)},
	{"log_live_dotted", "ln(1 + live names with a dot: files, modules, versions (evidence.ShapeDotted))", liveShape(evidence.ShapeDotted)},
	{"log_live_digits", "ln(1 + live names with a digit: ids, numbers (evidence.ShapeDigits))", liveShape(evidence.ShapeDigits)},
	{"log_live_code", "ln(1 + live names with '_' or a capital: identifiers (evidence.ShapeCode))", liveShape(evidence.ShapeCode)},
	{"log_live_other", "ln(1 + live names of any other shape: hyphens, colons (evidence.ShapeOther))", liveShape(evidence.ShapeOther)},
}

// FeatureNames returns the names of Features in order.
func FeatureNames() []string {
	out := make([]string, len(Features))
	for i, f := range Features {
		out[i] = f.Name
	}
	return out
}

// Vector computes every feature of s, in Features order, into dst (grown as
// needed) and returns it.
func Vector(dst []float64, s *cards.Signals) []float64 {
	dst = dst[:0]
	for _, f := range Features {
		dst = append(dst, f.f(s))
	}
	return dst
}
