// Package wire is the one table of the wire APIs the proxy speaks (docs/DESIGN.md "Ways
// in"): for each, its routes, the request format its reader reads, the provider whose
// upstream it goes to and whose prices plan and bill it, the shape of its responses'
// usage, and the credentials a request to it may carry. The proxy (package server)
// routes and refuses by it, the advisor's prices (advisor.ProviderOf) and the ledger
// read their provider from it, and `wrap` checks its agents against it.
//
// It is a domain package of its own, below advisor and server, so that both read the
// same table: it imports transcript (the formats) and prices (the providers) and no
// net/http. Routing looks at a request through a function that says which headers
// and query parameters it carries, so the HTTP part (reading http.Header, answering
// 400) stays in server.
package wire

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// API names one wire API. Its string is the proxy's route label (metrics, the
// ledger's route, the prefix of a proxied session's id).
type API string

// The wire APIs the proxy advises.
const (
	Messages  API = "anthropic" // Anthropic Messages: POST /v1/messages
	Chat      API = "openai"    // OpenAI Chat Completions: POST /v1/chat/completions
	Responses API = "responses" // OpenAI Responses: POST /v1/responses
	Gemini    API = "gemini"    // Gemini API: POST /v1beta/models/{model}:generateContent, :streamGenerateContent
)

// Usage names the shape of an API's responses' usage, as the ledger reads it.
type Usage int

// The usage shapes.
const (
	// UsageAnthropic is Anthropic's `usage` (message_start and message_delta in a
	// stream).
	UsageAnthropic Usage = iota + 1
	// UsageChat is Chat Completions' `usage` (the last chunk of a stream).
	UsageChat
	// UsageResponses is the Responses API's `usage` (response.completed in a stream).
	UsageResponses
	// UsageGemini is Gemini's `usageMetadata` (the last chunk of a stream).
	UsageGemini
)

// Credential is one place a request carries a provider's secret: a header, or a
// query parameter.
type Credential struct {
	// Name is the header's name in its canonical form, or the query parameter's.
	Name  string
	Query bool // a query parameter, not a header
	// Provider is whose secret it is on a path no API claims. Authorization is
	// every provider's (Anthropic's OAuth, Google's OAuth and Vertex send it too):
	// on a claimed path it belongs to the path's provider when the path's API
	// accepts it (Spec.Accepts), and elsewhere to the provider a version header
	// names (Spec.Version), else to OpenAI.
	Provider prices.Provider
}

// String names the credential as a message shows it: the header's name, or
// "key= query parameter"; never its value.
func (c Credential) String() string {
	if c.Query {
		return c.Name + "= query parameter"
	}
	return c.Name
}

// The credentials routing knows.
var (
	// AnthropicKey is Anthropic's API key header.
	AnthropicKey = Credential{Name: "X-Api-Key", Provider: prices.Anthropic}
	// GoogleKey is the Gemini API's key header (Gemini CLI with an API key sends it).
	GoogleKey = Credential{Name: "X-Goog-Api-Key", Provider: prices.Gemini}
	// GoogleQueryKey is the Gemini API's key as a query parameter.
	GoogleQueryKey = Credential{Name: "key", Query: true, Provider: prices.Gemini}
	// Authorization is a bearer token: OpenAI's API key, or an OAuth token of any
	// provider.
	Authorization = Credential{Name: "Authorization", Provider: prices.OpenAI}
)

// credentials is every credential routing looks for.
var credentials = [...]Credential{AnthropicKey, GoogleKey, GoogleQueryKey, Authorization}

// Credentials returns every credential routing looks for, in a stable order.
func Credentials() []Credential { return append([]Credential(nil), credentials[:]...) }

// Spec is one wire API's row of the table.
type Spec struct {
	API API
	// Path is the advised route's path: exact, or, with Calls, the prefix of a model
	// path Path{model}:{call}. Only POST is advised.
	Path  string
	Calls []string
	// Family is the path under which every request belongs to the API's provider
	// (itself and everything below it): advised, or passed through untouched.
	Family string
	// Format is the transcript reader of its request bodies.
	Format transcript.Format
	// Provider is the upstream it goes to and whose prices plan and bill it.
	Provider prices.Provider
	// Usage is the shape of its responses' usage.
	Usage Usage
	// Accepts lists the credentials a request on its Family may carry; any other is
	// refused (another provider's secret).
	Accepts []Credential
	// Version is a header that makes a request on a path no API claims this API's
	// provider's (and its Authorization that provider's credential); "" for none.
	Version string
}

// table is the one list of the wire APIs, the first of each provider its default
// (the API whose error shape answers a request routed to it by credential alone).
var table = []Spec{
	{API: Messages, Path: "/v1/messages", Family: "/v1/messages", Format: transcript.FormatAnthropic,
		Provider: prices.Anthropic, Usage: UsageAnthropic, Accepts: []Credential{AnthropicKey, Authorization},
		Version: "Anthropic-Version"},
	{API: Chat, Path: "/v1/chat/completions", Family: "/v1/chat/completions", Format: transcript.FormatOpenAI,
		Provider: prices.OpenAI, Usage: UsageChat, Accepts: []Credential{Authorization}},
	{API: Responses, Path: "/v1/responses", Family: "/v1/responses", Format: transcript.FormatResponses,
		Provider: prices.OpenAI, Usage: UsageResponses, Accepts: []Credential{Authorization}},
	{API: Gemini, Path: "/v1beta/models/", Calls: []string{"generateContent", "streamGenerateContent"}, Family: "/v1beta",
		Format: transcript.FormatGeminiAPI, Provider: prices.Gemini, Usage: UsageGemini,
		Accepts: []Credential{GoogleKey, GoogleQueryKey, Authorization}},
}

// fallback is the API of a request on a path no API claims that carries neither a
// credential nor a version header (the OpenAI upstream, as for its model listing).
const fallback = Chat

// Specs returns the table, in a stable order.
func Specs() []Spec {
	out := make([]Spec, len(table))
	copy(out, table)
	return out
}

// Lookup returns api's row; false for an API not in the table.
func Lookup(api API) (Spec, bool) {
	for _, s := range table {
		if s.API == api {
			return s, true
		}
	}
	return Spec{}, false
}

// MustLookup is Lookup for one of this package's API constants; it panics on any
// other (a programming error, never input).
func MustLookup(api API) Spec {
	s, ok := Lookup(api)
	if !ok {
		panic(fmt.Sprintf("wire: unknown API %q", api))
	}
	return s
}

// DefaultAPI returns the provider's default API (its first row).
func DefaultAPI(p prices.Provider) (Spec, bool) {
	for _, s := range table {
		if s.Provider == p {
			return s, true
		}
	}
	return Spec{}, false
}

// Advised reports whether a request of method to path is one the API advises: a
// POST to its Path (to Path{model}:{call} for one of Calls).
func (s Spec) Advised(method, path string) bool {
	if method != "POST" {
		return false
	}
	if len(s.Calls) == 0 {
		return path == s.Path
	}
	rest, ok := strings.CutPrefix(path, s.Path)
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 || strings.Contains(rest[:i], "/") {
		return false
	}
	for _, c := range s.Calls {
		if rest[i+1:] == c {
			return true
		}
	}
	return false
}

// Claims reports whether path is in the API's Family.
func (s Spec) Claims(path string) bool {
	return path == s.Family || strings.HasPrefix(path, s.Family+"/")
}

// accepts reports whether the API's routes take c.
func (s Spec) accepts(c Credential) bool {
	for _, a := range s.Accepts {
		if a == c {
			return true
		}
	}
	return false
}

// formats gives the provider of the session file formats no API reads: Codex
// rollouts and the trajectories recorded in Chat Completions' shape are OpenAI's,
// Gemini CLI sessions Gemini's, Claude Code's Anthropic's; pi records several
// providers and is priced as Anthropic, the provider of its default model.
var formats = map[transcript.Format]prices.Provider{
	transcript.FormatClaudeCode:   prices.Anthropic,
	transcript.FormatPi:           prices.Anthropic,
	transcript.FormatCodex:        prices.OpenAI,
	transcript.FormatMiniSWEAgent: prices.OpenAI,
	transcript.FormatSWEAgent:     prices.OpenAI,
	transcript.FormatOpenHands:    prices.OpenAI,
	transcript.FormatGemini:       prices.Gemini,
}

// ProviderOf returns the provider whose prices apply to a session of format f: the
// provider of the API whose request bodies f is, else that of the session file
// format; Anthropic for a format it does not know.
func ProviderOf(f transcript.Format) prices.Provider {
	for _, s := range table {
		if s.Format == f {
			return s.Provider
		}
	}
	if p, ok := formats[f]; ok {
		return p
	}
	return prices.Anthropic
}

// Routing errors. Both name the credentials and the route, never a value.
var (
	// ErrTwoProviders means a request carries credentials of two providers.
	ErrTwoProviders = errors.New("credentials of two providers")
	// ErrWrongRoute means a request carries a credential of another provider than
	// its path's (or its version header's).
	ErrWrongRoute = errors.New("a credential of another provider than the route's")
)

// Routing is where a request goes: to Spec.Provider's upstream.
type Routing struct {
	// Spec is the API that answers it: its path's, else the default API of the
	// provider its credential or version header names, else the fallback's. On an
	// error it is still set (the shape the refusal is written in).
	Spec Spec
	// Claimed reports that the path is in Spec's Family; false for a path no API
	// claims, routed by what it carries.
	Claimed bool
}

// Route decides where a request to path (a /v1/ or /v1beta/ path of the proxy; the
// sidecar's own routes are not routed) goes, by what it carries: has reports
// whether it carries a non-empty header (query false; a name in canonical form) or
// query parameter (query true).
//
//   - A path an API claims (its Family) goes to that API's provider; a credential
//     the API does not accept (another provider's) is refused with ErrWrongRoute.
//   - Any other path goes by its credentials: X-Api-Key Anthropic, X-Goog-Api-Key or
//     key= Gemini, Authorization OpenAI, unless a version header (Anthropic-Version)
//     names the provider, which then takes the request and its Authorization; a
//     credential of another provider than the version header's is refused with
//     ErrWrongRoute, credentials of two providers with ErrTwoProviders.
//   - Without credentials, the version header's provider, else OpenAI's.
func Route(path string, has func(name string, query bool) bool) (Routing, error) {
	var buf [len(credentials)]Credential
	carried := buf[:0]
	for _, c := range credentials {
		if has(c.Name, c.Query) {
			carried = append(carried, c)
		}
	}
	for _, s := range table {
		if !s.Claims(path) {
			continue
		}
		r := Routing{Spec: s, Claimed: true}
		for _, c := range carried {
			if !s.accepts(c) {
				return r, fmt.Errorf("%w: %s is %s's, and path %q is %s's; not forwarded", ErrWrongRoute, c, c.Provider, textcut.BytesDots(path, 100), s.Provider)
			}
		}
		return r, nil
	}
	var version *Spec
	for i, s := range table {
		if s.Version != "" && has(s.Version, false) {
			version = &table[i]
			break
		}
	}
	return routeByHeaders(version, carried)
}

// routeByHeaders routes a path no API claims (Route's other cases) by the
// credentials carried and the API whose version header it carries (nil: none).
func routeByHeaders(version *Spec, carried []Credential) (Routing, error) {
	// providerOf is whose secret c is on this path: its own provider's, or the
	// version header's when that API takes it (Authorization beside
	// Anthropic-Version).
	providerOf := func(c Credential) prices.Provider {
		if version != nil && version.accepts(c) {
			return version.Provider
		}
		return c.Provider
	}
	// names lists the credentials carried with their providers, for a message.
	names := func() string {
		var out []string
		for _, c := range carried {
			out = append(out, fmt.Sprintf("%s (%s)", c, providerOf(c)))
		}
		return strings.Join(out, ", ")
	}
	var owner prices.Provider
	for _, c := range carried {
		p := providerOf(c)
		if owner != "" && owner != p {
			s, _ := DefaultAPI(owner)
			return Routing{Spec: s}, fmt.Errorf("%w: %s; send one provider's only; not forwarded", ErrTwoProviders, names())
		}
		owner = p
	}
	switch {
	case owner != "" && version != nil && owner != version.Provider:
		return Routing{Spec: *version}, fmt.Errorf("%w: %s, and the %s header is %s's; not forwarded", ErrWrongRoute, names(), version.Version, version.Provider)
	case owner != "":
		s, _ := DefaultAPI(owner)
		return Routing{Spec: s}, nil
	case version != nil:
		return Routing{Spec: *version}, nil
	}
	return Routing{Spec: MustLookup(fallback)}, nil
}
