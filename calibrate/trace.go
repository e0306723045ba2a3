package calibrate

import "fmt"

// Series is one pruner's course through one session, as the simulation that prices
// it runs it (the applied level, the one NetUSD and StepsOverBudget of
// Result.Applied count).
type Series struct {
	// Context[s-1] is the context sent at call s, in tokens, after that call's
	// rewrite (with the originals earlier recalls put back), for s = 1..EndStep.
	Context []int `json:"context"`
	// Rewrites are the calls at which the pruner changed bytes already sent,
	// ascending.
	Rewrites []int `json:"rewrites,omitempty"`
	// Recalls are the calls that went out without an output they used (a miss,
	// repaired by one recall round trip after the call), ascending.
	Recalls []int `json:"recalls,omitempty"`
	// Compactions are the calls before which the agent compacted (Compaction),
	// ascending; Context holds what those calls sent after it.
	Compactions []int `json:"compactions,omitempty"`
}

// record notes call s: the context it sent and whether it rewrote, came after a
// compaction, or met a stub miss.
func (tr *Series) record(s, ctx int, rewrote, compacted, missed bool) {
	tr.Context = append(tr.Context, ctx)
	if rewrote {
		tr.Rewrites = append(tr.Rewrites, s)
	}
	if compacted {
		tr.Compactions = append(tr.Compactions, s)
	}
	if missed {
		tr.Recalls = append(tr.Recalls, s)
	}
}

// SessionTrace is one session's context over its calls under keep-all, the
// advisor's own rewrites and the oracle, at one budget (Traces).
type SessionTrace struct {
	Session string `json:"session"` // Calls.Name
	// Budget and HardLimit are the regime's, in tokens (Options.Budget, and
	// Options.HardLimit raised to the budget when under it, as NewReport prices).
	Budget    int `json:"budget"`
	HardLimit int `json:"hard_limit"`
	// KeepAll[s-1] is the context keep-all sends at call s, in tokens:
	// Calls.Context until the session's agent compacts (Options.CompactionOf),
	// then what the compaction left plus the growth; KeepAllCompactions are the
	// calls before which it compacted (its own or a compaction the transcript
	// records, Calls.Recorded), ascending.
	KeepAll            []int `json:"keep_all"`
	KeepAllCompactions []int `json:"keep_all_compactions,omitempty"`
	// CompactionPoint is the context, in tokens, past which the session's agent
	// compacts (Compaction.Point); 0 when none is modelled.
	CompactionPoint int `json:"compaction_point,omitempty"`
	// Advisor is the advisor's own rewrites (Evaluator.Applied over the appliedAt
	// given to Traces); nil when none was given.
	Advisor *Series `json:"advisor,omitempty"`
	// Oracle is the oracle's decisions under the planner (the applied level of
	// Evaluator.Oracle).
	Oracle Series `json:"oracle"`
}

// Traces returns one SessionTrace per session, in the order of sessions, simulated
// by the same code that prices the pruners (so its contexts are those behind
// Result.Applied): keep-all, the advisor that stubbed outputs[i] at appliedAt[i]
// (nil: no advisor series; else one step per output, as AdvisorInput.AppliedAt),
// and the oracle under the planner. opts.HardLimit is raised to opts.Budget when
// under it, as NewReport does at each budget. A session none of whose outputs is
// given (it has none) keeps its whole context under every pruner. Errors: those of
// NewEvaluator and Evaluator.Applied (ErrInvalid, ErrNoSession).
func Traces(outputs []Output, sessions []Calls, opts Options, appliedAt []int) ([]SessionTrace, error) {
	opts.HardLimit = max(opts.HardLimit, opts.Budget)
	opts.PerSession = false
	e, err := NewEvaluator(outputs, sessions, opts)
	if err != nil {
		return nil, err
	}
	var advisor []PruneAt
	if appliedAt != nil {
		if _, err := e.Applied("advisor", appliedAt); err != nil {
			return nil, err
		}
		advisor = steps(appliedAt)
	}
	oracle := OraclePrunes(e.outs)
	byName := make(map[string]*sessionData, len(e.sessions))
	for _, sd := range e.sessions {
		byName[sd.name] = sd
	}
	out := make([]SessionTrace, len(sessions))
	for i, s := range sessions {
		t := SessionTrace{Session: s.Name, Budget: opts.Budget, HardLimit: opts.HardLimit}
		sd := byName[s.Name]
		if sd == nil {
			t.KeepAll = append([]int(nil), s.Context...)
			t.Oracle.Context = append([]int(nil), s.Context...)
			if advisor != nil {
				t.Advisor = &Series{Context: append([]int(nil), s.Context...)}
			}
			out[i] = t
			continue
		}
		var ka Series
		e.simulateInto(sd, nil, &ka)
		t.KeepAll, t.KeepAllCompactions, t.CompactionPoint = ka.Context, ka.Compactions, sd.compaction.Point
		if advisor != nil {
			t.Advisor = &Series{}
			e.simulateInto(sd, &appliedP{decide(e, sd, advisor)}, t.Advisor)
		}
		e.simulateInto(sd, e.regime(sd, oracle), &t.Oracle)
		if len(t.Oracle.Context) != sd.end {
			return nil, fmt.Errorf("%w: session %q: traced %d calls of %d", ErrInvalid, s.Name, len(t.Oracle.Context), sd.end)
		}
		out[i] = t
	}
	return out, nil
}
