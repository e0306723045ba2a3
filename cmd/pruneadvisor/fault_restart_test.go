package main

// Restart-transparent advising (issue 14): a session sent through `pruneadvisor
// serve` with a restart of the process between two of its requests (graceful or
// SIGKILL) must reach the upstream as the very bytes it reaches it without one.

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// restartSession is a real 24-step Claude Code session (../shared/sessions).
const restartSession = "../../../shared/sessions/claude-code/ff33b5b0-cc51-4271-a3eb-545a85882e5f.jsonl"

// chatBodies turns a session into the Chat Completions requests its agent would have
// sent: request t holds every message before the session's t-th assistant message.
func chatBodies(t *testing.T, file string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		sessionfiles.Missing(t, "the shared sessions are not here: %v", err)
	}
	s, err := transcript.Read(filepath.Base(file), data, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	type msg struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCalls  []call `json:"tool_calls,omitempty"`
		ToolCallID string `json:"tool_call_id,omitempty"`
	}
	var msgs []msg
	var bodies [][]byte
	answered := map[string]bool{}
	for _, m := range s.Messages {
		for _, o := range m.Outputs {
			answered[o.CallID] = true
		}
	}
	for _, m := range s.Messages {
		if m.Role == transcript.RoleAssistant {
			b, err := json.Marshal(map[string]any{"model": "gpt-test", "messages": msgs})
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, b)
			am := msg{Role: "assistant", Content: m.Text}
			for _, c := range m.Calls {
				if !answered[c.ID] {
					continue
				}
				tc := call{ID: c.ID, Type: "function"}
				tc.Function.Name, tc.Function.Arguments = c.Name, string(c.Args)
				am.ToolCalls = append(am.ToolCalls, tc)
			}
			if am.Content == "" && len(am.ToolCalls) == 0 {
				am.Content = "(thinking)"
			}
			msgs = append(msgs, am)
			continue
		}
		for _, o := range m.Outputs {
			msgs = append(msgs, msg{Role: "tool", ToolCallID: o.CallID, Content: o.Text})
		}
		if strings.TrimSpace(m.Text) != "" {
			role := "user"
			if m.Role == transcript.RoleSystem {
				role = "system"
			}
			msgs = append(msgs, msg{Role: role, Content: m.Text})
		}
	}
	return bodies
}

// recordingUpstream is a fake model API keeping every body it receives, in order.
type recordingUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, b)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *recordingUpstream) take() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.bodies
	u.bodies = nil
	return b
}

// seedDB makes an empty database (its recall-id secret included) that every run
// starts from a copy of, so that recall ids, which are keyed by the database's
// secret, are the same in every run.
func seedDB(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "seed.db")
	srv := startServe(t, testEnv(t), "--db", db)
	_ = srv.cmd.Process.Signal(syscall.SIGTERM)
	if code := srv.wait(20 * time.Second); code != 0 {
		t.Fatalf("seed serve: exit %d:\n%s", code, srv.output())
	}
	for _, sfx := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(db + sfx); err == nil {
			t.Fatalf("%s%s left after a graceful stop", db, sfx)
		}
	}
	return db
}

// restartRun sends bodies through serve on a copy of the seed database and returns
// what the upstream received. restartAt > 0 stops the process (with sig) before
// request restartAt (1-based) and starts a new one on the same database for the rest.
// After request recallAfter (when > 0) the first stub that request carried is
// recalled through GET /v1/recall/{id}, as an agent's recall tool does.
func restartRun(t *testing.T, seed string, bodies [][]byte, args []string, restartAt, recallAfter int, sig syscall.Signal) [][]byte {
	t.Helper()
	up := newRecordingUpstream(t)
	db := filepath.Join(t.TempDir(), "restart.db")
	data, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, data, 0o600); err != nil {
		t.Fatal(err)
	}
	env := testEnv(t)
	start := func() *served {
		return startServe(t, env, append([]string{"--db", db, "--openai-upstream", up.URL}, args...)...)
	}
	srv := start()
	for i, b := range bodies {
		if i+1 == restartAt {
			_ = srv.cmd.Process.Signal(sig)
			if code := srv.wait(20 * time.Second); code == -1 {
				t.Fatalf("serve did not stop on %v", sig)
			}
			srv = start()
		}
		resp, err := httpClient.Post(srv.url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d: %s", i+1, resp.StatusCode, cutOut(string(out), 300))
		}
		if i+1 == recallAfter {
			up.mu.Lock()
			sent := up.bodies[len(up.bodies)-1]
			up.mu.Unlock()
			id := firstRecallID(t, sent)
			if id == "" {
				t.Fatalf("request %d carries no stub to recall", i+1)
			}
			if code, text := srv.get(t, "/v1/recall/"+id); code != http.StatusOK {
				t.Fatalf("recall %s: %d %s", id, code, cutOut(text, 300))
			}
		}
	}
	got := up.take()
	if len(got) != len(bodies) {
		t.Fatalf("the upstream got %d requests, want %d", len(got), len(bodies))
	}
	return got
}

// firstRecallID returns the recall id of the first stub (in call id order) among
// a forwarded body's tool results, "" when there is none.
func firstRecallID(t *testing.T, body []byte) string {
	tools, err := toolContents(body)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for call, c := range tools {
		if m := stubRecallID.FindStringSubmatch(c); m != nil && strings.HasPrefix(c, "[pruned: ") {
			ids = append(ids, call+" "+m[1])
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	return strings.Fields(ids[0])[1]
}

// stubCount counts the stubs in the tool results of a forwarded body.
func stubCount(t *testing.T, body []byte) int {
	tools, err := toolContents(body)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range tools {
		if strings.HasPrefix(c, "[pruned: ") {
			n++
		}
	}
	return n
}

// TestServeRestartTransparent sends a real 24-step session through serve once
// without a restart and then with one before request K, for several K, stopping the
// process with SIGTERM or SIGKILL, with the lexical and the fitted scorer; the
// upstream must receive byte-identical bodies every time. The budget is low enough
// that stubs are applied (the baseline checks it), so that decisions before and after
// the restart both matter.
func TestServeRestartTransparent(t *testing.T) {
	bodies := chatBodies(t, restartSession)
	if len(bodies) != 24 {
		t.Fatalf("%s gave %d requests, want 24", restartSession, len(bodies))
	}
	seed := seedDB(t)
	for _, scorer := range []string{"lexical", "fitted"} {
		t.Run(scorer, func(t *testing.T) {
			t.Parallel()
			args := []string{"--scorer", scorer, "--budget", "6000", "--price-forced=false"}
			switch scorer {
			case "lexical":
				args = append(args, "--cutoff", "0.7")
			case "fitted":
				// Above the default 0.05, so that this session has stubs early.
				args = append(args, "--cutoff", "0.2")
			}
			want := restartRun(t, seed, bodies, args, 0, 0, 0)
			noRecall := want
			first, stubs := 0, stubCount(t, want[len(want)-1])
			for i, b := range want {
				if first == 0 && stubCount(t, b) > 0 {
					first = i + 1
				}
			}
			t.Logf("%s: first stub at request %d, %d stubs at the last request", scorer, first, stubs)
			if first == 0 || first >= 20 || stubs < 3 {
				t.Fatalf("baseline: first stub at request %d, %d stubs at the end; the test needs stubs before and after the restarts", first, stubs)
			}
			// The first stub is recalled after the request after it, in every run: the
			// recall is use-history evidence that later scores depend on.
			want = restartRun(t, seed, bodies, args, 0, first+1, 0)
			n := 0
			for i := range want {
				if !bytes.Equal(want[i], noRecall[i]) {
					n++
				}
			}
			t.Logf("the recall after request %d changed %d later requests", first+1, n)
			for _, k := range slices.Compact(slices.Sorted(slices.Values([]int{4, first, first + 1, first + 2, first + 3, 12, 20}))) {
				for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
					got := restartRun(t, seed, bodies, args, k, first+1, sig)
					for i := range want {
						if !bytes.Equal(got[i], want[i]) {
							t.Errorf("restart (%v) before request %d: request %d differs (%d stubs, %d without the restart):\n%s",
								sig, k, i+1, stubCount(t, got[i]), stubCount(t, want[i]), cutOut(toolDiff(t, want[i], got[i]), 3000))
							break
						}
					}
				}
			}
		})
	}
}

// toolDiff shows how two forwarded bodies' tool results differ.
func toolDiff(t *testing.T, want, got []byte) string {
	w, err := toolContents(want)
	if err != nil {
		return fmt.Sprint(err)
	}
	g, err := toolContents(got)
	if err != nil {
		return fmt.Sprint(err)
	}
	return cmp.Diff(w, g)
}
