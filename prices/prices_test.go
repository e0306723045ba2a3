package prices_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pruneadvisor/pruneadvisor/prices"
)

// approx compares dollar amounts computed in floating point with values worked out
// by hand: equal to 1e-12 relative (a dollar figure's last bits differ with the
// order of the operations).
var approx = cmpopts.EquateApprox(1e-12, 0)

// The default table is the providers' published list prices the code cites
// (prices.Default's comment): Anthropic's Claude Sonnet 4.x page, OpenAI's GPT-5 and
// Gemini 2.5 Pro (prompts <= 200k) pages, in dollars per million tokens.
func TestDefaultsArePublishedListPrices(t *testing.T) {
	want := prices.Table{
		// Sonnet: input $3; cache read 0.1x = $0.30; 5-minute write 1.25x = $3.75;
		// 1-hour write 2x = $6; output $15.
		prices.Anthropic: {Provider: prices.Anthropic, InputPerMTok: 3, CacheReadPerMTok: 0.30,
			CacheWritePerMTok: 3.75, CacheWriteLongPerMTok: 6, OutputPerMTok: 15},
		// GPT-5: input $1.25; cached input $0.125; no write premium, so a write is
		// the input price, for either TTL; output $10.
		prices.OpenAI: {Provider: prices.OpenAI, InputPerMTok: 1.25, CacheReadPerMTok: 0.125,
			CacheWritePerMTok: 1.25, CacheWriteLongPerMTok: 1.25, OutputPerMTok: 10},
		// Gemini 2.5 Pro: the same figures as GPT-5.
		prices.Gemini: {Provider: prices.Gemini, InputPerMTok: 1.25, CacheReadPerMTok: 0.125,
			CacheWritePerMTok: 1.25, CacheWriteLongPerMTok: 1.25, OutputPerMTok: 10},
	}
	if diff := cmp.Diff(want, prices.DefaultTable()); diff != "" {
		t.Errorf("DefaultTable (-published +got):\n%s", diff)
	}
	for _, p := range prices.Providers() {
		m, err := prices.Default(p)
		if err != nil {
			t.Fatalf("Default(%s): %v", p, err)
		}
		if diff := cmp.Diff(want[p], m); diff != "" {
			t.Errorf("Default(%s) (-published +got):\n%s", p, diff)
		}
		if diff := cmp.Diff(want[p], prices.MustDefault(p)); diff != "" {
			t.Errorf("MustDefault(%s) (-published +got):\n%s", p, diff)
		}
		// Every default is a valid model: a cache read never costs more than a write.
		if err := m.Validate(); err != nil {
			t.Errorf("Default(%s).Validate: %v", p, err)
		}
	}
	if got, want := prices.Providers(), []prices.Provider{prices.Anthropic, prices.OpenAI, prices.Gemini}; !cmp.Equal(got, want) {
		t.Errorf("Providers() = %v, want %v (a stable order)", got, want)
	}
}

func TestDefaultUnknownProvider(t *testing.T) {
	m, err := prices.Default("mistral")
	if !errors.Is(err, prices.ErrPrices) {
		t.Fatalf("Default(mistral) error = %v, want one wrapping ErrPrices", err)
	}
	if m != (prices.Model{}) {
		t.Errorf("Default(mistral) = %+v, want the zero model", m)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("MustDefault(mistral) did not panic")
		}
	}()
	prices.MustDefault("mistral")
}

func TestParseProvider(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want prices.Provider
	}{
		{"anthropic", prices.Anthropic},
		{"OpenAI", prices.OpenAI},    // case-insensitive
		{" gemini\n", prices.Gemini}, // surrounding space ignored
		{"GEMINI", prices.Gemini},
	} {
		got, err := prices.ParseProvider(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseProvider(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	_, err := prices.ParseProvider("claude")
	if !errors.Is(err, prices.ErrPrices) {
		t.Fatalf("ParseProvider(claude) error = %v, want one wrapping ErrPrices", err)
	}
	// The error lists the names that would have worked, in Providers' order.
	if want := `unknown provider "claude" (known: anthropic, openai, gemini)`; !strings.Contains(err.Error(), want) {
		t.Errorf("ParseProvider(claude) error = %q, want it to contain %q", err, want)
	}
}

// Per-token prices are the per-million prices divided by a million; the rewrite
// premium is what a token after a rewrite's first change costs beyond a read.
func TestPerTokenPrices(t *testing.T) {
	type perToken struct{ Read, Write, Input, Output, Premium float64 }
	for _, tc := range []struct {
		p    prices.Provider
		want perToken
	}{
		// Anthropic: read $0.30/MTok, write $3.75, input $3, output $15; premium
		// 3.75 - 0.30 = $3.45/MTok.
		{prices.Anthropic, perToken{Read: 0.30e-6, Write: 3.75e-6, Input: 3e-6, Output: 15e-6, Premium: 3.45e-6}},
		// OpenAI: read $0.125, write = input $1.25, output $10; premium 1.25 -
		// 0.125 = $1.125/MTok.
		{prices.OpenAI, perToken{Read: 0.125e-6, Write: 1.25e-6, Input: 1.25e-6, Output: 10e-6, Premium: 1.125e-6}},
		{prices.Gemini, perToken{Read: 0.125e-6, Write: 1.25e-6, Input: 1.25e-6, Output: 10e-6, Premium: 1.125e-6}},
	} {
		m := prices.MustDefault(tc.p)
		got := perToken{Read: m.Read(), Write: m.Write(), Input: m.Input(), Output: m.Output(), Premium: m.RewritePremium()}
		if diff := cmp.Diff(tc.want, got, approx); diff != "" {
			t.Errorf("%s per-token prices (-hand +got):\n%s", tc.p, diff)
		}
	}
}

// A breakpoint's write price depends on its TTL: Anthropic's 1-hour breakpoints pay
// 2x input ($6/MTok), the 5-minute ones 1.25x ($3.75/MTok); anything from an hour up
// is the long TTL, anything shorter the short one.
func TestWriteForTTL(t *testing.T) {
	anthropic, openai := prices.MustDefault(prices.Anthropic), prices.MustDefault(prices.OpenAI)
	for _, tc := range []struct {
		name string
		m    prices.Model
		ttl  time.Duration
		want float64
	}{
		{"anthropic 5m", anthropic, 5 * time.Minute, 3.75e-6},
		{"anthropic no ttl", anthropic, 0, 3.75e-6},
		{"anthropic just under an hour", anthropic, time.Hour - time.Second, 3.75e-6},
		{"anthropic 1h", anthropic, time.Hour, 6e-6},
		{"anthropic 2h", anthropic, 2 * time.Hour, 6e-6},
		// No long TTL at OpenAI: its long write price is the input price too.
		{"openai 1h", openai, time.Hour, 1.25e-6},
		{"openai 5m", openai, 5 * time.Minute, 1.25e-6},
	} {
		if got := tc.m.WriteFor(tc.ttl); !cmp.Equal(got, tc.want, approx) {
			t.Errorf("%s: WriteFor(%v) = %g, want %g", tc.name, tc.ttl, got, tc.want)
		}
	}
}

// Call prices one call as the provider bills it: the cached prefix at the read
// price, the rest at the write price.
func TestCall(t *testing.T) {
	anthropic, openai := prices.MustDefault(prices.Anthropic), prices.MustDefault(prices.OpenAI)
	for _, tc := range []struct {
		name          string
		m             prices.Model
		cached, total int
		want          float64
	}{
		// 100,000 read x $0.30/MTok = $0.03, plus 50,000 written x $3.75/MTok =
		// $0.1875: $0.2175.
		{"anthropic warm", anthropic, 100_000, 150_000, 0.2175},
		// Cold cache: all 150,000 written, x $3.75/MTok = $0.5625.
		{"anthropic cold", anthropic, 0, 150_000, 0.5625},
		// Everything read: 150,000 x $0.30/MTok = $0.045.
		{"anthropic all cached", anthropic, 150_000, 150_000, 0.045},
		// OpenAI: 100,000 x $0.125/MTok = $0.0125, plus 50,000 x $1.25/MTok =
		// $0.0625: $0.075.
		{"openai warm", openai, 100_000, 150_000, 0.075},
		// Clamped: a cached count past the total is the total ($0.045 as above), a
		// negative one is 0 ($0.5625), and a negative total costs nothing.
		{"cached past total", anthropic, 200_000, 150_000, 0.045},
		{"negative cached", anthropic, -5, 150_000, 0.5625},
		{"negative total", anthropic, 100, -10, 0},
		{"nothing sent", anthropic, 0, 0, 0},
	} {
		if got := tc.m.Call(tc.cached, tc.total); !cmp.Equal(got, tc.want, approx) {
			t.Errorf("%s: Call(%d, %d) = %g, want %g", tc.name, tc.cached, tc.total, got, tc.want)
		}
	}
}

// A rewrite's cost under Call is the suffix after its first change times the
// premium, as the package comment says: the same call with the first 60,000 of
// 150,000 tokens cached instead of 140,000 costs 80,000 x (write - read) more.
func TestCallDifferenceIsRewritePremium(t *testing.T) {
	m := prices.MustDefault(prices.Anthropic)
	got := m.Call(60_000, 150_000) - m.Call(140_000, 150_000)
	// 80,000 x $3.45/MTok = $0.276.
	if want := 0.276; !cmp.Equal(got, want, approx) {
		t.Errorf("rewrite's extra cost = %g, want %g", got, want)
	}
}

func TestModelValidate(t *testing.T) {
	ok := prices.MustDefault(prices.Anthropic)
	with := func(f func(*prices.Model)) prices.Model { m := ok; f(&m); return m }
	for _, tc := range []struct {
		name    string
		m       prices.Model
		wantErr string // "" for valid
	}{
		{"default", ok, ""},
		// Free input (a local model) and a read priced like a write are valid.
		{"all zero", prices.Model{Provider: prices.Gemini}, ""},
		{"read equals write", with(func(m *prices.Model) { m.CacheReadPerMTok = m.CacheWritePerMTok }), ""},
		{"unknown provider", with(func(m *prices.Model) { m.Provider = "mistral" }), `provider: invalid price model: unknown provider "mistral"`},
		{"empty provider", with(func(m *prices.Model) { m.Provider = "" }), `provider: invalid price model: unknown provider ""`},
		{"negative input", with(func(m *prices.Model) { m.InputPerMTok = -1 }), "input_per_mtok = -1: want a finite price >= 0"},
		{"NaN read", with(func(m *prices.Model) { m.CacheReadPerMTok = math.NaN() }), "cache_read_per_mtok = NaN"},
		{"infinite write", with(func(m *prices.Model) { m.CacheWritePerMTok = math.Inf(1) }), "cache_write_per_mtok = +Inf"},
		{"negative long write", with(func(m *prices.Model) { m.CacheWriteLongPerMTok = -0.5 }), "cache_write_long_per_mtok = -0.5"},
		{"-Inf output", with(func(m *prices.Model) { m.OutputPerMTok = math.Inf(-1) }), "output_per_mtok = -Inf"},
		{"read above write", with(func(m *prices.Model) { m.CacheReadPerMTok = 4 }), "cache_read_per_mtok 4 above cache_write_per_mtok 3.75"},
	} {
		err := tc.m.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.wantErr != "" && (!errors.Is(err, prices.ErrPrices) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: Validate() = %v, want an ErrPrices containing %q", tc.name, err, tc.wantErr)
		}
	}
}

// A price table in a config file overrides the fields it names and keeps the other
// defaults.
func TestTableUnmarshalJSON(t *testing.T) {
	var tab prices.Table
	err := json.Unmarshal([]byte(`{"anthropic": {"cache_read_per_mtok": 0.5, "provider": "anthropic"}, "openai": {"input_per_mtok": 2, "cache_write_per_mtok": 2}}`), &tab)
	if err != nil {
		t.Fatal(err)
	}
	anthropic := prices.MustDefault(prices.Anthropic)
	anthropic.CacheReadPerMTok = 0.5
	openai := prices.MustDefault(prices.OpenAI)
	openai.InputPerMTok, openai.CacheWritePerMTok = 2, 2
	want := prices.Table{prices.Anthropic: anthropic, prices.OpenAI: openai}
	if diff := cmp.Diff(want, tab); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	// An entry left out is the default (For), not in the table.
	if m, err := tab.For(prices.Gemini); err != nil || m != prices.MustDefault(prices.Gemini) {
		t.Errorf("For(gemini) = %+v, %v; want the default", m, err)
	}
	if m, err := tab.For(prices.OpenAI); err != nil || m != openai {
		t.Errorf("For(openai) = %+v, %v; want the table's entry", m, err)
	}
	if err := tab.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	for _, tc := range []struct {
		name, in, wantErr string
		wrapsPrices       bool
	}{
		{"unknown provider", `{"mistral": {}}`, `prices: entry "mistral": invalid price model: unknown provider "mistral"`, true},
		{"unknown field", `{"openai": {"input": 2}}`, `prices: entry "openai": json: unknown field "input"`, false},
		{"wrong type", `{"gemini": {"input_per_mtok": "cheap"}}`, `prices: entry "gemini"`, false},
		{"provider other than the key", `{"openai": {"provider": "gemini"}}`, `entry "openai" holds provider "gemini"`, true},
		{"not an object", `[1]`, `prices: json: cannot unmarshal`, false},
	} {
		var got prices.Table
		err := json.Unmarshal([]byte(tc.in), &got)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.Is(err, prices.ErrPrices) != tc.wrapsPrices {
			t.Errorf("%s: error = %v, want one containing %q (wrapping ErrPrices: %v)", tc.name, err, tc.wantErr, tc.wrapsPrices)
		}
		if got != nil {
			t.Errorf("%s: table = %v after an error, want it untouched", tc.name, got)
		}
	}
}

func TestTableFor(t *testing.T) {
	var zero prices.Table // a zero table means the defaults
	for _, p := range prices.Providers() {
		if m, err := zero.For(p); err != nil || m != prices.MustDefault(p) {
			t.Errorf("zero table For(%s) = %+v, %v; want the default", p, m, err)
		}
	}
	if _, err := zero.For("mistral"); !errors.Is(err, prices.ErrPrices) {
		t.Errorf("For(mistral) error = %v, want ErrPrices", err)
	}
}

func TestTableValidate(t *testing.T) {
	bad := prices.MustDefault(prices.OpenAI)
	bad.InputPerMTok = -1
	badGemini := prices.MustDefault(prices.Gemini)
	badGemini.OutputPerMTok = math.NaN()
	for _, tc := range []struct {
		name    string
		tab     prices.Table
		wantErr string
	}{
		{"defaults", prices.DefaultTable(), ""},
		{"empty", prices.Table{}, ""},
		{"bad entry named", prices.Table{prices.OpenAI: bad}, "prices for openai: invalid price model: input_per_mtok = -1"},
		// The entries are checked in name order, so the first error is the same on
		// every run: gemini before openai.
		{"first by name", prices.Table{prices.OpenAI: bad, prices.Gemini: badGemini}, "prices for gemini:"},
		{"entry under another key", prices.Table{prices.OpenAI: prices.MustDefault(prices.Gemini)}, `entry "openai" holds provider "gemini"`},
	} {
		err := tc.tab.Validate()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%s: Validate() = %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, prices.ErrPrices) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: Validate() = %v, want an ErrPrices containing %q", tc.name, err, tc.wantErr)
		}
	}
}
