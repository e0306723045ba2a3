package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestSidecarRecallPart: GET /v1/recall/{id} with lines, grep and context answers
// the numbered lines (written out by hand below) as text/plain; a bad range,
// pattern or context, a parameter twice or an unknown one is 400 with a JSON error
// naming it; the partial recalls are recorded as recall events, the refused ones not.
func TestSidecarRecallPart(t *testing.T) {
	env := newProxy(t, server.Options{})
	text := "package main\r\n\r\nimport \"net/http\"\r\n\r\nfunc main() {\r\n\thttp.ListenAndServe(\":8080\", nil) // Timeout: none\r\n}" // CRLF, no final newline
	id := advisor.RecallID("sess-h", "c1")
	if err := env.db.SaveOriginal(t.Context(), advisor.Original{RecallID: id, SessionID: "sess-h", OutputKey: "c1", Tool: "Read",
		Summary: "main.go", Text: text, Hash: transcript.TextHash(text), Tokens: tokencount.Count(text), Step: 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		query string
		code  int
		want  string // the body, or for errors the JSON error's text
	}{
		{"whole", "", 200, text},
		{"lines", "lines=5-7", 200, "5:func main() {\n6:\thttp.ListenAndServe(\":8080\", nil) // Timeout: none\n7:}\n[lines 5-7 of 7]\n"},
		{"lines to the end", "lines=7-", 200, "7:}\n[lines 7-7 of 7]\n"},
		{"grep", "grep=" + url.QueryEscape("Timeout"), 200, "6:\thttp.ListenAndServe(\":8080\", nil) // Timeout: none\n[1 line matches \"Timeout\" in all 7 lines]\n"},
		{"grep with context", "grep=%5Eimport&context=1", 200, "2-\n3:import \"net/http\"\n4-\n[1 line matches \"^import\" in all 7 lines]\n"},
		{"grep no match", "grep=panic", 200, "[no line matches \"panic\" in all 7 lines]\n"},
		{"bad range", "lines=0-3", 400, `recall "` + id + `": bad line range: lines "0-3": line numbers start at 1; want "N", "N-M" or "N-" with line numbers from 1, e.g. "200-250"`},
		{"range past the end", "lines=8-9", 400, `recall "` + id + `": bad line range: lines "8-9": the original has 7 lines, so it starts past the end; want a start from 1 to 7`},
		{"bad pattern", "grep=" + url.QueryEscape("[a-"), 400, `recall "` + id + `": bad pattern: grep "[a-": missing closing ]: "[a-"; want a Go (RE2) regular expression (no lookaround, no backreferences), e.g. "Timeout" or "(?i)error|fail"`},
		{"context not a number", "grep=x&context=two", 400, `bad context: context "two": want a number of lines from 0 to 20`},
		{"context without grep", "lines=1&context=2", 400, `recall "` + id + `": bad context: context 2 without grep: context is the lines shown around each grep match`},
		{"twice", "lines=1&lines=2", 400, "bad recall query: lines given 2 times; give it once"},
		{"unknown parameter", "line=5", 400, `bad recall query: unknown parameter "line": want lines, grep or context`},
		{"empty lines", "lines=", 400, "bad recall query: lines is empty; leave it out for every line"},
		{"empty grep", "grep=&context=1", 400, "bad recall query: grep is empty; leave it out for no search"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := env.http.URL + "/v1/recall/" + id
			if tt.query != "" {
				u += "?" + tt.query
			}
			resp, err := http.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("%d %s; want %d", resp.StatusCode, body, tt.code)
			}
			got := string(body)
			if tt.code == 200 {
				if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
			} else {
				var e struct{ Error string }
				if err := json.Unmarshal(body, &e); err != nil || resp.Header.Get("Content-Type") != "application/json" {
					t.Fatalf("error body %q (%s): %v; want a JSON error", body, resp.Header.Get("Content-Type"), err)
				}
				got = e.Error
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	evs, err := env.db.SessionRecalls(t.Context(), "sess-h")
	if err != nil || len(evs) != 6 {
		t.Errorf("recall events: %d, %v; want 6 (the answered ones)", len(evs), err)
	}
	_, metrics := get(t, env.http.URL+"/metrics")
	for _, want := range []string{`pruneadvisor_recalls_total{result="ok"} 6`, `pruneadvisor_recalls_total{result="invalid"} 9`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestSidecarRecallMalformedPath: a path under /v1/recall that is not
// /v1/recall/{id} is answered by the sidecar with a 404 naming the route it
// wants, and never reaches the provider (with the caller's credential) as the
// other /v1/ paths do.
func TestSidecarRecallMalformedPath(t *testing.T) {
	var upstream atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstream.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer up.Close()
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL})
	id := advisor.RecallID("sess-m", "c1")
	for _, path := range []string{"/v1/recall", "/v1/recall/", "/v1/recall/" + id + "/", "/v1/recall/" + id + "/lines"} {
		req, err := http.NewRequest(http.MethodGet, env.http.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer sk-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil ||
			!strings.Contains(e.Error, "want GET /v1/recall/{id}") {
			t.Errorf("GET %s = %d %s; want 404 with a JSON error naming the route", path, resp.StatusCode, body)
		}
	}
	if n := upstream.Load(); n != 0 {
		t.Errorf("%d malformed recall requests reached the provider; want none", n)
	}
	// The well-formed route is still the sidecar's: an unknown id is its 404.
	resp, err := http.Get(env.http.URL + "/v1/recall/" + id)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || upstream.Load() != 0 {
		t.Errorf("GET /v1/recall/%s = %d (upstream calls %d); want the sidecar's 404", id, resp.StatusCode, upstream.Load())
	}
}
