package replay

import (
	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
)

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

// Calibration is what `pruneadvisor calibrate --json` prints and what the report
// page shows (package report): one type, built by one function, so the two cannot
// disagree. Its JSON field names are calibrate --json's.
type Calibration struct {
	// DB is the store read, its password redacted (storage.Redact).
	DB string `json:"db"`
	// Groups labels each replay group read (scorer, settings hash, cutoff,
	// schedule, sessions).
	Groups []string `json:"replays"`
	// Sessions are the sessions calibrated on (their paths), in the order of the
	// report's per-session rows.
	Sessions []string `json:"sessions"`
	// Dropped and Omitted are the sessions and the baselines left out, each with
	// the reason.
	Dropped []string `json:"dropped,omitempty"`
	Omitted []string `json:"omitted_baselines,omitempty"`
	// Report is the calibration itself (calibrate.NewReport).
	Report calibrate.Report `json:"report"`
	// Chosen is the scorer whose recommendation --write-config writes; Wrote the
	// config file written ("" when none).
	Chosen string `json:"chosen_scorer,omitempty"`
	Wrote  string `json:"wrote_config,omitempty"`
	// Digests is the stub digests' coverage by format (DigestCoverage), "all" last;
	// DigestBudget the budget it recommends (-1: none).
	Digests      []*DigestRow `json:"digests"`
	DigestBudget int          `json:"digest_budget_recommended"`
	// DigestSweep is the chosen scorer's front at each of DigestBudgets, at the
	// replay's own budget (calibrate.DigestSweep; calibrate only, not the
	// report), and DigestSweepBudget the budget it recommends (-1: none).
	DigestSweep       []calibrate.DigestPoint `json:"digest_sweep,omitempty"`
	DigestSweepBudget int                     `json:"digest_sweep_recommended,omitempty"`
	// LagCost compares the replays that differ only in their modelled ask lag
	// (replay --ask-lag, --ask-latency), the one without first: the advisor's own
	// rewrites under each (LagRow; calibrate only, not the report). Absent when no
	// selected replay has a lag.
	LagCost []LagRow `json:"lag_cost,omitempty"`
}

// LagRow is what the advisor did under one replay of a lag comparison
// (calibrate's "what the ask lag costs", Calibration.LagCost): its own rewrites (the applied stub
// steps) priced at the replay's budget. The flat figures are the decision-level
// ones of calibrate.Result at those steps.
type LagRow struct {
	Replay     string  `json:"replay"`      // the group's label
	Lag        string  `json:"lag"`         // "none", "2 steps", "3s", "measured", or both
	Pruned     int     `json:"pruned"`      // outputs stubbed
	Misses     int     `json:"misses"`      // stubbed outputs used at or after their stub step
	MissRate   float64 `json:"miss_rate"`   // Misses / Pruned
	TokenSteps int64   `json:"token_steps"` // token-steps the stubs saved
	// LostTokenSteps is the no-lag replay's TokenSteps less this one's (0 for
	// it, and when there is none).
	LostTokenSteps int64   `json:"lost_token_steps"`
	NetUSD         float64 `json:"net_usd"` // keep-all's price less the advisor's, recalls included
	Rewrites       int     `json:"rewrites"`
}
