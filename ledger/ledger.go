// Package ledger is what each proxied model call really cost (docs/DESIGN.md "ledger"):
// the token counts the provider reported in its response's own `usage`, priced
// under the price model of package prices, beside an estimate of what the same
// call would have cost had nothing been pruned (keep-all).
//
// The proxy (package server) reads the usage and fills in an Entry per upstream
// response; storage keeps the entries; `pruneadvisor ledger` sums them per
// session. This package holds only the arithmetic: the estimate (KeepAll) and the
// sums (Totals), so that every reader prices the same way.
package ledger

import (
	"time"

	"github.com/pruneadvisor/pruneadvisor/prices"
)

// Usage is the token counts of one model call as its provider reported them, in
// the provider's own tokens. The four input kinds are disjoint; their sum is the
// prompt (Prompt).
type Usage struct {
	// Input is input the call paid at the plain input price: neither read from nor
	// written to the prompt cache (Anthropic `input_tokens`; for OpenAI and Gemini,
	// which have no write premium, the prompt minus its cached part).
	Input int `json:"input_tokens"`
	// CacheRead is input read from the prompt cache (Anthropic
	// `cache_read_input_tokens`, OpenAI `cached_tokens`, Gemini
	// `cachedContentTokenCount`).
	CacheRead int `json:"cache_read_tokens"`
	// CacheWrite5m and CacheWrite1h are input written to the cache under the short
	// (5-minute) and the long (1-hour) TTL: Anthropic's `cache_creation_input_tokens`,
	// split by `cache_creation.ephemeral_5m_input_tokens` and
	// `ephemeral_1h_input_tokens` (all of it 5-minute when the response does not give
	// the split). Always 0 for OpenAI and Gemini.
	CacheWrite5m int `json:"cache_write_5m_tokens"`
	CacheWrite1h int `json:"cache_write_1h_tokens"`
	// Output is generated tokens, reasoning ("thinking") tokens included.
	Output int `json:"output_tokens"`
}

// Prompt is the whole input of the call, in tokens: Input + CacheRead + the writes.
func (u Usage) Prompt() int { return u.Input + u.CacheRead + u.CacheWrite5m + u.CacheWrite1h }

// Written is the input written to the cache, in tokens (both TTLs).
func (u Usage) Written() int { return u.CacheWrite5m + u.CacheWrite1h }

// Add returns the sum of u and v, kind by kind.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Input: u.Input + v.Input, CacheRead: u.CacheRead + v.CacheRead,
		CacheWrite5m: u.CacheWrite5m + v.CacheWrite5m, CacheWrite1h: u.CacheWrite1h + v.CacheWrite1h,
		Output: u.Output + v.Output,
	}
}

// Cost is what the call cost under m, in dollars: Input at the input price,
// CacheRead at the cache-read price, CacheWrite5m at the (short-TTL) write price,
// CacheWrite1h at the long-TTL write price, Output at the output price.
func (u Usage) Cost(m prices.Model) float64 {
	return float64(u.Input)*m.Input() + float64(u.CacheRead)*m.Read() +
		float64(u.CacheWrite5m)*m.Write() + float64(u.CacheWrite1h)*m.WriteFor(prices.LongTTL) +
		float64(u.Output)*m.Output()
}

// Result is what the proxy found in one upstream response.
type Result string

// The results an Entry can have.
const (
	// ResultOK: the response carried a readable usage.
	ResultOK Result = "ok"
	// ResultNone: a successful response without usage (an OpenAI stream whose
	// request did not ask for stream_options.include_usage, a stream cut before
	// its usage event, a body that is not the API's JSON). Nothing is guessed: the
	// entry's tokens and dollars are 0.
	ResultNone Result = "none"
	// ResultMalformed: the response had a usage the proxy could not read (a count
	// that is not a non-negative integer, a required count missing, a cached part
	// larger than the prompt). Counted, tokens and dollars 0; the response was
	// forwarded untouched all the same.
	ResultMalformed Result = "malformed"
	// ResultError: the upstream answered with an HTTP error status (4xx, 5xx) and
	// no usage; providers do not bill such calls.
	ResultError Result = "error"
)

// Results lists every Result in a stable order.
func Results() []Result { return []Result{ResultOK, ResultNone, ResultMalformed, ResultError} }

// Request is one proxied request as the advisor sent it: what the estimate needs
// of its plan. The token counts are the advisor's (o200k_base), not the
// provider's.
type Request struct {
	// Advised is false when the request went out without a plan (advising failed
	// and the request was forwarded unchanged, or the body could not be read): the
	// call is then its own keep-all.
	Advised bool
	// Context is the request's context as sent (applied stubs in), Full the same
	// with nothing pruned.
	Context, Full int
	// PrevFull is Full of the session's previous request, when PrevKnown; Full -
	// PrevFull is what the agent added since (new messages, which keep-all writes to
	// the cache as well).
	PrevFull  int
	PrevKnown bool
	// Rewrite is the planner's reason when this request applied new stubs
	// ("cold-cache", "over-budget", "hard-limit", "pays"), "" otherwise; Cold says
	// the advisor found the prompt cache cold before it.
	Rewrite string
	Cold    bool
	// Window is the model's context window in tokens (0: unknown, no cap). A
	// request whose unpruned context (Full) passes it could not have been sent with
	// nothing pruned: keep-all is counted at most a window's worth of context, so
	// that no saving is claimed for tokens the provider would have refused.
	Window int
}

// Estimate is KeepAll's answer.
type Estimate struct {
	// KeepAllUSD is what the same call would have cost with nothing pruned, in
	// dollars (output included, at the same count).
	KeepAllUSD float64
	// Removed is the tokens the applied stubs kept out of this request (Full -
	// Context), in the advisor's tokens.
	Removed int
	// RewriteTokens is the part of the call's cache writes attributed to the
	// rewrite this request carried (0 without one), in the provider's tokens, and
	// RewriteUSD what they cost beyond a cache read: the rewrite's price as paid.
	RewriteTokens int
	RewriteUSD    float64
}

// KeepAll estimates what the call whose usage is u would have cost under m had
// nothing been pruned, from the advisor's plan for it. The call as sent is known
// exactly (u); keep-all differs from it in two ways only:
//
//  1. It sends Removed = Full - Context tokens more: the originals the applied
//     stubs replace. They are old content, so they sit where the call's old
//     content sat: on a warm cache keep-all reads them (cache-read price);
//     otherwise (a first call, an expired cache, a prompt the provider did not
//     cache) keep-all writes them as the call wrote its prompt (the 5m/1h split of
//     u's writes; at the input price when u wrote nothing). The cache is warm when
//     the advisor did not find it cold (p.Cold false) and either the call read
//     from it (u.CacheRead > 0) or the request carried a rewrite (a rewrite that
//     changes the first message leaves nothing to read, where keep-all would have
//     read its whole previous request).
//  2. At a request that carried a rewrite on a warm cache (p.Rewrite set), the call
//     wrote again everything after the first changed message. Keep-all would have
//     written only what the agent added since its previous request, New = Full -
//     PrevFull (0 when PrevFull is unknown: then every write of the call is the
//     rewrite's, which overstates its cost, never its saving). So RewriteTokens =
//     max(W - New, 0) of the call's writes W are the rewrite's, and keep-all reads
//     them instead. W is the cache writes (both TTLs, in proportion), or, for a
//     call that wrote nothing (OpenAI and Gemini, which have no write premium), its
//     uncached input.
//
// Output is the same in both. Removed and New are the advisor's o200k_base
// counts while u is in the provider's tokens: the estimate inherits the
// difference between the two tokenizers on the removed text. Keep-all is assumed
// to get every read a warm cache allows, also where the provider would not cache
// at all (OpenAI caches prompts of 1,024 tokens and more): that overstates the
// cost of rewrites on small prompts, never a saving. With p.Advised false the call
// is its own keep-all.
func KeepAll(u Usage, m prices.Model, p Request) Estimate {
	var e Estimate
	if p.Advised {
		full := p.Full
		if p.Window > 0 {
			full = min(full, max(p.Window, p.Context))
		}
		e.Removed = max(full-p.Context, 0)
	}
	ka := u
	rewrite := p.Advised && p.Rewrite != ""
	warm := !p.Cold && (u.CacheRead > 0 || rewrite)
	if warm && rewrite {
		added := 0
		if p.PrevKnown {
			added = max(p.Full-p.PrevFull, 0)
		}
		asWritten := u
		if u.Written() > 0 {
			e.RewriteTokens = max(u.Written()-added, 0)
			long := e.RewriteTokens * u.CacheWrite1h / u.Written()
			asWritten.CacheWrite1h -= long
			asWritten.CacheWrite5m -= e.RewriteTokens - long
		} else {
			e.RewriteTokens = max(u.Input-added, 0)
			asWritten.Input -= e.RewriteTokens
		}
		asWritten.CacheRead += e.RewriteTokens
		e.RewriteUSD = u.Cost(m) - asWritten.Cost(m)
		ka = asWritten
	}
	switch {
	case warm:
		ka.CacheRead += e.Removed
	case u.Written() > 0:
		long := e.Removed * u.CacheWrite1h / u.Written()
		ka.CacheWrite1h += long
		ka.CacheWrite5m += e.Removed - long
	default:
		ka.Input += e.Removed
	}
	e.KeepAllUSD = ka.Cost(m)
	return e
}

// Entry is one upstream response of a proxied model call: the ledger's row.
type Entry struct {
	// SessionID is the session the request belonged to ("" when the proxy could not
	// tell: a body it could not read, without an X-Pruneadvisor-Session header).
	SessionID string `json:"session_id"`
	// Step is the advisor's step for the request (0 when not advised).
	Step int       `json:"step"`
	At   time.Time `json:"at"` // when the request reached the proxy
	// Route is the proxy route ("anthropic", "openai"), Provider the price model's.
	Route    string          `json:"route"`
	Provider prices.Provider `json:"provider"`
	// Model is the model the response names ("" when it names none).
	Model  string `json:"model"`
	Status int    `json:"status"` // the upstream's HTTP status
	Stream bool   `json:"stream"` // a server-sent event stream
	Result Result `json:"result"`
	// Note says what was odd: why there is no usage or why it is malformed, or that
	// a stream was cut short ("" when nothing was).
	Note  string `json:"note,omitempty"`
	Usage Usage  `json:"usage"`
	// The advisor's plan for the request (see Request): whether there was one, the
	// context as sent and unpruned (o200k_base tokens), the rewrite reason and
	// whether the cache was cold, and the planner's price of the rewrite.
	Advised           bool    `json:"advised"`
	ContextTokens     int     `json:"context_tokens"`
	FullTokens        int     `json:"full_tokens"`
	Rewrite           string  `json:"rewrite,omitempty"`
	Cold              bool    `json:"cold,omitempty"`
	PlannedRewriteUSD float64 `json:"planned_rewrite_usd,omitempty"`
	// PaidUSD is Usage.Cost, KeepAllUSD, RemovedTokens, RewriteTokens and
	// RewriteUSD are KeepAll's Estimate; all 0 unless Result is ResultOK.
	PaidUSD       float64 `json:"paid_usd"`
	KeepAllUSD    float64 `json:"keep_all_usd"`
	RemovedTokens int     `json:"removed_tokens"`
	RewriteTokens int     `json:"rewrite_tokens"`
	RewriteUSD    float64 `json:"rewrite_usd"`
}

// Totals sums entries (one session's, or all of them).
type Totals struct {
	Requests int `json:"requests"` // entries
	// WithUsage, NoUsage, Malformed and UpstreamErrors count the entries by Result
	// (ok, none, malformed, error).
	WithUsage      int `json:"with_usage"`
	NoUsage        int `json:"no_usage"`
	Malformed      int `json:"malformed"`
	UpstreamErrors int `json:"upstream_errors"`
	// Usage sums the entries' tokens, kind by kind.
	Usage Usage `json:"usage"`
	// PaidUSD and KeepAllUSD sum the entries' dollars; SavedUSD is KeepAllUSD -
	// PaidUSD (positive: cheaper than doing nothing).
	PaidUSD    float64 `json:"paid_usd"`
	KeepAllUSD float64 `json:"keep_all_usd"`
	SavedUSD   float64 `json:"saved_usd"`
	// RemovedTokens sums the tokens the stubs kept out of the requests (advisor
	// tokens): token-steps saved as paid for.
	RemovedTokens int `json:"removed_tokens"`
	// Rewrites counts the requests that carried a rewrite; RewriteTokens and
	// RewriteUSD sum the cache writes attributed to them and their price beyond a
	// cache read; PlannedRewriteUSD what the planner priced them at beforehand.
	Rewrites          int     `json:"rewrites"`
	RewriteTokens     int     `json:"rewrite_tokens"`
	RewriteUSD        float64 `json:"rewrite_usd"`
	PlannedRewriteUSD float64 `json:"planned_rewrite_usd"`
	// Recalls counts the recalls of the session's pruned outputs (HTTP, MCP and
	// CLI alike, from the store's recall events).
	Recalls int `json:"recalls"`
}

// Add adds e to t (Recalls excepted: they are not entries).
func (t *Totals) Add(e Entry) {
	t.Requests++
	switch e.Result {
	case ResultOK:
		t.WithUsage++
	case ResultNone:
		t.NoUsage++
	case ResultMalformed:
		t.Malformed++
	case ResultError:
		t.UpstreamErrors++
	}
	t.Usage = t.Usage.Add(e.Usage)
	t.PaidUSD += e.PaidUSD
	t.KeepAllUSD += e.KeepAllUSD
	t.SavedUSD = t.KeepAllUSD - t.PaidUSD
	t.RemovedTokens += e.RemovedTokens
	if e.Rewrite != "" {
		t.Rewrites++
	}
	t.RewriteTokens += e.RewriteTokens
	t.RewriteUSD += e.RewriteUSD
	t.PlannedRewriteUSD += e.PlannedRewriteUSD
}

// Merge adds the totals u to t, recalls included.
func (t *Totals) Merge(u Totals) {
	t.Requests += u.Requests
	t.WithUsage += u.WithUsage
	t.NoUsage += u.NoUsage
	t.Malformed += u.Malformed
	t.UpstreamErrors += u.UpstreamErrors
	t.Usage = t.Usage.Add(u.Usage)
	t.PaidUSD += u.PaidUSD
	t.KeepAllUSD += u.KeepAllUSD
	t.SavedUSD = t.KeepAllUSD - t.PaidUSD
	t.RemovedTokens += u.RemovedTokens
	t.Rewrites += u.Rewrites
	t.RewriteTokens += u.RewriteTokens
	t.RewriteUSD += u.RewriteUSD
	t.PlannedRewriteUSD += u.PlannedRewriteUSD
	t.Recalls += u.Recalls
}

// SessionTotals is one session's totals.
type SessionTotals struct {
	SessionID string    `json:"session_id"`
	First     time.Time `json:"first"` // the earliest At of its entries
	Last      time.Time `json:"last"`  // the latest At of its entries
	Totals
}

// Sum returns the totals of sessions, merged in order (what `ledger` prints as
// its total row, and serve's /ui/ shows).
func Sum(sessions []SessionTotals) Totals {
	var t Totals
	for _, s := range sessions {
		t.Merge(s.Totals)
	}
	return t
}
