package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/pruneadvisor/pruneadvisor/internal/browsertest"
	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/report"
	"github.com/pruneadvisor/pruneadvisor/server"
)

// getUI fetches url with the headers given and returns the response and its body.
func getUI(t *testing.T, u string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	resp, b := doRequest(t, http.MethodGet, u, nil, "", hdr)
	return resp, string(b)
}

// liveSession drives session id through the proxy to the fake Anthropic upstream
// for steps requests (each with a tool output, the odd ones NOISE: the scorer
// prunes them) and returns the recall id of one of its stubs.
func liveSession(t *testing.T, env *proxyEnv, id string, steps int) string {
	t.Helper()
	client := anthropic.NewClient(aoption.WithBaseURL(env.http.URL), aoption.WithAPIKey("sk-ant-test"),
		aoption.WithMaxRetries(0), aoption.WithHeader(server.HeaderSession, id))
	ctx := context.Background()
	tools := []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"command": map[string]any{"type": "string"}},
	}, "run_command")}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Fix the failing parser test."))}
	for k := 1; k <= steps; k++ {
		resp, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 1024, Messages: msgs, Tools: tools})
		if err != nil {
			t.Fatalf("request %d: %v", k, err)
		}
		msgs = append(msgs, resp.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(resp.Content[1].ID, toolOutput(k), false)))
	}
	if err := env.srv.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stubs, err := env.db.SessionStubs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stubs {
		return s.RecallID
	}
	t.Fatalf("session %s: no stub after %d steps", id, steps)
	return ""
}

// TestUIBrowser loads /ui/ of a proxy advising two sessions (one proxied to a fake
// Anthropic upstream, with a recall of one of its stubs; one through /v1/advise) in
// Chromium: the page names both sessions, shows the recall, shows the ledger's
// figures as `ledger --json` prints them and the sidecar session's figures as its
// plan holds them (field by field), draws each session's context, raises no
// console error and requests nothing but /ui/. The response carries the CSP,
// which allows no other origin (nor this one). -update-screenshots writes
// docs/live.png.
func TestUIBrowser(t *testing.T) {
	b := browsertest.New(t, nil)
	up := newRecorder(t, anthropicUsageUpstream())
	env := newProxy(t, server.Options{AnthropicUpstream: up.URL})
	recallID := liveSession(t, env, "live-anthropic", 8)
	if resp, body := getUI(t, env.http.URL+"/v1/recall/"+recallID, nil); resp.StatusCode != 200 {
		t.Fatalf("recall %s: %d %s", recallID, resp.StatusCode, body)
	}
	resp, body := post(t, env.http.URL+"/v1/advise", []byte(fmt.Sprintf(`{"session_id":"live-sidecar","format":"openai","messages":%s}`, openAIMessages(5))), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("advise: %d %s", resp.StatusCode, body)
	}
	var ans struct {
		Plan json.RawMessage `json:"plan"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := env.srv.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	resp, page := getUI(t, env.http.URL+"/ui/", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /ui/: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if csp != report.UIHeaderCSP || !strings.HasPrefix(csp, "default-src 'none';") || strings.Contains(csp, "http") || strings.Contains(csp, "'self'") || strings.Contains(csp, "*") {
		t.Errorf("CSP %q: want report.UIHeaderCSP, which allows no origin", csp)
	}
	if !strings.Contains(page, "live-anthropic") || !strings.Contains(page, recallID) {
		t.Errorf("/ui/ names no live-anthropic or recall %s", recallID)
	}

	uiURL := env.http.URL + "/ui/"
	b.Open(uiURL)
	var got struct {
		Sessions []string `json:"sessions"`
		Recalls  []string `json:"recalls"`
		Charts   int      `json:"charts"`
		Stubs    []int    `json:"stubs"`
		// StubTokens is the stub tokens cell of every stub row.
		StubTokens []string `json:"stubTokens"`
	}
	b.Eval(`({
		sessions: Array.from(document.querySelectorAll('#sessions h3.path')).map(e => e.textContent),
		recalls: Array.from(document.querySelectorAll('#recalls code')).map(e => e.textContent),
		charts: document.querySelectorAll('#sessions figure.chart svg polyline').length,
		stubs: Array.from(document.querySelectorAll('#sessions table.stubs')).map(t => t.tBodies[0].rows.length),
		stubTokens: Array.from(document.querySelectorAll('#sessions table.stubs tbody tr')).map(r => r.cells[4].textContent),
	})`, &got)
	if len(got.Sessions) != 2 || !contains(got.Sessions, "live-anthropic") || !contains(got.Sessions, "live-sidecar") {
		t.Errorf("sessions shown %q, want live-anthropic and live-sidecar", got.Sessions)
	}
	if !contains(got.Recalls, recallID) {
		t.Errorf("recalls shown %q, want %s", got.Recalls, recallID)
	}
	if got.Charts != 4 || len(got.Stubs) != 2 || got.Stubs[0] == 0 || got.Stubs[1] == 0 {
		t.Errorf("%d context lines (want 2 per session), stub rows per session %v (want some each)", got.Charts, got.Stubs)
	}
	for _, c := range got.StubTokens {
		if n, err := strconv.Atoi(c); err != nil || n <= 0 {
			t.Errorf("stub tokens cells %q: want each stub's tokens", got.StubTokens)
			break
		}
	}

	// Every figure: the ledger's against `ledger --json`'s document, the sidecar
	// session's against its plan.
	sessions, err := env.db.LedgerSessions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ledgerJSON, err := json.Marshal(report.LiveLedger{Sessions: sessions, Total: ledger.Sum(sessions)})
	if err != nil {
		t.Fatal(err)
	}
	var ledgerFields, sidecarFields []browsertest.Field
	b.Eval(`Array.from(document.querySelectorAll('#ledger [data-field]')).map(e => ({path: e.dataset.field, value: e.dataset.value, text: e.textContent}))`, &ledgerFields)
	idx := indexOf(got.Sessions, "live-sidecar")
	b.Eval(fmt.Sprintf(`Array.from(document.querySelectorAll('#session-%d p [data-field]')).map(e => ({path: e.dataset.field, value: e.dataset.value, text: e.textContent}))`, idx), &sidecarFields)
	seen := browsertest.CheckFields(t, decode(t, ledgerJSON), ledgerFields)
	for _, p := range []string{"total.paid_usd", "total.keep_all_usd", "total.saved_usd", "total.recalls", "sessions.0.paid_usd"} {
		if !seen[p] {
			t.Errorf("the ledger shows no %s", p)
		}
	}
	if len(sessions) != 1 || sessions[0].Recalls != 1 || sessions[0].Requests != 8 {
		t.Errorf("ledger sessions %+v: want live-anthropic's 8 requests and 1 recall", sessions)
	}
	seen = browsertest.CheckFields(t, decode(t, ans.Plan), sidecarFields)
	for _, p := range []string{"step", "context_tokens", "saved_tokens", "budget", "hard_limit", "pending_tokens"} {
		if !seen[p] {
			t.Errorf("the sidecar session shows no %s", p)
		}
	}
	if errs := b.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	for _, r := range b.Requests() {
		u, err := url.Parse(r)
		if err != nil || u.Host != strings.TrimPrefix(env.http.URL, "http://") || !strings.HasPrefix(u.Path, "/ui/") {
			t.Errorf("the page requested %s: nothing but /ui/ may be", r)
		}
	}
	b.Screenshot("live.png", 1500)
}

// TestUIToken: with a token, /ui/ without it is 401 (and shows nothing), with it
// (header or bearer) the page; a browser sending the header loads it.
func TestUIToken(t *testing.T) {
	env := newProxy(t, server.Options{Token: "s3cret"})
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		code int
	}{
		{"none", nil, http.StatusUnauthorized},
		{"wrong", map[string]string{server.HeaderToken: "nope"}, http.StatusUnauthorized},
		{"header", map[string]string{server.HeaderToken: "s3cret"}, http.StatusOK},
		{"bearer", map[string]string{"Authorization": "Bearer s3cret"}, http.StatusOK},
	} {
		resp, body := getUI(t, env.http.URL+"/ui/", tc.hdr)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.code)
		}
		if tc.code == http.StatusUnauthorized && strings.Contains(body, "<html") {
			t.Errorf("%s: a 401 carried the page", tc.name)
		}
	}
	if resp, _ := getUI(t, env.http.URL+"/ui/other", map[string]string{server.HeaderToken: "s3cret"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/ui/other: %d, want 404", resp.StatusCode)
	}
	b := browsertest.New(t, map[string]string{server.HeaderToken: "s3cret"})
	b.Open(env.http.URL + "/ui/")
	var title string
	b.Eval(`document.title`, &title)
	if title != "pruneadvisor live" {
		t.Errorf("title %q with the token", title)
	}
	if errs := b.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func contains(list []string, s string) bool { return indexOf(list, s) >= 0 }

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
