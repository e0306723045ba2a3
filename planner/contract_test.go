package planner

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Validate names the first field that is out of range, and accepts every field at
// the edge of its range (a context of 0, the low-water mark at the budget, the hard
// limit at the budget, one remaining step, break-even pay factor, free prices,
// keep-probabilities 0 and 1, a rule prune without a score).
func TestValidateNamesTheField(t *testing.T) {
	ok := Input{Context: 10, Budget: 100, HardLimit: 200, LowWater: 80, Remaining: 1, Read: 0.1, Premium: 1, PayFactor: 1}
	with := func(f func(*Input)) Input { in := ok; f(&in); return in }
	for _, tt := range []struct {
		name string
		in   Input
		want string // "" for valid
	}{
		{"at every edge", with(func(in *Input) {
			in.Context, in.HardLimit, in.LowWater, in.LeastRewrite, in.Read, in.Premium = 0, 100, 100, 0, 0, 0
			in.Pending = []Pending{{Offset: 0, Saves: 1, Keep: 0}, {Offset: 5, Saves: 1, Keep: 1}, {Offset: 9, Saves: 1, Keep: math.NaN(), Rule: true}}
			in.Extra = []Pending{{Offset: 0, Saves: 1, Keep: 0}, {Offset: 3, Saves: 2, Keep: 1}}
		}), ""},
		{"low water 0", with(func(in *Input) { in.LowWater = 0 }), ""},
		{"negative context", with(func(in *Input) { in.Context = -1 }), "Context = -1"},
		{"no budget", with(func(in *Input) { in.Budget = 0 }), "Budget = 0"},
		{"hard limit under budget", with(func(in *Input) { in.HardLimit = 99 }), "HardLimit = 99"},
		{"negative low water", with(func(in *Input) { in.LowWater = -1 }), "LowWater = -1"},
		{"low water over budget", with(func(in *Input) { in.LowWater = 101 }), "LowWater = 101"},
		{"negative least rewrite", with(func(in *Input) { in.LeastRewrite = -1 }), "LeastRewrite = -1"},
		{"remaining below 1", with(func(in *Input) { in.Remaining = 0.99 }), "Remaining = 0.99"},
		{"infinite remaining", with(func(in *Input) { in.Remaining = math.Inf(1) }), "Remaining = +Inf"},
		{"negative read", with(func(in *Input) { in.Read = -0.1 }), "Read = -0.1"},
		{"NaN premium", with(func(in *Input) { in.Premium = math.NaN() }), "Premium = NaN"},
		{"pay factor below 1", with(func(in *Input) { in.PayFactor = 0.9 }), "PayFactor = 0.9"},
		{"infinite pay factor", with(func(in *Input) { in.PayFactor = math.Inf(1) }), "PayFactor = +Inf"},
		{"pending at a negative offset", with(func(in *Input) { in.Pending = []Pending{{Offset: 2, Saves: 1}, {Offset: -1, Saves: 1}} }), "Pending[1]"},
		{"pending freeing nothing", with(func(in *Input) { in.Pending = []Pending{{Offset: 2, Saves: 0}} }), "Pending[0]"},
		{"pending score NaN", with(func(in *Input) { in.Pending = []Pending{{Offset: 2, Saves: 1, Keep: math.NaN()}} }), "Pending[0]"},
		{"pending score negative", with(func(in *Input) { in.Pending = []Pending{{Offset: 2, Saves: 1, Keep: -0.1}} }), "Pending[0]"},
		{"pending score over 1", with(func(in *Input) { in.Pending = []Pending{{Offset: 2, Saves: 1, Keep: 1.1}} }), "Pending[0]"},
		// A rule on a candidate not pending is ignored: its score still counts.
		{"extra score over 1", with(func(in *Input) { in.Extra = []Pending{{Offset: 2, Saves: 1, Keep: 1.1, Rule: true}} }), "Extra[0]"},
		{"extra score NaN", with(func(in *Input) { in.Extra = []Pending{{Offset: 2, Saves: 1, Keep: math.NaN()}} }), "Extra[0]"},
		{"extra score negative", with(func(in *Input) { in.Extra = []Pending{{Offset: 2, Saves: 1, Keep: -1}} }), "Extra[0]"},
		{"extra freeing nothing", with(func(in *Input) { in.Extra = []Pending{{Offset: 2, Saves: 0, Keep: 0.5}} }), "Extra[0]"},
		{"extra at a negative offset", with(func(in *Input) { in.Extra = []Pending{{Offset: -3, Saves: 1, Keep: 0.5}} }), "Extra[0]"},
		{"protected score NaN", with(func(in *Input) {
			in.Protected = []Pending{{Offset: 2, Saves: 1, Keep: 1}, {Offset: 2, Saves: 1, Keep: math.NaN()}}
		}), "Protected[1]"},
		{"protected freeing nothing", with(func(in *Input) { in.Protected = []Pending{{Offset: 2, Saves: 0, Keep: 0.5}} }), "Protected[0]"},
		{"protected at a negative offset", with(func(in *Input) { in.Protected = []Pending{{Offset: -1, Saves: 1, Keep: 0.5}} }), "Protected[0]"},
	} {
		err := tt.in.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an ErrInput naming %q", tt.name, err, tt.want)
		}
	}
}

// With at most PaysEvery (32) prunes pending the pays test runs at every step; with
// more, every pending/32 steps: 64 pending, every 2nd step; 100 pending, every 3rd
// (100/32 = 3); 320 pending, every 10th.
func TestPaysDue(t *testing.T) {
	type at struct{ step, pending int }
	due := map[at]bool{}
	for _, pending := range []int{0, 1, 31, 32, 63, 64, 100, 320} {
		for step := 1; step <= 10; step++ {
			due[at{step, pending}] = PaysDue(step, pending)
		}
	}
	want := map[at]bool{}
	for _, pending := range []int{0, 1, 31, 32, 63} { // pending/32 <= 1: always
		for step := 1; step <= 10; step++ {
			want[at{step, pending}] = true
		}
	}
	for step := 1; step <= 10; step++ {
		want[at{step, 64}] = step%2 == 0
		want[at{step, 100}] = step == 3 || step == 6 || step == 9
		want[at{step, 320}] = step == 10
	}
	if d := cmp.Diff(want, due); d != "" {
		t.Errorf("PaysDue (-want +got):\n%s", d)
	}
}

// Urgent is the situations Decide settles without the pays test: past the hard limit,
// a cold cache, or over the budget; at the budget exactly, warm, nothing is urgent.
func TestUrgent(t *testing.T) {
	base := Input{Budget: 1000, HardLimit: 1500, LowWater: 800, Remaining: 1, PayFactor: 1}
	for _, tt := range []struct {
		name    string
		context int
		cold    bool
		want    bool
	}{
		{"under budget, warm", 900, false, false},
		{"at the budget, warm", 1000, false, false},
		{"one over the budget", 1001, false, true},
		{"at the hard limit", 1500, false, true},
		{"past the hard limit", 1501, false, true},
		{"under budget, cold", 10, true, true},
		// A hard limit at the budget: a context at both is neither over.
		{"at a hard limit equal to the budget", 1000, false, false},
	} {
		in := base
		in.Context, in.Cold = tt.context, tt.cold
		if tt.name == "at a hard limit equal to the budget" {
			in.HardLimit = 1000
		}
		if got := in.Urgent(); got != tt.want {
			t.Errorf("%s: Urgent() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
