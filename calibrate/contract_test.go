package calibrate

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/prices"
)

// Options.Validate names the first bad option, and accepts each one at the edge of
// its range: the defaults, a hard limit at the budget, fractions of 1, a pay factor
// of 1 (break-even), an estimator minimum of 1, no recall overhead, 1 and 1,000
// bins, and any window when no compaction is modelled.
func TestOptionsValidateNamesTheOption(t *testing.T) {
	with := func(f func(*Options)) Options { o := DefaultOptions(); f(&o); return o }
	compacts := func(string, int) Compaction { return Compaction{} }
	for _, tt := range []struct {
		name string
		opts Options
		want string // "" for valid
	}{
		{"defaults", DefaultOptions(), ""},
		{"at every edge", with(func(o *Options) {
			o.HardLimit, o.LowWaterFraction, o.RewriteFraction, o.PayFactor = o.Budget, 1, 1, 1
			o.Estimator.Min, o.RecallOverheadTokens, o.Bins, o.Window = 1, 0, 1000, 0
		}), ""},
		{"no rewrite floor, one bin", with(func(o *Options) { o.RewriteFraction, o.Bins = 0, 1 }), ""},
		{"no price table: the defaults", with(func(o *Options) { o.Prices = nil }), ""},
		{"no budget", with(func(o *Options) { o.Budget = 0 }), "option Budget = 0"},
		{"hard limit under the budget", with(func(o *Options) { o.HardLimit = o.Budget - 1 }), "option HardLimit = 99999"},
		{"low water 0", with(func(o *Options) { o.LowWaterFraction = 0 }), "option LowWaterFraction = 0"},
		{"low water over 1", with(func(o *Options) { o.LowWaterFraction = 1.01 }), "option LowWaterFraction = 1.01"},
		{"low water negative", with(func(o *Options) { o.LowWaterFraction = -0.5 }), "option LowWaterFraction = -0.5"},
		{"low water NaN", with(func(o *Options) { o.LowWaterFraction = math.NaN() }), "option LowWaterFraction = NaN"},
		{"rewrite fraction negative", with(func(o *Options) { o.RewriteFraction = -0.01 }), "option RewriteFraction = -0.01"},
		{"rewrite fraction over 1", with(func(o *Options) { o.RewriteFraction = 2 }), "option RewriteFraction = 2"},
		{"size cap negative", with(func(o *Options) { o.SizeCapTokens = -1 }), "option SizeCapTokens = -1"},
		{"size cap 0: no cap", with(func(o *Options) { o.SizeCapTokens = 0 }), ""},
		{"pay factor under 1", with(func(o *Options) { o.PayFactor = 0.99 }), "option PayFactor = 0.99"},
		{"pay factor NaN", with(func(o *Options) { o.PayFactor = math.NaN() }), "option PayFactor = NaN"},
		{"pay factor infinite", with(func(o *Options) { o.PayFactor = math.Inf(1) }), "option PayFactor = +Inf"},
		{"estimator factor 0", with(func(o *Options) { o.Estimator.Factor = 0 }), "option Estimator.Factor = 0"},
		{"estimator factor NaN", with(func(o *Options) { o.Estimator.Factor = math.NaN() }), "option Estimator.Factor = NaN"},
		{"estimator factor infinite", with(func(o *Options) { o.Estimator.Factor = math.Inf(1) }), "option Estimator.Factor = +Inf"},
		{"estimator min under 1", with(func(o *Options) { o.Estimator.Min = 0.5 }), "option Estimator.Min = 0.5"},
		{"estimator min NaN", with(func(o *Options) { o.Estimator.Min = math.NaN() }), "option Estimator.Min = NaN"},
		{"estimator min infinite", with(func(o *Options) { o.Estimator.Min = math.Inf(1) }), "option Estimator.Min = +Inf"},
		{"no cache TTL", with(func(o *Options) { o.CacheTTL = 0 }), "option CacheTTL = 0s"},
		{"negative recall overhead", with(func(o *Options) { o.RecallOverheadTokens = -1 }), "option RecallOverheadTokens = -1"},
		{"no bins", with(func(o *Options) { o.Bins = 0 }), "option Bins = 0"},
		{"too many bins", with(func(o *Options) { o.Bins = 1001 }), "option Bins = 1001"},
		{"compaction without a window", with(func(o *Options) { o.CompactionOf, o.Window = compacts, 0 }), "option Window = 0"},
		{"bad price", with(func(o *Options) {
			m := prices.MustDefault(prices.OpenAI)
			m.CacheReadPerMTok = -1
			o.Prices = prices.Table{prices.OpenAI: m}
		}), "option Prices: prices for openai"},
	} {
		err := tt.opts.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
	// NewEvaluator refuses bad options before it reads a record.
	if _, err := NewEvaluator(nil, nil, with(func(o *Options) { o.Bins = 0 })); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewEvaluator with 0 bins: %v, want ErrInvalid", err)
	}
}

// Output.Validate names the field of every broken constraint its comment lists,
// and accepts each at its edge.
func TestOutputValidateEdges(t *testing.T) {
	good := Output{Session: "s", Key: "k", Tokens: 5, Step: 2, CandidateFrom: 4, EndStep: 9, RuleDeadAt: 5,
		Asks: []Ask{{Step: 4, Keep: 0.5, OK: true}}, Uses: []int{3, 8}}
	with := func(f func(*Output)) Output {
		o := good
		o.Asks = append([]Ask(nil), good.Asks...)
		o.Uses = append([]int(nil), good.Uses...)
		f(&o)
		return o
	}
	for _, tt := range []struct {
		name string
		o    Output
		want string // the field named, "" for valid
	}{
		{"zero sizes, step 0", with(func(o *Output) { o.Tokens, o.Offset, o.StubTokens, o.Step, o.Uses = 0, 0, 0, 0, []int{1, 9} }), ""},
		{"ends at its own step", Output{Session: "s", Key: "k", Step: 3, EndStep: 3}, ""},
		{"candidate and rule at the last step", with(func(o *Output) { o.CandidateFrom, o.RuleDeadAt, o.Asks = 9, 9, []Ask{{Step: 9, Keep: 1, OK: true}} }), ""},
		{"candidate the step after", with(func(o *Output) { o.CandidateFrom, o.RuleDeadAt, o.Asks = 3, 3, []Ask{{Step: 3, Keep: 0, OK: true}} }), ""},
		{"asks at one step, a failed ask's score ignored", with(func(o *Output) {
			o.Asks = []Ask{{Step: 4, Keep: 0.5, OK: true}, {Step: 4, Keep: math.NaN()}, {Step: 9, Keep: 7}}
		}), ""},
		{"held per use", with(func(o *Output) { o.Held = []bool{true, false} }), ""},
		{"no key", with(func(o *Output) { o.Key = "" }), "Key"},
		{"negative offset", with(func(o *Output) { o.Offset = -1 }), "Offset"},
		{"negative stub", with(func(o *Output) { o.StubTokens = -1 }), "StubTokens"},
		{"negative step", with(func(o *Output) { o.Step = -1 }), "Step"},
		{"candidate past the end", with(func(o *Output) { o.CandidateFrom = 10 }), "CandidateFrom"},
		{"candidate before the step", with(func(o *Output) { o.CandidateFrom = 1 }), "CandidateFrom"},
		{"rule at its own step", with(func(o *Output) { o.RuleDeadAt = 2 }), "RuleDeadAt"},
		{"ask past the end", with(func(o *Output) { o.Asks[0].Step = 10 }), "Asks[0].Step"},
		{"asks out of order", with(func(o *Output) { o.Asks = []Ask{{Step: 6, OK: true}, {Step: 5, OK: true}} }), "Asks[1].Step"},
		{"keep negative", with(func(o *Output) { o.Asks[0].Keep = -0.1 }), "Asks[0].Keep"},
		{"held short", with(func(o *Output) { o.Held = []bool{true} }), "Held"},
		{"use past the end", with(func(o *Output) { o.Uses = []int{3, 10} }), "Uses[1]"},
		{"use twice", with(func(o *Output) { o.Uses = []int{3, 3} }), "Uses[1]"},
	} {
		err := tt.o.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), ": "+tt.want+":") {
			t.Errorf("%s: Validate() = %v, want an ErrInvalid naming %s", tt.name, err, tt.want)
		}
	}
}

// NewEvaluator's checks of the sessions and of one session's outputs together.
func TestNewEvaluatorRefuses(t *testing.T) {
	outs, sessions := handOutputs()
	for _, tt := range []struct {
		name     string
		outs     []Output
		sessions []Calls
		want     string
	}{
		{"unnamed session", outs, []Calls{{Context: ctx(10, 1)}}, "sessions[0]: empty Name"},
		{"session twice", outs, []Calls{sessions[0], sessions[0]}, `sessions[1]: session "s" given twice`},
		{"negative context", outs, []Calls{{Name: "s", Context: append(ctx(9, 1), -1)}}, `session "s": Context[9] = -1 < 0`},
		{"unknown provider", outs, []Calls{{Name: "s", Context: ctx(10, 1), Provider: "mistral"}}, `session "s"`},
		{"two end steps", append(append([]Output(nil), outs...), Output{Session: "s", Key: "D", Step: 1, EndStep: 9}), sessions, `outputs[3]: output "D" of session "s": EndStep 9, other outputs of the session say 10`},
		{"bad record", append(append([]Output(nil), outs...), Output{Session: "s", Key: "D", Step: 1, EndStep: 10, Tokens: -3}), sessions, `outputs[3]: calibrate: invalid input: output "D" of session "s": Tokens`},
	} {
		_, err := NewEvaluator(tt.outs, tt.sessions, DefaultOptions())
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewEvaluator error = %v, want an ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
}

// The evaluator keeps its own copy of the records and hands out copies: a caller
// changing its slices afterwards changes no figure.
func TestEvaluatorCopies(t *testing.T) {
	outs, sessions := handOutputs()
	opts := DefaultOptions()
	opts.Budget = 45_000
	e := mustEval(t, outs, sessions, opts)
	outs[0].Uses[0] = 9
	outs[0].Asks[0].Keep = 0.9
	got := e.Outputs()
	want, _ := handOutputs()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Outputs() after the caller changed its records (-want +got):\n%s", d)
	}
	got[1].Tokens = 1
	if e.Outputs()[1].Tokens != 4000 {
		t.Error("Outputs() is not a copy")
	}
	if e.Options().Budget != 45_000 || e.Options().Bins != 10 {
		t.Errorf("Options() = %+v, want the options given", e.Options())
	}
}

// SavedShare is the share of every output's token-steps a pruner kept out of the
// context: TestEvaluateHand's scorer saves 34,000 of 66,000.
func TestSavedShare(t *testing.T) {
	outs, sessions := handOutputs()
	r := mustEval(t, outs, sessions, DefaultOptions()).Scorer("x", 0.25)
	if got, want := r.SavedShare(), 34_000.0/66_000; !approx(got, want) {
		t.Errorf("SavedShare = %v, want 34,000/66,000 = %v", got, want)
	}
	if got := (Result{TokenSteps: 5}).SavedShare(); got != 0 {
		t.Errorf("SavedShare with nothing to save = %v, want 0", got)
	}
}

// Applied prices what a replayed advisor really did: stubbing A at 4, B at 5 and C
// at 7 is TestEvaluateHand's decision level at both levels ($0.782082, net
// -0.459582, 3 rewrites, 1 miss), with its flat figures (34,000 token-steps, A's use
// at 6 a miss) and no cutoff.
func TestAppliedIsWhatTheAdvisorDid(t *testing.T) {
	outs, sessions := handOutputs()
	e := mustEval(t, outs, sessions, DefaultOptions())
	got, err := e.Applied("advisor", []int{4, 5, 7})
	if err != nil {
		t.Fatal(err)
	}
	lvl := Level{NetUSD: 0.3225 - 0.782082, PaidUSD: 0.782082, PeakContext: 50_000, Rewrites: 3, SessionsCostlier: 1, Misses: 1, TokenSteps: 35_920}
	want := Result{
		Name: "advisor", Cutoff: -1, Outputs: 3, Pruned: 3, Misses: 1, PruneRate: 1, MissRate: 1.0 / 3,
		TokenSteps: 34_000, TotalTokenSteps: 66_000, Decision: lvl, Applied: lvl,
		// Each stub is 40 tokens for the calls it stands in for: A 4-5 (its miss
		// at 6), B 5-10, C 7-10: 40 x (2 + 6 + 4) = 480.
		StubTokenSteps: 480,
	}
	if d := cmp.Diff(want, got, cmp.Comparer(approx)); d != "" {
		t.Errorf("Applied (-want +got):\n%s", d)
	}
	// Nothing stubbed is keep-all.
	none, err := e.Applied("advisor", []int{0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if none.Pruned != 0 || none.Applied.NetUSD != 0 || !approx(none.Applied.PaidUSD, 0.3225) || none.Applied.Rewrites != 0 {
		t.Errorf("Applied with nothing stubbed = %+v, want keep-all's figures", none)
	}
	for _, tt := range []struct {
		name  string
		apply []int
		want  string
	}{
		{"short", []int{4}, "applied advisor: 1 steps for 3 outputs"},
		// A comes from step 1: stubbing it before call 2 is stubbing what the agent
		// has not seen yet.
		{"at its own step", []int{1, 0, 0}, `output "A" of session "s" stubbed at step 1, before it was visible`},
	} {
		if _, err := e.Applied("advisor", tt.apply); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Applied error = %v, want an ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
	if _, err := e.Applied("advisor", []int{2, 0, 0}); err != nil {
		t.Errorf("A stubbed at step 2, the first it is visible: %v", err)
	}
}

// A session whose calls carry no time is priced warm throughout and counted as
// untimed; a pause longer than the cache TTL makes the next call cold, one exactly
// at the TTL does not.
func TestTimingCountsColdCalls(t *testing.T) {
	outs, sessions := handOutputs()
	e := mustEval(t, outs, sessions, DefaultOptions())
	if u, c := e.Timing(); u != 1 || c != 0 {
		t.Errorf("untimed session: Timing() = %d, %d; want 1, 0", u, c)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := make([]time.Time, 10)
	for i := range at {
		at[i] = t0.Add(time.Duration(i) * time.Minute)
	}
	// Call 4 comes 5 minutes after call 3 (the TTL: still warm), call 7 five minutes
	// and a second after call 6 (cold); call 9 has no time, so call 10 is measured
	// from call 8, 6 minutes before it (cold).
	shift := func(from int, d time.Duration) {
		for i := from - 1; i < len(at); i++ {
			at[i] = at[i].Add(d)
		}
	}
	shift(4, 4*time.Minute)
	shift(7, 4*time.Minute+time.Second)
	shift(10, 4*time.Minute)
	at[8] = time.Time{}
	sessions[0].At = at
	e = mustEval(t, outs, sessions, DefaultOptions())
	if u, c := e.Timing(); u != 0 || c != 2 {
		t.Errorf("timed session: Timing() = %d, %d; want 0 untimed, 2 cold calls (7 and 10)", u, c)
	}
}
