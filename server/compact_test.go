package server_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/server"
)

// POST /v1/responses/compact (Codex asks the provider to compact there) goes to the
// OpenAI upstream at its own path, like the other Responses routes, and is never
// pruned: the upstream gets the body byte for byte, while the same body sent to
// POST /v1/responses is advised and gets stubs.
func TestResponsesCompactUntouched(t *testing.T) {
	up := newRecorder(t, okJSON)
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL})
	var b strings.Builder
	b.WriteString(`{"model":"gpt-test","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the parser."}]}`)
	for k := 1; k <= 8; k++ {
		fmt.Fprintf(&b, `,{"type":"function_call","call_id":"c%d","name":"shell","arguments":"{\"command\":[\"make\",\"s%d\"]}"}`, k, k)
		fmt.Fprintf(&b, `,{"type":"function_call_output","call_id":"c%d","output":%q}`, k, "NOISE "+toolOutput(k))
	}
	b.WriteString(`]}`)
	body := []byte(b.String())
	for i, path := range []string{"/v1/responses/compact", "/v1/responses"} {
		if resp, got := post(t, env.http.URL+path, body, nil); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, got)
		}
		if up.paths[i] != path {
			t.Errorf("upstream path %s; want %s", up.paths[i], path)
		}
	}
	if got := up.body(0); !bytes.Equal(got, body) {
		t.Errorf("/v1/responses/compact: the upstream got %d bytes, not the %d sent", len(got), len(body))
	}
	if got := up.body(1); bytes.Equal(got, body) || !bytes.Contains(got, []byte("[pruned: ")) {
		t.Errorf("/v1/responses: the same body went out unpruned (the control of this test)")
	}
}
