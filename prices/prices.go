// Package prices is the price model the planner, replay, calibrate and the proxy's
// ledger share (docs/DESIGN.md defaults table, "price model"): what one token of input
// costs when it is read from the provider's prompt cache, when it is written to it,
// and when it is sent uncached, per provider. Prices are US dollars per million
// tokens (MTok).
//
// Under a prompt cache every call pays, for the part of the context that matches the
// previous call's bytes up to a cache breakpoint, the cache-read price, and for the
// rest (new messages, and everything after the first changed message after a rewrite)
// the cache-write price. So a rewrite costs the suffix after its first changed message
// times (write - read), and saves the tokens it removes times read, at every later
// call (docs/DESIGN.md step 6).
package prices

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// ErrPrices wraps every invalid price, provider or TTL.
var ErrPrices = errors.New("invalid price model")

// Provider names a model provider whose caching rules and prices apply.
type Provider string

// The providers with a default price table.
const (
	Anthropic Provider = "anthropic" // Messages API, explicit cache_control breakpoints
	OpenAI    Provider = "openai"    // Chat Completions and Responses, automatic prefix caching
	Gemini    Provider = "gemini"    // generateContent, implicit caching
)

// Providers lists the known providers in a stable order.
func Providers() []Provider { return []Provider{Anthropic, OpenAI, Gemini} }

// ParseProvider returns the provider named s (case-insensitive); the error wraps
// ErrPrices and lists the known names.
func ParseProvider(s string) (Provider, error) {
	p := Provider(strings.ToLower(strings.TrimSpace(s)))
	for _, k := range Providers() {
		if p == k {
			return p, nil
		}
	}
	names := make([]string, 0, 3)
	for _, k := range Providers() {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("%w: unknown provider %q (known: %s)", ErrPrices, s, strings.Join(names, ", "))
}

// Model is one provider's prices, US dollars per million tokens.
type Model struct {
	Provider Provider `json:"provider"`
	// InputPerMTok is uncached input (a cache miss with no write premium).
	InputPerMTok float64 `json:"input_per_mtok"`
	// CacheReadPerMTok is input read from the prompt cache.
	CacheReadPerMTok float64 `json:"cache_read_per_mtok"`
	// CacheWritePerMTok is input written to the cache with the default (short) TTL:
	// the price every uncached token of a cached request pays. Providers without a
	// write premium (OpenAI, Gemini's implicit caching) charge the input price.
	CacheWritePerMTok float64 `json:"cache_write_per_mtok"`
	// CacheWriteLongPerMTok is the write price for the long TTL (Anthropic's 1-hour
	// breakpoints); equal to CacheWritePerMTok where there is no such TTL.
	CacheWriteLongPerMTok float64 `json:"cache_write_long_per_mtok"`
	// OutputPerMTok is generated tokens; pruning does not change them, so reports use
	// it only for the cost of a recall's extra turn.
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// LongTTL is the cache lifetime of Anthropic's long breakpoints (`"ttl": "1h"`):
// tokens written under it cost CacheWriteLongPerMTok. The short TTL, 5 minutes for
// every provider here, is the advisor's Config.CacheTTL.
const LongTTL = time.Hour

// Default returns the default prices of p, each from the provider's published list
// price (checked 2026-12; override with flags or config when yours differ):
//
//   - Anthropic, Claude Sonnet 4.x (https://docs.anthropic.com/en/docs/about-claude/pricing):
//     input $3.00, cache read 0.1x ($0.30), cache write 1.25x ($3.75) for the
//     5-minute TTL and 2x ($6.00) for the 1-hour TTL, output $15.00.
//   - OpenAI, GPT-5 (https://openai.com/api/pricing): input $1.25, cached input 0.1x
//     ($0.125), no write premium (an uncached token costs the input price), output
//     $10.00. OpenAI keeps prompt caches 5-10 minutes of inactivity.
//   - Gemini, Gemini 2.5 Pro at prompts <= 200k tokens
//     (https://ai.google.dev/gemini-api/docs/pricing): input $1.25, implicitly cached
//     input 0.1x ($0.125), no write premium, output $10.00 (implicit caches are
//     evicted on the provider's schedule).
func Default(p Provider) (Model, error) {
	switch p {
	case Anthropic:
		return Model{Provider: p, InputPerMTok: 3, CacheReadPerMTok: 0.30, CacheWritePerMTok: 3.75,
			CacheWriteLongPerMTok: 6, OutputPerMTok: 15}, nil
	case OpenAI:
		return Model{Provider: p, InputPerMTok: 1.25, CacheReadPerMTok: 0.125, CacheWritePerMTok: 1.25,
			CacheWriteLongPerMTok: 1.25, OutputPerMTok: 10}, nil
	case Gemini:
		return Model{Provider: p, InputPerMTok: 1.25, CacheReadPerMTok: 0.125, CacheWritePerMTok: 1.25,
			CacheWriteLongPerMTok: 1.25, OutputPerMTok: 10}, nil
	}
	_, err := ParseProvider(string(p))
	return Model{}, err
}

// MustDefault is Default for a provider constant of this package; it panics on an
// unknown provider (a programming error, never input).
func MustDefault(p Provider) Model {
	m, err := Default(p)
	if err != nil {
		panic(err)
	}
	return m
}

// Validate checks that every price is finite and >= 0, that a cache read costs no
// more than a cache write, and that the provider is known.
// The error wraps ErrPrices and names the field by its JSON key.
func (m Model) Validate() error {
	if _, err := ParseProvider(string(m.Provider)); err != nil {
		return fmt.Errorf("provider: %w", err)
	}
	fields := []struct {
		name string
		v    float64
	}{
		{"input_per_mtok", m.InputPerMTok}, {"cache_read_per_mtok", m.CacheReadPerMTok},
		{"cache_write_per_mtok", m.CacheWritePerMTok}, {"cache_write_long_per_mtok", m.CacheWriteLongPerMTok},
		{"output_per_mtok", m.OutputPerMTok},
	}
	for _, f := range fields {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("%w: %s = %v: want a finite price >= 0", ErrPrices, f.name, f.v)
		}
	}
	switch {
	case m.CacheReadPerMTok > m.CacheWritePerMTok:
		return fmt.Errorf("%w: cache_read_per_mtok %v above cache_write_per_mtok %v", ErrPrices, m.CacheReadPerMTok, m.CacheWritePerMTok)
	}
	return nil
}

// Read is the price of one token read from the cache, in dollars.
func (m Model) Read() float64 { return m.CacheReadPerMTok / 1e6 }

// Write is the price of one token written to the cache with the short TTL (or sent
// uncached where the provider has no write premium), in dollars.
func (m Model) Write() float64 { return m.CacheWritePerMTok / 1e6 }

// WriteFor is the write price of one token for a breakpoint with the given TTL: the
// long-TTL price when ttl reaches LongTTL (Anthropic's "1h"), else Write.
func (m Model) WriteFor(ttl time.Duration) float64 {
	if ttl >= LongTTL {
		return m.CacheWriteLongPerMTok / 1e6
	}
	return m.Write()
}

// Input is the price of one uncached input token, in dollars.
func (m Model) Input() float64 { return m.InputPerMTok / 1e6 }

// Output is the price of one generated token, in dollars.
func (m Model) Output() float64 { return m.OutputPerMTok / 1e6 }

// RewritePremium is what one token after a rewrite's first changed message costs
// beyond a cache read: Write - Read, in dollars (docs/DESIGN.md step 6).
func (m Model) RewritePremium() float64 { return m.Write() - m.Read() }

// Table holds the price model of every provider; a zero Table means the defaults.
type Table map[Provider]Model

// UnmarshalJSON reads a table keyed by provider name ({"anthropic": {...}}). Each
// entry is read over that provider's Default, so the fields it omits keep their
// defaults and "provider" may be left out; errors name the entry: an unknown
// provider (wrapping ErrPrices), an unknown field, a value of the wrong type, or a
// "provider" other than the key. Values are checked by Validate, not here.
func (t *Table) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("prices: %w", err)
	}
	out := make(Table, len(raw))
	for k, v := range raw {
		m, err := Default(Provider(k))
		if err != nil {
			return fmt.Errorf("prices: entry %q: %w", k, err)
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return fmt.Errorf("prices: entry %q: %w", k, err)
		}
		if m.Provider != Provider(k) {
			return fmt.Errorf("%w: entry %q holds provider %q", ErrPrices, k, m.Provider)
		}
		out[Provider(k)] = m
	}
	*t = out
	return nil
}

// DefaultTable returns Default for every provider.
func DefaultTable() Table {
	t := Table{}
	for _, p := range Providers() {
		t[p] = MustDefault(p)
	}
	return t
}

// For returns the model of p: the table's entry, else the default. The error wraps
// ErrPrices for an unknown provider.
func (t Table) For(p Provider) (Model, error) {
	if m, ok := t[p]; ok {
		return m, nil
	}
	return Default(p)
}

// Validate validates every entry (errors name the provider).
func (t Table) Validate() error {
	keys := make([]string, 0, len(t))
	for p := range t {
		keys = append(keys, string(p))
	}
	sort.Strings(keys)
	for _, k := range keys {
		m := t[Provider(k)]
		if m.Provider != Provider(k) {
			return fmt.Errorf("%w: entry %q holds provider %q", ErrPrices, k, m.Provider)
		}
		if err := m.Validate(); err != nil {
			return fmt.Errorf("prices for %s: %w", k, err)
		}
	}
	return nil
}

// Call returns the input cost, in dollars, of one call that sends total tokens of
// which the first cached are read from the prompt cache (0 on a cold cache): cached x
// Read + (total - cached) x Write. Tokens past total or below 0 are clamped.
func (m Model) Call(cached, total int) float64 {
	cached = min(max(cached, 0), max(total, 0))
	return float64(cached)*m.Read() + float64(max(total, 0)-cached)*m.Write()
}
