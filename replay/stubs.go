package replay

import "github.com/pruneadvisor/pruneadvisor/advisor"

// Stub is one output the advisor stubbed in a replay: what the report page's table
// of stubs lists.
type Stub struct {
	Session string `json:"session"` // the session file (Record.Path)
	Key     string `json:"key"`     // transcript.ToolOutput.Key
	Tool    string `json:"tool"`
	Summary string `json:"summary"` // the call's argument summary
	Step    int    `json:"step"`    // the step that produced the output
	// PrunedAt is the step whose rewrite applied the stub.
	PrunedAt int `json:"pruned_at"`
	// Tokens is the original's size, StubTokens the stub's, in o200k_base tokens.
	Tokens     int `json:"tokens"`
	StubTokens int `json:"stub_tokens"`
	// Reason is the advisor's reason for the prune (its pending decision's: the
	// score under the cutoff, or the rule and the superseding call).
	Reason string `json:"reason"`
	// Score is the keep-probability that decided it, -1 when none did (a rule).
	Score float64 `json:"score"`
	// RecallID is the id the stub names (advisor.RecallID of the replay's session
	// id: replays run without a recall secret). A replay stores no originals, so
	// it restores nothing from the replay store: the session file holds the output.
	RecallID string `json:"recall_id"`
}

// Stubs returns the outputs of r the advisor stubbed (OutputFacts.PrunedAt > 0), in
// session order, with the reason and score of the latest pending decision at or
// before the rewrite in r.Decisions (the replay records them; storage.DB's
// LoadReplay does not read them back: fill r.Decisions from storage.DB.Decisions
// first, else Reason is "" and Score -1).
func (r *Record) Stubs() []Stub {
	type why struct {
		reason string
		score  float64
	}
	reasons := map[string]why{}
	byKey := map[string]int{}
	for i, f := range r.Outputs {
		byKey[f.Key] = i
	}
	for _, d := range r.Decisions {
		i, ok := byKey[d.OutputKey]
		if !ok || d.Decision != advisor.DecisionPending || d.Step > r.Outputs[i].PrunedAt {
			continue
		}
		reasons[d.OutputKey] = why{d.Reason, d.Score}
	}
	var out []Stub
	for _, f := range r.Outputs {
		if f.PrunedAt == 0 {
			continue
		}
		w, ok := reasons[f.Key]
		if !ok {
			w.score = -1
		}
		out = append(out, Stub{Session: r.Path, Key: f.Key, Tool: f.Tool, Summary: f.Summary, Step: f.Step, PrunedAt: f.PrunedAt,
			Tokens: f.Tokens, StubTokens: f.StubTokens, Reason: w.reason, Score: w.score, RecallID: advisor.RecallID(r.ID, f.Key)})
	}
	return out
}
