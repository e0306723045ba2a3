package backoff

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		text     string
		wantGaps []int
		wantText string // String() of the result
	}{
		{"1", []int{1}, "1"},
		{"every:1", []int{1}, "1"},
		{"3", []int{3}, "every:3"},
		{"every:3", []int{3}, "every:3"},
		{" Every : 7 ", []int{7}, "every:7"},
		{"3,6,12,24", []int{3, 6, 12, 24}, "3,6,12,24"},
		{"3, 6 ,12,24", []int{3, 6, 12, 24}, "3,6,12,24"},
		{"5,2", []int{5, 2}, "5,2"},
		{"default", []int{3, 6, 12, 24}, "3,6,12,24"},
		{"doubling:3", []int{3, 6, 12, 24}, "doubling:3"},
		{"doubling:1", []int{1, 2, 4, 8}, "doubling:1"},
		{"doubling:3:20", []int{3, 6, 12, 20}, "doubling:3:20"},
		{"doubling:2:2", []int{2}, "doubling:2:2"},
		{"doubling:3:24", []int{3, 6, 12, 24}, "doubling:3"},
		{"1000000", []int{1000000}, "every:1000000"},
	}
	for _, tt := range tests {
		s, err := Parse(tt.text)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.text, err)
			continue
		}
		if diff := cmp.Diff(tt.wantGaps, s.Gaps()); diff != "" {
			t.Errorf("Parse(%q).Gaps() (-want +got):\n%s", tt.text, diff)
		}
		if got := s.String(); got != tt.wantText {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.text, got, tt.wantText)
		}
		// Round trip: String parses back to an equal schedule with the same gaps.
		back, err := Parse(s.String())
		if err != nil {
			t.Errorf("Parse(%q) (round trip of %q): %v", s.String(), tt.text, err)
			continue
		}
		if diff := cmp.Diff(s, back); diff != "" {
			t.Errorf("round trip of %q (-first +second):\n%s", tt.text, diff)
		}
		if diff := cmp.Diff(s.Gaps(), back.Gaps()); diff != "" {
			t.Errorf("round trip gaps of %q (-first +second):\n%s", tt.text, diff)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		text string
		want string // a substring the error must contain
	}{
		{"", "empty text"},
		{"   ", "empty text"},
		{"0", "gap 1 of the list is 0"},
		{"-3", `gap 1 of the list "-3" is not a whole number`},
		{"every:", "every is empty"},
		{"every:x", `every "x" is not a whole number`},
		{"every:0", "every is 0"},
		{"every:2.5", `every "2.5" is not a whole number`},
		{"3,,12", "gap 2 of the list is empty"},
		{"3,6,", "gap 3 of the list is empty"},
		{"3,six", `gap 2 of the list "six" is not a whole number`},
		{"3,0,1", "gap 2 of the list is 0"},
		{"1000001", "over the maximum of 1000000"},
		{"99999999999999999999999", "over the maximum"},
		{"doubling:", "doubling first gap is empty"},
		{"doubling:0", "doubling first gap is 0"},
		{"doubling:4:2", "largest gap 2 is below the first gap 4"},
		{"doubling:4:x", `doubling largest gap "x" is not a whole number`},
		{"fib:3", `unknown form "fib"`},
	}
	for _, tt := range tests {
		_, err := Parse(tt.text)
		if err == nil {
			t.Errorf("Parse(%q) = nil error, want one containing %q", tt.text, tt.want)
			continue
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error %v does not wrap ErrSyntax", tt.text, err)
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %q, want it to contain %q", tt.text, err, tt.want)
		}
		if !strings.Contains(err.Error(), `"`+tt.text+`"`) {
			t.Errorf("Parse(%q) error = %q does not quote the text", tt.text, err)
		}
	}
}

func TestGap(t *testing.T) {
	def := Default()
	tests := []struct {
		reask int
		want  int
	}{{-1, 3}, {0, 3}, {1, 3}, {2, 6}, {3, 12}, {4, 24}, {5, 24}, {100, 24}}
	for _, tt := range tests {
		if got := def.Gap(tt.reask); got != tt.want {
			t.Errorf("Default().Gap(%d) = %d, want %d", tt.reask, got, tt.want)
		}
	}
}

func TestDue(t *testing.T) {
	def := Default()
	every1, _ := Every(1)
	every4, _ := Every(4)
	list, _ := List(2, 5)
	tests := []struct {
		name          string
		s             Schedule
		lastAsk, asks int
		now           int
		over          bool
		want          bool
	}{
		{"never asked is due even under budget", def, 0, 0, 10, false, true},
		{"never asked is due over budget", def, 0, 0, 10, true, true},
		{"under budget never re-asks", def, 1, 1, 100, false, false},
		{"first re-ask: 2 steps is too soon", def, 10, 1, 12, true, false},
		{"first re-ask: 3 steps is due", def, 10, 1, 13, true, true},
		{"second re-ask: 5 steps is too soon", def, 13, 2, 18, true, false},
		{"second re-ask: 6 steps is due", def, 13, 2, 19, true, true},
		{"third re-ask waits 12", def, 19, 3, 31, true, true},
		{"third re-ask at 11 is too soon", def, 19, 3, 30, true, false},
		{"fourth re-ask waits 24", def, 31, 4, 54, true, false},
		{"fourth re-ask at 24", def, 31, 4, 55, true, true},
		{"tenth re-ask still 24", def, 100, 10, 124, true, true},
		{"tenth re-ask 23 is too soon", def, 100, 10, 123, true, false},
		{"same step is never due", every1, 5, 1, 5, true, false},
		{"every step", every1, 5, 7, 6, true, true},
		{"every step under budget", every1, 5, 7, 6, false, false},
		{"every 4: 3 too soon", every4, 5, 3, 8, true, false},
		{"every 4: 4 due", every4, 5, 3, 9, true, true},
		{"list first gap 2", list, 5, 1, 7, true, true},
		{"list second gap 5 too soon", list, 7, 2, 11, true, false},
		{"list last gap repeats", list, 20, 6, 25, true, true},
		{"step going back is not due", def, 10, 1, 4, true, false},
	}
	for _, tt := range tests {
		if got := tt.s.Due(tt.lastAsk, tt.asks, tt.now, tt.over); got != tt.want {
			t.Errorf("%s: %v.Due(lastAsk=%d, asks=%d, now=%d, over=%v) = %v, want %v",
				tt.name, tt.s, tt.lastAsk, tt.asks, tt.now, tt.over, got, tt.want)
		}
	}
}

// TestDueSequence walks one card through a session that stays over budget and
// lists the steps at which it is asked.
func TestDueSequence(t *testing.T) {
	tests := []struct {
		text string
		want []int
	}{
		{"3,6,12,24", []int{1, 4, 10, 22, 46, 70, 94}},
		{"1", []int{1, 2, 3, 4, 5, 6, 7}},
		{"every:10", []int{1, 11, 21, 31, 41, 51, 61}},
		{"doubling:1", []int{1, 2, 4, 8, 16, 24, 32}},
	}
	for _, tt := range tests {
		s, err := Parse(tt.text)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		asks, last := 0, 0
		for now := 1; len(got) < len(tt.want); now++ {
			if s.Due(last, asks, now, true) {
				got = append(got, now)
				asks, last = asks+1, now
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s asks (-want +got):\n%s", tt.text, diff)
		}
	}
}

func TestConstructors(t *testing.T) {
	if _, err := Every(0); !errors.Is(err, ErrSyntax) {
		t.Errorf("Every(0) error = %v, want ErrSyntax", err)
	}
	if _, err := List(); !errors.Is(err, ErrSyntax) {
		t.Errorf("List() error = %v, want ErrSyntax", err)
	}
	if _, err := List(3, -1); err == nil || !strings.Contains(err.Error(), "gap 2 of the list (-1)") {
		t.Errorf("List(3, -1) error = %v, want it to name gap 2", err)
	}
	if _, err := Doubling(5, MaxGap+1); !errors.Is(err, ErrSyntax) {
		t.Errorf("Doubling(5, MaxGap+1) error = %v, want ErrSyntax", err)
	}
	// The zero value is the default and equals the explicit list.
	var zero Schedule
	l, _ := List(3, 6, 12, 24)
	if diff := cmp.Diff(l, zero); diff != "" {
		t.Errorf("zero value vs List(3,6,12,24) (-want +got):\n%s", diff)
	}
	// Gaps returns a copy.
	g := l.Gaps()
	g[0] = 99
	if l.Gap(1) != 3 {
		t.Errorf("modifying Gaps() changed the schedule: Gap(1) = %d", l.Gap(1))
	}
}

func TestTextAndFlag(t *testing.T) {
	var cfg struct {
		Schedule Schedule `json:"schedule"`
	}
	if err := json.Unmarshal([]byte(`{"schedule":"every:5"}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Schedule.Gap(3); got != 5 {
		t.Errorf("unmarshalled every:5 Gap(3) = %d, want 5", got)
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"schedule":"every:5"}`; got != want {
		t.Errorf("marshal = %s, want %s", got, want)
	}
	if err := json.Unmarshal([]byte(`{"schedule":"3,x"}`), &cfg); !errors.Is(err, ErrSyntax) {
		t.Errorf("unmarshal of 3,x: error = %v, want ErrSyntax", err)
	}
	var s Schedule
	if err := s.Set("2,4"); err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "2,4" || s.Type() != "schedule" {
		t.Errorf("after Set(2,4): String = %q, Type = %q", got, s.Type())
	}
}
