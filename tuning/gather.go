package tuning

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/fitted"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/calibrate"
	"github.com/pruneadvisor/pruneadvisor/planner"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// ErrNoCommonSession means no session of the base group was replayed under every
// selected setting (Gather).
var ErrNoCommonSession = errors.New("no session left to calibrate on")

// ReportInput is what calibrate.NewReport needs, gathered from a store by Gather,
// with what the calibrate command prints beside the report.
type ReportInput struct {
	Base    []calibrate.Output      // the base group's outputs (asks: its scorer's)
	Calls   []calibrate.Calls       // one per session, in the base group's order
	Scorers []calibrate.ScorerInput // every scored group and in-process baseline
	Names   []string                // session display names (paths), by Calls order
	Dropped []string                // sessions left out, with the reason
	// Primary is the first stored scorer other than none and keep, else "fitted":
	// the scorer whose cutoff calibrate --write-config writes by default.
	Primary   string
	InProcess []string // the baselines scored in this process
	Omitted   []string // baselines left out, with the reason
	Applied   []int    // the base replay's own stub steps, per base output (replay.Record.AppliedSteps)
	Lengths   []int    // steps of each session
	Factor    float64  // planner.FitFactor of Lengths (0: none)
	Digest    *DigestCoverage
	// DigestOuts[i] are the base outputs with stubs of digest budget
	// DigestBudgets[i] (OutputsAt), for the digest sweep.
	DigestOuts [][]calibrate.Output
	Stubs      []replay.Stub // the advisor's stubs, per session in order (GatherOptions.WithStubs)
}

// GatherOptions are Gather's settings; the zero value is valid.
type GatherOptions struct {
	// Workers is the number of sessions an in-process baseline scores at once;
	// < 1 means runtime.NumCPU() (InOrder).
	Workers int
	// WithStubs also reads every stubbed output's pending decision
	// (Store.PendingDecisions), for ReportInput.Stubs (the report's table).
	WithStubs bool
	// Sizer estimates the scorer tokens of the in-process baselines' asks
	// (replay.Replayer.Sizer); nil leaves them as the scorers report them.
	Sizer replay.RequestSizer
	// OnOmit, when set, is told of each baseline left out (its name and why) as
	// it is, before Gather goes on: the calibrate command warns on stderr.
	OnOmit func(baseline, why string)
}

// baseline is a scorer set beside the stored ones, scored in this process, with
// its records by content hash and its outputs over the base group's sessions.
type baseline struct {
	sc   advisor.Scorer
	recs map[string]*replay.Record
	outs []calibrate.Output
}

// Gather loads the groups' records over the sessions they all hold (by content
// hash, in the base group's order: groups[0]), and scores the lexical and the
// fitted scorer in process (the embedded model), reading the session files again,
// when no group holds their replay: a baseline some session cannot be read or
// replayed for is left out (Omitted, OnOmit), so that every baseline set beside
// the rest covers the same sessions. Errors: the store's, the fitted default
// model's, a replay's context error, and ErrNoCommonSession (listing the
// sessions dropped) when no session is held by every group.
func Gather(ctx context.Context, store Store, groups []*Group, opt GatherOptions) (*ReportInput, error) {
	in := &ReportInput{Digest: NewDigestCoverage()}
	keep := in.common(groups)
	scs, err := in.baselines(groups)
	if err != nil {
		return nil, err
	}
	bl, err := in.scoreBaselines(ctx, groups[0], keep, scs, opt)
	if err != nil {
		return nil, err
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("calibrate: %w (%s)", ErrNoCommonSession, strings.Join(in.Dropped, "; "))
	}
	want := map[string]bool{}
	for _, s := range keep {
		want[s.ContentHash] = true
	}
	for gi, g := range groups {
		outs, err := in.loadGroup(ctx, store, g, want, gi == 0, bl, opt.WithStubs)
		if err != nil {
			return nil, err
		}
		if gi == 0 {
			in.Base = outs
		}
		if g.Scored() {
			in.Scorers = append(in.Scorers, calibrate.ScorerInput{Name: ScorerLabel(g, groups), Outputs: outs, ReplayCutoff: g.Cutoff()})
		}
		if gi == 0 {
			for _, b := range bl {
				in.Scorers = append(in.Scorers, calibrate.ScorerInput{Name: b.sc.Name(), Outputs: b.outs, ReplayCutoff: baselineConfig(g, b.sc).CutoffFor(b.sc.Name())})
			}
		}
	}
	if factor, ok := planner.FitFactor(in.Lengths); ok {
		in.Factor = factor
	}
	return in, nil
}

// common returns the base group's sessions that every group holds (by content
// hash), noting the others in Dropped.
func (in *ReportInput) common(groups []*Group) []Replayed {
	count := map[string]int{}
	for _, g := range groups {
		for _, s := range g.Sessions {
			count[s.ContentHash]++
		}
	}
	var keep []Replayed
	for _, s := range groups[0].Sessions {
		if count[s.ContentHash] == len(groups) {
			keep = append(keep, s)
		} else {
			in.Dropped = append(in.Dropped, s.Path+": not replayed under every selected setting")
		}
	}
	return keep
}

// baselines sets Primary and returns the scorers to score in this process: the
// lexical and the fitted scorer (the embedded model) when no group holds their
// replay, so every report sets them beside the rest.
func (in *ReportInput) baselines(groups []*Group) ([]advisor.Scorer, error) {
	stored := map[string]bool{}
	for _, g := range groups {
		stored[g.Scorer] = true
		if in.Primary == "" && g.Scored() {
			in.Primary = g.Scorer
		}
	}
	var scs []advisor.Scorer
	if !stored["lexical"] {
		scs = append(scs, lexical.New())
	}
	if !stored["fitted"] {
		fs, err := fitted.NewDefault()
		if err != nil {
			return nil, err
		}
		scs = append(scs, fs)
	}
	if in.Primary == "" {
		in.Primary = "fitted"
	}
	return scs, nil
}

// scoreBaselines scores each of scs over the kept sessions (scoreInProcess) and
// returns those that scored every one; the others are noted in Omitted and told
// to OnOmit.
func (in *ReportInput) scoreBaselines(ctx context.Context, base *Group, keep []Replayed, scs []advisor.Scorer, opt GatherOptions) ([]*baseline, error) {
	var bl []*baseline
	for _, sc := range scs {
		recs, failed, err := scoreInProcess(ctx, base, keep, sc, opt)
		if err != nil {
			return nil, err
		}
		if failed != "" {
			in.Omitted = append(in.Omitted, fmt.Sprintf("%s baseline: %s", sc.Name(), failed))
			if opt.OnOmit != nil {
				opt.OnOmit(sc.Name(), failed)
			}
			continue
		}
		in.InProcess = append(in.InProcess, sc.Name())
		bl = append(bl, &baseline{sc: sc, recs: recs})
	}
	return bl, nil
}

// baselineConfig is the advisor config an in-process baseline replays under: the
// base group's, and when the base replay asked only (replay --asks-only: its
// scorer's cutoff positive and under calibrate.MinReplayCutoffNote) the baseline's
// scorer asks only too, so that every front beside it is whole.
func baselineConfig(base *Group, sc advisor.Scorer) advisor.Config {
	cfg := base.Settings.Config
	if c := base.Cutoff(); c > 0 && c < calibrate.MinReplayCutoffNote {
		return cfg.WithScorerCutoff(sc.Name(), c)
	}
	return cfg
}

// loadGroup returns the outputs of g's replays of the wanted sessions, in g's
// order; for the base group it also gathers each session's calls, names, stub
// steps, digest figures (and stubs) and the baselines' outputs (addBase).
func (in *ReportInput) loadGroup(ctx context.Context, store Store, g *Group, want map[string]bool, base bool, bl []*baseline, withStubs bool) ([]calibrate.Output, error) {
	var outs []calibrate.Output
	for _, s := range g.Sessions {
		if !want[s.ContentHash] {
			continue
		}
		rec, err := store.LoadReplay(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		o := Outputs(rec)
		outs = append(outs, o...)
		if base {
			if err := in.addBase(ctx, store, s, rec, o, bl, withStubs); err != nil {
				return nil, err
			}
		}
	}
	return outs, nil
}

// addBase adds one session of the base group: its outputs at every digest
// budget, calls, name, stub steps, length and digest coverage, its stubs when
// asked, and each baseline's asks over its outputs o (withAsks).
func (in *ReportInput) addBase(ctx context.Context, store Store, s Replayed, rec *replay.Record, o []calibrate.Output, bl []*baseline, withStubs bool) error {
	if in.DigestOuts == nil {
		in.DigestOuts = make([][]calibrate.Output, len(DigestBudgets))
	}
	for i, b := range DigestBudgets {
		in.DigestOuts[i] = append(in.DigestOuts[i], OutputsAt(rec, b)...)
	}
	in.Calls = append(in.Calls, Calls(rec))
	in.Names = append(in.Names, s.Path)
	in.Applied = append(in.Applied, rec.AppliedSteps()...)
	in.Lengths = append(in.Lengths, rec.Steps)
	in.Digest.Add(rec)
	if withStubs {
		var err error
		if rec.Decisions, err = store.PendingDecisions(ctx, s.ID); err != nil {
			return err
		}
		in.Stubs = append(in.Stubs, rec.Stubs()...)
	}
	for _, b := range bl {
		if lr := b.recs[s.ContentHash]; lr != nil {
			l, err := withAsks(o, lr)
			if err != nil {
				return err
			}
			b.outs = append(b.outs, l...)
		}
	}
	return nil
}

// scoreInProcess replays the kept sessions with sc under the base group's
// settings (opt.Workers at once) and returns the records by content hash; failed
// names the first session that could not be read again or replayed (and how many
// did not), "" when all were. The error is ctx's when it was cancelled.
func scoreInProcess(ctx context.Context, base *Group, keep []Replayed, sc advisor.Scorer, opt GatherOptions) (map[string]*replay.Record, string, error) {
	st := base.Settings
	rp := &replay.Replayer{Config: baselineConfig(base, sc), Scorer: sc, Lenient: st.Lenient, Sizer: opt.Sizer, AskLag: st.AskLag, AskLatency: st.AskLatency}
	recs := make([]*replay.Record, len(keep))
	errs := make([]error, len(keep))
	InOrder(len(keep), opt.Workers, func(i int) (*replay.Record, error) {
		src, err := LoadSource(keep[i], st.Lenient)
		if err != nil {
			return nil, err
		}
		return rp.Replay(ctx, src)
	}, func(i int, rec *replay.Record, err error) { recs[i], errs[i] = rec, err })
	out := map[string]*replay.Record{}
	failed, first := 0, ""
	for i, err := range errs {
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, "", cerr
			}
			if failed++; first == "" {
				first = fmt.Sprintf("%s: %v", keep[i].Path, err)
			}
			continue
		}
		out[keep[i].ContentHash] = recs[i]
	}
	if failed > 0 {
		return nil, fmt.Sprintf("%d of %d sessions not scored (%s)", failed, len(keep), first), nil
	}
	return out, "", nil
}

// withAsks returns outs (one session's base records) with the asks of rec, a
// replay of the same session under another scorer. Errors: rec's outputs are not
// outs's (their number or a key differs).
func withAsks(outs []calibrate.Output, rec *replay.Record) ([]calibrate.Output, error) {
	other := Outputs(rec)
	if len(other) != len(outs) {
		return nil, fmt.Errorf("calibrate: %s: %d outputs in process, %d stored", rec.Path, len(other), len(outs))
	}
	res := make([]calibrate.Output, len(outs))
	for i := range outs {
		if other[i].Key != outs[i].Key {
			return nil, fmt.Errorf("calibrate: %s: output %d is %q in process, %q stored", rec.Path, i, other[i].Key, outs[i].Key)
		}
		res[i] = outs[i]
		res[i].Asks = other[i].Asks
	}
	return res, nil
}
