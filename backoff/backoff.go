// Package backoff is the ask back-off schedule (docs/DESIGN.md step 5): once a card has
// been scored, it is asked again only while the session is over its budget, and only
// after a gap of steps that may grow with every re-ask. The default gaps are 3, 6, 12
// and 24 steps after the previous ask, then 24 for ever ("scores barely move between
// asks", docs/DESIGN.md defaults table).
//
// A Schedule is a list of gaps in steps; the n-th re-ask waits gaps[n-1] steps after
// the previous ask, and the last gap repeats. Every step is the list [1], every k
// steps the list [k], the doubling schedule [3 6 12 24].
package backoff

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every Parse error; the message names the offending part.
var ErrSyntax = errors.New("invalid back-off schedule")

// MaxGap is the largest gap Parse and the constructors accept, in steps. It only
// guards against typos and overflow: no session runs a million steps.
const MaxGap = 1_000_000

// Default doubling parameters (docs/DESIGN.md defaults table: 3, 6, 12, 24 steps).
const (
	DefaultFirst = 3  // first gap of the default schedule, in steps
	DefaultMax   = 24 // largest gap of the default schedule, in steps; it then repeats
)

// form records how a Schedule was written, so String gives back the same form.
type form uint8

const (
	formDefault  form = iota // zero value: the default doubling schedule
	formEvery                // every k steps
	formDoubling             // first, 2·first, … up to max
	formList                 // an explicit list
)

// Schedule spaces out re-asks of one card. The zero value is the default schedule
// (Doubling(DefaultFirst, DefaultMax), i.e. 3, 6, 12, 24, 24, … steps). Schedules are
// values: copy them freely; none of the methods modify the receiver except Set and
// UnmarshalText.
type Schedule struct {
	form  form
	gaps  []int // in steps, each in [1, MaxGap]; the last one repeats
	first int   // formDoubling only
	max   int   // formDoubling only
}

// Default returns the docs/DESIGN.md default: 3, 6, 12, 24 steps, then 24.
func Default() Schedule { return Schedule{} }

// Every returns the schedule that re-asks every k steps (k = 1: every step).
// It returns an error wrapping ErrSyntax when k is outside [1, MaxGap].
func Every(k int) (Schedule, error) {
	if err := checkGap(k); err != nil {
		return Schedule{}, fmt.Errorf("%w: every %d steps: %v", ErrSyntax, k, err)
	}
	return Schedule{form: formEvery, gaps: []int{k}}, nil
}

// Doubling returns the gaps first, 2·first, 4·first, … while they do not exceed max,
// then max for ever (max itself is the last gap even when it is not a power-of-two
// multiple of first). Doubling(3, 24) is 3, 6, 12, 24. It returns an error wrapping
// ErrSyntax unless 1 <= first <= max <= MaxGap.
func Doubling(first, max int) (Schedule, error) {
	if err := checkGap(first); err != nil {
		return Schedule{}, fmt.Errorf("%w: doubling first gap %d: %v", ErrSyntax, first, err)
	}
	if err := checkGap(max); err != nil {
		return Schedule{}, fmt.Errorf("%w: doubling largest gap %d: %v", ErrSyntax, max, err)
	}
	if max < first {
		return Schedule{}, fmt.Errorf("%w: doubling largest gap %d is below the first gap %d", ErrSyntax, max, first)
	}
	return Schedule{form: formDoubling, gaps: doubling(first, max), first: first, max: max}, nil
}

func doubling(first, max int) []int {
	var gaps []int
	for g := first; g < max; g *= 2 {
		gaps = append(gaps, g)
	}
	return append(gaps, max)
}

// List returns the schedule with the given gaps in steps; the last gap repeats. Gaps
// need not grow. It returns an error wrapping ErrSyntax for an empty list or a gap
// outside [1, MaxGap], naming its position (1-based).
func List(gaps ...int) (Schedule, error) {
	if len(gaps) == 0 {
		return Schedule{}, fmt.Errorf("%w: empty list of gaps", ErrSyntax)
	}
	for i, g := range gaps {
		if err := checkGap(g); err != nil {
			return Schedule{}, fmt.Errorf("%w: gap %d of the list (%d): %v", ErrSyntax, i+1, g, err)
		}
	}
	return Schedule{form: formList, gaps: append([]int(nil), gaps...)}, nil
}

func checkGap(g int) error {
	switch {
	case g < 1:
		return errors.New("a gap must be at least 1 step")
	case g > MaxGap:
		return fmt.Errorf("a gap must be at most %d steps", MaxGap)
	}
	return nil
}

// defaultGaps is the zero value's list.
var defaultGaps = doubling(DefaultFirst, DefaultMax)

func (s Schedule) list() []int {
	if s.form == formDefault {
		return defaultGaps
	}
	return s.gaps
}

// Gaps returns a copy of the schedule's gaps in steps; the last one repeats.
func (s Schedule) Gaps() []int { return append([]int(nil), s.list()...) }

// Gap returns the gap, in steps, that the reask-th re-ask waits after the previous
// ask: Gap(1) is the wait between the first ask and the second. reask values below 1
// are treated as 1; past the end of the list the last gap repeats.
func (s Schedule) Gap(reask int) int {
	gaps := s.list()
	i := reask - 1
	if i < 0 {
		i = 0
	}
	if i >= len(gaps) {
		i = len(gaps) - 1
	}
	return gaps[i]
}

// Due reports whether a card should be asked about at step now.
//
//   - asks is how many times the card has been asked so far (0: never);
//   - lastAsk is the step of the latest of those asks (ignored when asks is 0);
//   - overBudget is whether the session is over its token budget at step now.
//
// A card never asked is always due. Otherwise it is due only when overBudget and at
// least Gap(asks) steps have passed since lastAsk: with the default schedule the
// second ask comes 3 steps after the first, the third 6 after the second, then 12,
// then every 24. Steps are the advisor's step numbers (docs/DESIGN.md: one model call
// each, starting at 1); now < lastAsk is never due.
func (s Schedule) Due(lastAsk, asks, now int, overBudget bool) bool {
	if asks <= 0 {
		return true
	}
	return overBudget && now-lastAsk >= s.Gap(asks)
}

// String gives the schedule in Parse syntax, so Parse(s.String()) equals s: "1" for
// every step, "every:K" for every k > 1 steps, "doubling:FIRST" (or
// "doubling:FIRST:MAX" when MAX is not 8·FIRST), and "G1,G2,…" for a list. The zero
// value gives "3,6,12,24".
func (s Schedule) String() string {
	switch s.form {
	case formEvery:
		if s.gaps[0] == 1 {
			return "1"
		}
		return "every:" + strconv.Itoa(s.gaps[0])
	case formDoubling:
		if s.max == 8*s.first {
			return "doubling:" + strconv.Itoa(s.first)
		}
		return "doubling:" + strconv.Itoa(s.first) + ":" + strconv.Itoa(s.max)
	}
	parts := make([]string, len(s.list()))
	for i, g := range s.list() {
		parts[i] = strconv.Itoa(g)
	}
	return strings.Join(parts, ",")
}

// Equal reports whether s and o re-ask at the same gaps and print the same way
// (go-cmp uses it). The zero value equals the list "3,6,12,24".
func (s Schedule) Equal(o Schedule) bool {
	return s.String() == o.String()
}

// Parse reads a schedule from a flag or config value (surrounding spaces and spaces
// around separators are ignored):
//
//	"1"                  every step
//	"every:K" or "K"     every K steps
//	"doubling:F"         F, 2F, 4F, 8F steps, then 8F ("doubling:3" is 3,6,12,24)
//	"doubling:F:M"       F, 2F, … up to M, then M
//	"G1,G2,…,Gn"         the listed gaps; Gn repeats ("3,6,12,24" is the default)
//	"default"            the default, 3,6,12,24
//
// Gaps are whole numbers of steps in [1, MaxGap]. Errors wrap ErrSyntax and quote
// the text and the part that is wrong.
func Parse(text string) (Schedule, error) {
	t := strings.TrimSpace(text)
	wrap := func(err error) error {
		return fmt.Errorf("parsing back-off schedule %q: %w", text, err)
	}
	if t == "" {
		return Schedule{}, wrap(fmt.Errorf("%w: empty text (want e.g. \"3,6,12,24\", \"every:3\" or \"1\")", ErrSyntax))
	}
	if strings.EqualFold(t, "default") {
		return Default(), nil
	}
	name, arg, hasColon := strings.Cut(t, ":")
	if hasColon {
		name = strings.ToLower(strings.TrimSpace(name))
		switch name {
		case "every":
			k, err := parseGap(arg, "every")
			if err != nil {
				return Schedule{}, wrap(err)
			}
			s, err := Every(k)
			if err != nil {
				return Schedule{}, wrap(err)
			}
			return s, nil
		case "doubling":
			firstText, maxText, hasMax := strings.Cut(arg, ":")
			first, err := parseGap(firstText, "doubling first gap")
			if err != nil {
				return Schedule{}, wrap(err)
			}
			max := 8 * first
			if hasMax {
				if max, err = parseGap(maxText, "doubling largest gap"); err != nil {
					return Schedule{}, wrap(err)
				}
			}
			s, err := Doubling(first, max)
			if err != nil {
				return Schedule{}, wrap(err)
			}
			return s, nil
		default:
			return Schedule{}, wrap(fmt.Errorf("%w: unknown form %q (want \"every:K\" or \"doubling:F[:M]\")", ErrSyntax, name))
		}
	}
	fields := strings.Split(t, ",")
	gaps := make([]int, len(fields))
	for i, f := range fields {
		g, err := parseGap(f, fmt.Sprintf("gap %d of the list", i+1))
		if err != nil {
			return Schedule{}, wrap(err)
		}
		gaps[i] = g
	}
	if len(gaps) == 1 {
		s, err := Every(gaps[0])
		if err != nil {
			return Schedule{}, wrap(err)
		}
		return s, nil
	}
	s, err := List(gaps...)
	if err != nil {
		return Schedule{}, wrap(err)
	}
	return s, nil
}

// parseGap reads one gap; what names it in error messages.
func parseGap(text, what string) (int, error) {
	t := strings.TrimSpace(text)
	if t == "" {
		return 0, fmt.Errorf("%w: %s is empty", ErrSyntax, what)
	}
	for _, r := range t {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%w: %s %q is not a whole number of steps", ErrSyntax, what, t)
		}
	}
	g, err := strconv.Atoi(t)
	if err != nil || g > MaxGap {
		return 0, fmt.Errorf("%w: %s %q is over the maximum of %d steps", ErrSyntax, what, t, MaxGap)
	}
	if g < 1 {
		return 0, fmt.Errorf("%w: %s is %d; a gap must be at least 1 step", ErrSyntax, what, g)
	}
	return g, nil
}

// Set parses text into s (flag.Value and pflag.Value); errors as Parse.
func (s *Schedule) Set(text string) error {
	v, err := Parse(text)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Type names the flag's value type for pflag help ("schedule").
func (s *Schedule) Type() string { return "schedule" }

// MarshalText gives String's form (encoding.TextMarshaler, for JSON and config files).
func (s Schedule) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses text as Parse does (encoding.TextUnmarshaler).
func (s *Schedule) UnmarshalText(text []byte) error { return s.Set(string(text)) }
