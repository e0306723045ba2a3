package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/prices"
	"github.com/pruneadvisor/pruneadvisor/server"
)

// The secrets of the routing tests, one per credential: none may reach a log line,
// a metric, an error body or the store.
const (
	secretAnthropic = "sk-ant-SECRET-anthropic-1"
	secretGoogle    = "AIza-SECRET-google-2"
	secretQuery     = "AIza-SECRET-query-3"
	secretOpenAI    = "sk-proj-SECRET-openai-4"
)

// credential is one way a test request carries a secret.
type credential struct {
	name  string // the header, or "key=" for the query parameter
	owner string // the provider whose secret it is; "any" for a bearer token
}

var (
	credAnthropic = credential{"X-Api-Key", "anthropic"}
	credGoogle    = credential{"X-Goog-Api-Key", "gemini"}
	credQuery     = credential{"key=", "gemini"}
	credBearer    = credential{"Authorization", "any"}
)

// expectRoute is the rule of issue 34, written out independently of package wire:
// the upstream a request reaches ("" when it is refused with 400). A path of a
// known API goes to that API's provider, and a credential the API does not take
// (another provider's) is refused; any other path goes by its credentials
// (x-api-key Anthropic, x-goog-api-key and key= Gemini, Authorization OpenAI unless
// anthropic-version makes it Anthropic's), two providers' credentials or one that
// contradicts the version header are refused; without credentials the version
// header decides, else OpenAI.
func expectRoute(path string, creds []credential, version bool) string {
	accepts := map[string][]credential{
		"anthropic": {credAnthropic, credBearer},
		"openai":    {credBearer},
		"gemini":    {credGoogle, credQuery, credBearer},
	}
	family := ""
	switch {
	case path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/"):
		family = "anthropic"
	case path == "/v1/chat/completions" || strings.HasPrefix(path, "/v1/chat/completions/"),
		path == "/v1/responses" || strings.HasPrefix(path, "/v1/responses/"):
		family = "openai"
	case strings.HasPrefix(path, "/v1beta/"):
		family = "gemini"
	}
	if family != "" {
		for _, c := range creds {
			ok := false
			for _, a := range accepts[family] {
				ok = ok || a == c
			}
			if !ok {
				return ""
			}
		}
		return family
	}
	owners := map[string]bool{}
	for _, c := range creds {
		o := c.owner
		if o == "any" {
			o = "openai"
			if version {
				o = "anthropic"
			}
		}
		owners[o] = true
	}
	switch {
	case len(owners) > 1:
		return ""
	case len(owners) == 1:
		for o := range owners {
			if version && o != "anthropic" {
				return ""
			}
			return o
		}
	case version:
		return "anthropic"
	}
	return "openai"
}

// routeCase is one request of the routing table.
type routeCase struct {
	method, path string
	creds        []credential
	version      bool
}

func (c routeCase) String() string {
	var names []string
	for _, cr := range c.creds {
		names = append(names, cr.name)
	}
	if c.version {
		names = append(names, "anthropic-version")
	}
	return c.method + " " + c.path + " [" + strings.Join(names, " ") + "]"
}

// request builds the case's request against base, every credential with its
// secret.
func (c routeCase) request(t *testing.T, base string) *http.Request {
	t.Helper()
	target := base + c.path
	var body io.Reader
	if c.method == http.MethodPost {
		body = strings.NewReader(`{}`)
	}
	for _, cr := range c.creds {
		if cr == credQuery {
			sep := "?"
			if strings.Contains(target, "?") {
				sep = "&"
			}
			target += sep + "key=" + secretQuery
		}
	}
	req, err := http.NewRequest(c.method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, cr := range c.creds {
		switch cr {
		case credAnthropic:
			req.Header.Set(cr.name, secretAnthropic)
		case credGoogle:
			req.Header.Set(cr.name, secretGoogle)
		case credBearer:
			req.Header.Set(cr.name, "Bearer "+secretOpenAI)
		}
	}
	if c.version {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	return req
}

// routePaths are every route of the proxy and fourteen paths no API claims.
var routePaths = []struct{ method, path string }{
	{"POST", "/v1/messages"},
	{"POST", "/v1/messages/count_tokens"},
	{"GET", "/v1/messages/batches"},
	{"POST", "/v1/chat/completions"},
	{"GET", "/v1/chat/completions/chatcmpl-1"},
	{"POST", "/v1/responses"},
	{"GET", "/v1/responses/resp_1/input_items"},
	{"POST", "/v1beta/models/gemini-2.5-pro:generateContent"},
	{"POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"},
	{"POST", "/v1beta/models/gemini-2.5-pro:countTokens"},
	{"GET", "/v1beta/models"},
	{"GET", "/v1/models"},
	{"GET", "/v1/models/claude-sonnet-4-5"},
	{"POST", "/v1/models/gemini-2.5-pro:generateContent"},
	{"GET", "/v1/files"},
	{"GET", "/v1/files/file_1/content"},
	{"POST", "/v1/batches"},
	{"POST", "/v1/embeddings"},
	{"POST", "/v1/completions"},
	{"POST", "/v1/moderations"},
	{"POST", "/v1/audio/speech"},
	{"POST", "/v1/images/generations"},
	{"GET", "/v1/organization/usage_report"},
	{"POST", "/v1/uploads"},
	{"GET", "/v1/fine_tuning/jobs"},
}

// routeCreds are the credential sets every path is tried with.
var routeCreds = [][]credential{
	nil,
	{credAnthropic},
	{credGoogle},
	{credQuery},
	{credBearer},
	{credAnthropic, credBearer},
	{credGoogle, credBearer},
	{credQuery, credBearer},
	{credAnthropic, credGoogle},
	{credAnthropic, credQuery},
	{credGoogle, credQuery},
}

// Path x credential x version header: each request reaches the upstream the rule
// names, with its credentials, or is refused with 400 naming its credential
// headers; no other upstream sees it, and no secret reaches the log, the metrics,
// an error body or the store.
func TestRouteByCredentials(t *testing.T) {
	ups := map[string]*recorder{}
	for _, name := range []string{"anthropic", "openai", "gemini"} {
		ups[name] = newRecorder(t, okJSON)
	}
	env := newProxy(t, server.Options{AnthropicUpstream: ups["anthropic"].URL, OpenAIUpstream: ups["openai"].URL, GeminiUpstream: ups["gemini"].URL})
	var bodies bytes.Buffer
	counts := map[string]int{}
	refused := 0
	for _, p := range routePaths {
		for _, creds := range routeCreds {
			for _, version := range []bool{false, true} {
				c := routeCase{p.method, p.path, creds, version}
				path, _, _ := strings.Cut(c.path, "?")
				want := expectRoute(path, creds, version)
				before := map[string]int{}
				for name, up := range ups {
					before[name] = up.count()
				}
				resp, err := http.DefaultClient.Do(c.request(t, env.http.URL))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				bodies.Write(b)
				got := ""
				for name, up := range ups {
					switch n := up.count() - before[name]; {
					case n == 1 && got == "":
						got = name
					case n != 0:
						t.Errorf("%s: %d requests reached %s (and %q)", c, n, name, got)
					}
				}
				if got != want {
					t.Errorf("%s: reached %q (status %d); want %q", c, got, resp.StatusCode, want)
					continue
				}
				if want == "" {
					refused++
					if resp.StatusCode != http.StatusBadRequest {
						t.Errorf("%s: refused with %d; want 400", c, resp.StatusCode)
					}
					named := 0
					for _, cr := range creds {
						if strings.Contains(string(b), strings.TrimSuffix(cr.name, "=")) {
							named++
						}
					}
					if named == 0 {
						t.Errorf("%s: the refusal names none of the credentials: %s", c, b)
					}
					continue
				}
				counts[want]++
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s: status %d %s", c, resp.StatusCode, b)
				}
				up := ups[want]
				up.mu.Lock()
				h, uri := up.headers[len(up.headers)-1], up.paths[len(up.paths)-1]
				up.mu.Unlock()
				for _, cr := range creds {
					if cr == credQuery {
						if !strings.Contains(uri, "key="+secretQuery) {
							t.Errorf("%s: the key= parameter did not reach %s: %s", c, want, uri)
						}
					} else if h.Get(cr.name) == "" {
						t.Errorf("%s: %s did not reach %s", c, cr.name, want)
					}
				}
			}
		}
	}
	t.Logf("%d requests: %d refused, reached %v", len(routePaths)*len(routeCreds)*2, refused, counts)
	if refused == 0 || counts["anthropic"] == 0 || counts["openai"] == 0 || counts["gemini"] == 0 {
		t.Errorf("the table does not exercise every outcome: %d refused, %v", refused, counts)
	}
	if err := env.srv.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	metrics := scrape(t, env.http.URL)
	for _, reason := range []string{"two_providers", "wrong_route"} {
		if !strings.Contains(metrics, `reason="`+reason+`"`) {
			t.Errorf("metrics count no refusal for %s", reason)
		}
	}
	if n := strings.Count(env.log.String(), "request refused"); n != refused {
		t.Errorf("%d refusals logged; want one line for each of %d", n, refused)
	}
	stored := ""
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if b, err := os.ReadFile(env.dbPth + suffix); err == nil {
			stored += string(b)
		}
	}
	if stored == "" {
		t.Fatal("no store files read: the check below would prove nothing")
	}
	for _, secret := range []string{secretAnthropic, secretGoogle, secretQuery, secretOpenAI, "SECRET"} {
		for where, text := range map[string]string{"the log": env.log.String(), "the metrics": metrics, "an error body": bodies.String(), "the store": stored} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q", where, secret)
			}
		}
	}
}

// anthropicBody is the Messages request at request r of a conversation whose tool
// outputs are toolOutput(k) (NOISE on odd k).
func anthropicBody(r int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-test","max_tokens":100,"system":"You are an agent.","messages":[{"role":"user","content":"Fix the parser."}`)
	for k := 1; k < r; k++ {
		out, _ := json.Marshal(toolOutput(k))
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_%d","name":"run_command","input":{"command":"make s%d"}}]}`, k, k)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":%s}]}`, k, out)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// A proxied session of every route is planned with its own provider's prices: the
// planner's price of each rewrite (the step record's cost over the tokens it
// writes again) is the rewrite premium of the provider the ledger bills the route
// under, the ledger's entry carries the same planned price, and that provider is
// the route's (Codex's Responses and Gemini CLI's requests were planned with
// Anthropic's $3.45 per million before issue 34).
func TestRoutePricesMatchLedger(t *testing.T) {
	up := newRecorder(t, okJSON)
	cfg := testConfig()
	env := newProxy(t, server.Options{Config: cfg, AnthropicUpstream: up.URL, OpenAIUpstream: up.URL, GeminiUpstream: up.URL})
	n := 8
	var anthropic, chat [][]byte
	for r := 1; r <= n; r++ {
		anthropic, chat = append(anthropic, anthropicBody(r)), append(chat, chatBody(1, r))
	}
	// The premium per token (cache write minus cache read) of each provider's list
	// prices, written out: Anthropic $3.75 - $0.30, OpenAI and Gemini $1.25 - $0.125.
	tests := []struct {
		route, path, header, key, provider string
		premium                            float64
		bodies                             [][]byte
	}{
		{"anthropic", "/v1/messages", "X-Api-Key", "sk-ant-k", "anthropic", 3.45e-6, anthropic},
		{"openai", "/v1/chat/completions", "Authorization", "Bearer sk-k", "openai", 1.125e-6, chat},
		{"responses", "/v1/responses", "Authorization", "Bearer sk-k", "openai", 1.125e-6, responsesTurns()},
		{"gemini", "/v1beta/models/gemini-2.5-pro:generateContent", "X-Goog-Api-Key", "AIza-k", "gemini", 1.125e-6, geminiTurns()},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.route, func(t *testing.T) {
			session := "prices-" + tt.route
			for i, body := range tt.bodies {
				resp, b := post(t, env.http.URL+tt.path, body, map[string]string{tt.header: tt.key, server.HeaderSession: session})
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
				}
			}
			if err := env.srv.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			steps, err := env.db.Steps(ctx, session)
			if err != nil {
				t.Fatal(err)
			}
			entries, err := env.db.LedgerEntries(ctx, session)
			if err != nil {
				t.Fatal(err)
			}
			planned := map[int]float64{}
			for _, e := range entries {
				if string(e.Provider) != tt.provider || e.Route != tt.route {
					t.Errorf("step %d: the ledger bills route %s as %s; want %s as %s", e.Step, e.Route, e.Provider, tt.route, tt.provider)
				}
				planned[e.Step] = e.PlannedRewriteUSD
			}
			bills := cfg.PriceModel(prices.Provider(tt.provider))
			rewrites := 0
			for _, s := range steps {
				if s.Rewrite == "" {
					continue
				}
				rewrites++
				if s.Suffix <= 0 || s.CostUSD <= 0 {
					t.Errorf("step %d: rewrite %s writes %d tokens for $%v: nothing to compare", s.Step, s.Rewrite, s.Suffix, s.CostUSD)
					continue
				}
				perToken := s.CostUSD / float64(s.Suffix)
				if !near(perToken, tt.premium) || !near(perToken, bills.RewritePremium()) {
					t.Errorf("step %d: the planner priced a rewritten token at $%.4g per million; the ledger's %s prices say $%.4g (want $%.4g)",
						s.Step, perToken*1e6, tt.provider, bills.RewritePremium()*1e6, tt.premium*1e6)
				}
				if !near(planned[s.Step], s.CostUSD) {
					t.Errorf("step %d: the ledger holds the planned price $%v; the planner's is $%v", s.Step, planned[s.Step], s.CostUSD)
				}
			}
			if rewrites == 0 {
				t.Fatalf("no rewrite in %d steps: nothing priced", len(steps))
			}
		})
	}
}
