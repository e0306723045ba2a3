package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/transcript"
	"github.com/pruneadvisor/pruneadvisor/wire"
)

// Every API's row against its provider, written out here rather than read from the
// table: the advised route, the reader, the provider and the usage shape.
func TestTable(t *testing.T) {
	type row struct {
		Path     string
		Advised  string // a request the API advises
		Format   transcript.Format
		Provider prices.Provider
		Usage    wire.Usage
	}
	want := map[wire.API]row{
		wire.Messages:  {"/v1/messages", "/v1/messages", transcript.FormatAnthropic, prices.Anthropic, wire.UsageAnthropic},
		wire.Chat:      {"/v1/chat/completions", "/v1/chat/completions", transcript.FormatOpenAI, prices.OpenAI, wire.UsageChat},
		wire.Responses: {"/v1/responses", "/v1/responses", transcript.FormatResponses, prices.OpenAI, wire.UsageResponses},
		wire.Gemini:    {"/v1beta/models/", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", transcript.FormatGeminiAPI, prices.Gemini, wire.UsageGemini},
	}
	got := map[wire.API]row{}
	for _, s := range wire.Specs() {
		adv := ""
		for _, p := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"} {
			if s.Advised("POST", p) {
				if adv != "" {
					t.Errorf("%s advises %s and %s", s.API, adv, p)
				}
				adv = p
			}
			if s.Advised("GET", p) {
				t.Errorf("%s advises GET %s", s.API, p)
			}
		}
		got[s.API] = row{s.Path, adv, s.Format, s.Provider, s.Usage}
		if !s.Claims(s.Path) && !s.Claims(strings.TrimSuffix(s.Path, "/")) {
			t.Errorf("%s: its family %s does not hold its route %s", s.API, s.Family, s.Path)
		}
		if l, ok := wire.Lookup(s.API); !ok || l.API != s.API {
			t.Errorf("Lookup(%s) = %v, %v", s.API, l.API, ok)
		}
		if p := wire.ProviderOf(s.Format); p != s.Provider {
			t.Errorf("ProviderOf(%s) = %s; its API %s goes to %s", s.Format, p, s.API, s.Provider)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	gemini := wire.MustLookup(wire.Gemini)
	for path, advised := range map[string]bool{
		"/v1beta/models/gemini-2.5-pro:generateContent": true,
		"/v1beta/models/gemini-2.5-pro:countTokens":     false,
		"/v1beta/models/a/b:generateContent":            false,
		"/v1beta/models/:generateContent":               false,
		"/v1beta/models":                                false,
	} {
		if got := gemini.Advised("POST", path); got != advised {
			t.Errorf("Gemini advises %s: %v; want %v", path, got, advised)
		}
	}
	for _, p := range prices.Providers() {
		s, ok := wire.DefaultAPI(p)
		if !ok || s.Provider != p {
			t.Errorf("DefaultAPI(%s) = %s, %v", p, s.API, ok)
		}
	}
}

// Every format the transcript package reads is priced as its provider.
func TestProviderOf(t *testing.T) {
	want := map[transcript.Format]prices.Provider{
		transcript.FormatClaudeCode:   prices.Anthropic,
		transcript.FormatPi:           prices.Anthropic,
		transcript.FormatCodex:        prices.OpenAI,
		transcript.FormatGemini:       prices.Gemini,
		transcript.FormatOpenAI:       prices.OpenAI,
		transcript.FormatMiniSWEAgent: prices.OpenAI,
		transcript.FormatSWEAgent:     prices.OpenAI,
		transcript.FormatOpenHands:    prices.OpenAI,
		transcript.FormatAnthropic:    prices.Anthropic,
		transcript.FormatResponses:    prices.OpenAI,
		transcript.FormatGeminiAPI:    prices.Gemini,
		"no-such-format":              prices.Anthropic,
	}
	for f, p := range want {
		if got := wire.ProviderOf(f); got != p {
			t.Errorf("ProviderOf(%s) = %s; want %s", f, got, p)
		}
	}
}

// carries builds Route's lookup from "Header" and "?param" names.
func carries(names ...string) func(string, bool) bool {
	return func(name string, query bool) bool {
		for _, n := range names {
			if query && n == "?"+name || !query && strings.EqualFold(n, name) {
				return true
			}
		}
		return false
	}
}

func TestRoute(t *testing.T) {
	const (
		bearer  = "Authorization"
		antKey  = "X-Api-Key"
		googKey = "X-Goog-Api-Key"
		qKey    = "?key"
		version = "Anthropic-Version"
	)
	tests := []struct {
		path    string
		carried []string
		want    wire.API // "" with err
		claimed bool
		err     error
	}{
		{"/v1/messages", []string{antKey, version}, wire.Messages, true, nil},
		{"/v1/messages", []string{bearer, version}, wire.Messages, true, nil}, // Claude Code OAuth
		{"/v1/messages", nil, wire.Messages, true, nil},
		{"/v1/messages/count_tokens", []string{antKey}, wire.Messages, true, nil},
		{"/v1/messages", []string{googKey}, "", true, wire.ErrWrongRoute},
		{"/v1/messages", []string{qKey}, "", true, wire.ErrWrongRoute},
		{"/v1/chat/completions", []string{bearer}, wire.Chat, true, nil},
		{"/v1/chat/completions", []string{antKey}, "", true, wire.ErrWrongRoute},
		{"/v1/chat/completions", []string{bearer, version}, wire.Chat, true, nil},
		{"/v1/responses", []string{bearer}, wire.Responses, true, nil},
		{"/v1/responses/resp_1/input_items", []string{bearer}, wire.Responses, true, nil},
		{"/v1/responses", []string{googKey}, "", true, wire.ErrWrongRoute},
		{"/v1beta/models/g:generateContent", []string{googKey}, wire.Gemini, true, nil},
		{"/v1beta/models/g:generateContent", []string{qKey}, wire.Gemini, true, nil},
		{"/v1beta/models/g:generateContent", []string{bearer}, wire.Gemini, true, nil}, // Vertex, OAuth
		{"/v1beta/models", []string{antKey}, "", true, wire.ErrWrongRoute},
		{"/v1beta", nil, wire.Gemini, true, nil},
		// Paths no API claims go by what they carry.
		{"/v1/models", []string{antKey}, wire.Messages, false, nil},
		{"/v1/models", []string{antKey, version}, wire.Messages, false, nil},
		{"/v1/models", []string{bearer, version}, wire.Messages, false, nil},
		{"/v1/models", []string{bearer}, wire.Chat, false, nil},
		{"/v1/files", []string{googKey}, wire.Gemini, false, nil},
		{"/v1/models/gemini-2.5-pro:generateContent", []string{qKey}, wire.Gemini, false, nil},
		{"/v1/models", []string{version}, wire.Messages, false, nil},
		{"/v1/models", nil, wire.Chat, false, nil},
		{"/v1/files", []string{antKey, bearer}, "", false, wire.ErrTwoProviders},
		{"/v1/files", []string{googKey, bearer}, "", false, wire.ErrTwoProviders},
		{"/v1/files", []string{antKey, qKey}, "", false, wire.ErrTwoProviders},
		{"/v1/files", []string{googKey, qKey}, wire.Gemini, false, nil},
		{"/v1/files", []string{googKey, version}, "", false, wire.ErrWrongRoute},
		{"/v1/files", []string{antKey, bearer, version}, wire.Messages, false, nil},
	}
	for _, tt := range tests {
		r, err := wire.Route(tt.path, carries(tt.carried...))
		name := tt.path + " " + strings.Join(tt.carried, "+")
		if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("%s: error %v; want %v", name, err, tt.err)
			continue
		}
		if r.Claimed != tt.claimed {
			t.Errorf("%s: claimed %v; want %v", name, r.Claimed, tt.claimed)
		}
		if err != nil {
			for _, h := range tt.carried {
				if h != version && !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(strings.TrimPrefix(h, "?"))) {
					t.Errorf("%s: the error %q does not name %s", name, err, h)
				}
			}
			continue
		}
		if r.Spec.API != tt.want {
			t.Errorf("%s: routed to %s; want %s", name, r.Spec.API, tt.want)
		}
	}
}

// BenchmarkRoute is the routing of one request, as the proxy does it up to three
// times per request (dispatch, the credential check, the passthrough).
func BenchmarkRoute(b *testing.B) {
	for _, bc := range []struct {
		name, path string
		has        func(string, bool) bool
	}{
		{"messages", "/v1/messages", carries("X-Api-Key", "Anthropic-Version")},
		{"gemini", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", carries("X-Goog-Api-Key")},
		{"unknown-path", "/v1/models", carries("Authorization")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wire.Route(bc.path, bc.has); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
