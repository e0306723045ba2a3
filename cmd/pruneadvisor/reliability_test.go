package main

// Reliability: bad input through every command that reads sessions or requests.
// The harness here (running the real command as a separate process, bounded in time,
// and a serve process with a fake upstream) is shared by fault_*_test.go.
// docs/RELIABILITY.md lists every case with what the user sees.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"github.com/tidwall/gjson"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", for reading the stores tests leave

	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
)

// ---- running the command ----

// paBin returns the pruneadvisor command TestMain installed in $PATH: a copy of this
// test binary that runs main's run (testscript.Main).
func paBin(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("pruneadvisor")
	if err != nil {
		t.Fatalf("pruneadvisor is not in $PATH (TestMain installs it): %v", err)
	}
	if !strings.Contains(p, "testscript-main") {
		t.Fatalf("pruneadvisor in $PATH is %s, not the copy of this test binary", p)
	}
	return p
}

// proc is one pruneadvisor process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stdout testkit.SyncBuffer
	stderr testkit.SyncBuffer
	done   chan struct{}
	err    error // Wait's error, once done is closed
}

// testEnv is the environment every process gets: the test's own, with $OLLAMA_HOST
// at a port nothing listens on (no process may reach a real Ollama by accident) and
// $PRUNEADVISOR_DB in the test's temporary folder; extra entries override.
func testEnv(t testing.TB, extra ...string) []string {
	env := append(os.Environ(), "OLLAMA_HOST=http://127.0.0.1:9", "PRUNEADVISOR_DB="+filepath.Join(t.TempDir(), "default.db"))
	return append(env, extra...)
}

// startPA starts pruneadvisor with args in dir ("" = the test's folder).
func startPA(t testing.TB, dir string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(paBin(t), args...)
	p.cmd.Dir = dir
	p.cmd.Env = env
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start pruneadvisor %v: %v", args, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits up to bound for the process to end and returns its exit code; past the
// bound it kills the process and returns -1 (a hang).
func (p *proc) wait(bound time.Duration) int {
	select {
	case <-p.done:
	case <-time.After(bound):
		_ = p.cmd.Process.Kill()
		<-p.done
		return -1
	}
	return p.exitCode()
}

// exitCode is the exit code of the process, which has ended: 128 + the signal for
// one killed by a signal, -2 when it could not be waited for.
func (p *proc) exitCode() int {
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -2
}

// waitFor polls stderr until it holds s, for at most bound.
func (p *proc) waitFor(s string, bound time.Duration) bool {
	end := time.Now().Add(bound)
	for time.Now().Before(end) {
		if strings.Contains(p.stderr.String(), s) {
			return true
		}
		select {
		case <-p.done:
			return strings.Contains(p.stderr.String(), s)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return false
}

// output is stdout then stderr.
func (p *proc) output() string { return p.stdout.String() + p.stderr.String() }

// panicked reports a Go panic or fatal error in a process's output (a panic exits
// with status 2, the same as a usage error, so the code alone does not tell).
var panicked = regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ \[running\]:)|http: panic serving`)

// runPA runs pruneadvisor to its end, at most bound, and returns its exit code (-1
// for a hang) and output. It fails the test on a panic.
func runPA(t testing.TB, bound time.Duration, env []string, args ...string) (int, string) {
	t.Helper()
	p := startPA(t, "", env, args...)
	code := p.wait(bound)
	out := p.output()
	if panicked.MatchString(out) {
		t.Errorf("pruneadvisor %s panicked:\n%s", strings.Join(args, " "), cutOut(out, 4000))
	}
	return code, out
}

// cutOut keeps the first n bytes of s for a failure message.
func cutOut(s string, n int) string {
	if len(s) > n {
		return s[:n] + fmt.Sprintf("… (%d bytes in all)", len(s))
	}
	return s
}

// ---- serve ----

// served is a running `pruneadvisor serve`.
type served struct {
	*proc
	url string
}

// serveAddr matches serve's first stderr line.
var serveAddr = regexp.MustCompile(`serving on (http://127\.0\.0\.1:\d+) `)

// startServe runs `pruneadvisor serve --addr 127.0.0.1:0 args...` and waits for it
// to listen. At cleanup it is stopped with SIGTERM (killed after 15 s) and must not
// have panicked.
func startServe(t testing.TB, env []string, args ...string) *served {
	t.Helper()
	p := startPA(t, "", env, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	if !p.waitFor("serving on http://", 20*time.Second) {
		t.Fatalf("serve did not start:\n%s", p.output())
	}
	m := serveAddr.FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no address in serve's output:\n%s", p.output())
	}
	s := &served{proc: p, url: m[1]}
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			if p.wait(15*time.Second) == -1 {
				t.Errorf("serve did not shut down within 15 s of SIGTERM")
			}
		}
		if panicked.MatchString(p.output()) {
			t.Errorf("serve panicked:\n%s", cutOut(p.output(), 4000))
		}
	})
	return s
}

// httpClient bounds every request a test sends.
var httpClient = &http.Client{Timeout: 60 * time.Second}

// post sends body to the server and returns the status and response body; status 0
// and the error text when the request failed.
func (s *served) post(t testing.TB, path string, body []byte, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return doRequest(httpClient, req)
}

// get fetches path and returns the status and body (0 and the error on failure).
func (s *served) get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get(s.url + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

// upstream is a fake model API: it answers every request with the size and
// SHA-256 of the body it received, so a test can tell whether the proxy forwarded
// the client's bytes unchanged.
func upstream(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"upstream_bytes":%d,"upstream_sha256":%q}`, len(b), sha(b))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// ---- the bad-input table ----

// want is what one command must do with one input: its exit code (CLI) or HTTP
// status, and a substring of its output (stdout and stderr) or response body.
type want struct {
	code int
	text string
	// bug, when set, skips this check: a known defect in code another engineer owns,
	// named "BUG: …" for the lead to fix and then delete.
	bug string
}

// na marks a command that does not apply to an input (folders over HTTP).
var na = want{code: -1}

// Expectations shared by many rows.
var (
	// invalidJSON: a body that is not one JSON value is refused by both routes,
	// with its position.
	invalidJSON = func(pos string) want { return want{400, "invalid JSON at " + pos, ""} }
	// forwarded: the proxy could not or need not prune, and sent the client's bytes.
	forwarded = want{200, "upstream: unchanged", ""}
	// unknownFormat names the file and the readers tried.
	unknownFormat = func(file string) want {
		return want{1, file + ": unknown session format: tried anthropic, claude-code", ""}
	}
	notSession = func(file string) want { return want{1, file + ": not a session file: ", ""} }
)

// badCase is one hostile input.
type badCase struct {
	name string // file in testdata/bad, or the name of a generated input
	// gen makes the input at run time in dir and returns its path (large inputs and
	// file-system tricks are not committed).
	gen func(t *testing.T, dir string) string
	// heavy cases are skipped under -short and are bounded by their work
	// (workBound), against the same channel's on tenth, a tenth of gen's input.
	heavy bool
	tenth func(t *testing.T, dir string) string
	// api is the wire shape for the HTTP routes: "anthropic" (POST /v1/messages) or
	// "openai" (POST /v1/chat/completions). "" picks openai for openai-* files.
	api string
	// during, when set, runs while the replay runs (it may change the files).
	during func(t *testing.T, p *proc, path string)
	// adviseArgs are added to the advise command.
	adviseArgs []string
	// verify, when set, runs after the commands with the advise database.
	verify func(t *testing.T, adviseDB string)
	// file is the input in testdata/bad when the case's name is not a file's.
	file string
	// encoding, when set, is the Content-Encoding the HTTP routes get the input in
	// (encoded by the test; "compress" is sent as is, a coding nobody decodes).
	encoding string

	inspect, advise, replay, sidecar, proxy want
}

// Wall bounds: no light case's command may take longer on one input (the heavy
// cases are bounded by their work: workBound); heavyBound is other tests' for
// commands on large inputs.
const (
	lightBound = 30 * time.Second
	heavyBound = 120 * time.Second
)

func badCases() []badCase {
	return []badCase{
		// Healthy controls: the harness itself must see success.
		{name: "claude-healthy.jsonl",
			inspect: want{0, "duplicates         1", ""},
			advise:  want{0, "pruned               2                      duplicate 1, score 1", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "anthropic-healthy.json",
			inspect: want{0, "format            anthropic", ""},
			advise:  want{0, "(anthropic, 2 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: want{200, `"step":3`, ""}, proxy: forwarded},
		{name: "openai-healthy.json",
			inspect: want{0, "format            openai", ""},
			advise:  want{0, "(openai, 2 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: want{200, `"step":3`, ""}, proxy: forwarded},

		// Truncation and encoding.
		{name: "claude-truncated-last-line.jsonl",
			inspect: want{0, "line 14: skipped: invalid JSON: unexpected end of input (truncated?)", ""},
			advise:  want{1, "claude-truncated-last-line.jsonl:14: invalid JSON: unexpected end of input (truncated?)", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-torn-line.jsonl",
			inspect: want{0, "line 4: skipped: a record cut short (58 bytes at column 1), the next record written after it on the same line", ""},
			advise:  want{1, "claude-torn-line.jsonl:4: a record cut short (58 bytes at column 1)", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-cut-mid-utf8.jsonl",
			inspect: want{0, "line 15: skipped: invalid JSON: unexpected end of input (truncated?)", ""},
			advise:  want{1, "claude-cut-mid-utf8.jsonl:15: invalid JSON", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-invalid-utf8-output.jsonl",
			inspect: want{0, "output tokens      2050", ""},
			advise:  want{0, "pruned               2                      duplicate 1, score 1", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-raw-nul.jsonl",
			inspect: want{0, `line 6: skipped: invalid JSON: invalid character '\x00' in string literal`, ""},
			advise:  want{1, `claude-raw-nul.jsonl:6: invalid JSON: invalid character '\x00' in string literal`, ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-escaped-nul.jsonl",
			inspect: want{0, "output tokens      2042", ""},
			advise:  want{0, "pruned               2", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-bom-crlf.jsonl",
			inspect: want{0, "steps              7  (14 messages)", ""},
			advise:  want{0, "pruned               2", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 1, column 75"), proxy: invalidJSON("line 1, column 1")},
		{name: "claude-utf16le-bom.jsonl",
			inspect: want{0, "warning the file is UTF-16LE text (with a byte-order mark): read as converted to UTF-8", ""},
			advise:  want{0, "pruned 2 duplicate 1, score 1", ""},
			replay:  want{0, "replayed 1 sessions", ""},
			sidecar: invalidJSON("line 1, column 78"), proxy: invalidJSON("line 1, column 1")},
		{name: "claude-utf16be.jsonl",
			inspect: want{0, "warning the file is UTF-16BE text (no byte-order mark): read as converted to UTF-8", ""},
			advise:  want{0, "pruned 2 duplicate 1, score 1", ""},
			replay:  want{0, "replayed 1 sessions", ""},
			sidecar: invalidJSON("line 1, column 74"), proxy: invalidJSON("line 1, column 1")},
		{name: "claude-utf32le-bom.jsonl",
			inspect: want{0, "warning the file is UTF-32LE text (with a byte-order mark): read as converted to UTF-8", ""},
			advise:  want{0, "pruned 2 duplicate 1, score 1", ""},
			replay:  want{0, "replayed 1 sessions", ""},
			sidecar: invalidJSON("line 1, column 78"), proxy: invalidJSON("line 1, column 1")},
		{name: "claude-cr-only.jsonl",
			inspect: want{0, "steps 7 (14 messages)", ""},
			advise:  want{0, "pruned 2 duplicate 1, score 1", ""},
			replay:  want{0, "replayed 1 sessions", ""},
			sidecar: invalidJSON("line 1, column 360"), proxy: invalidJSON("line 1, column 287")},
		{name: "claude-first-line-split.jsonl",
			inspect: want{0, "line 1: skipped: invalid JSON: unexpected end of input (truncated?)", ""},
			advise:  want{1, "claude-first-line-split.jsonl:1: invalid JSON: unexpected end of input (truncated?)", ""},
			replay:  want{3, "malformed lines 2 skipped", ""}, // the lost line held the task: no ask scores
			sidecar: invalidJSON("line 3, column 1"), proxy: invalidJSON("line 3, column 1")},
		{name: "empty.jsonl",
			inspect: want{1, "empty.jsonl: empty session: the file holds no data", ""},
			advise:  want{1, "empty.jsonl: empty session: the file holds no data", ""},
			replay:  want{1, "empty.jsonl: empty session: the file holds no data", ""},
			sidecar: invalidJSON("line 1, column 65"), proxy: invalidJSON("line 1, column 1")},
		{name: "blank.jsonl",
			inspect: want{1, "blank.jsonl: empty session: the file holds no data", ""},
			advise:  want{1, "blank.jsonl: empty session: the file holds no data", ""},
			replay:  want{1, "blank.jsonl: empty session: the file holds no data", ""},
			sidecar: invalidJSON("line 5, column 1"), proxy: invalidJSON("line 4, column 1")},
		{name: "binary-garbage.bin",
			inspect: unknownFormat("binary-garbage.bin"), advise: unknownFormat("binary-garbage.bin"),
			replay:  notSession("binary-garbage.bin"),
			sidecar: invalidJSON("line 1, column 72"), proxy: invalidJSON("line 1, column 1")},
		{name: "prose.txt",
			inspect: unknownFormat("prose.txt"), advise: unknownFormat("prose.txt"), replay: notSession("prose.txt"),
			sidecar: invalidJSON("line 1, column 63"), proxy: invalidJSON("line 1, column 1")},

		{name: "claude-terminal-escapes.jsonl", adviseArgs: []string{"--plan"},
			inspect: want{0, `duplicate Bash "printf '\x1b]0;pwned\a\x1b[2J\x1b[8mhidden\x1b[0m'" (1020 tokens) by toolu_esc2`, ""},
			// Pruned: the one rewrite pays ($0.0008 cost, $0.0017 saving). The
			// decision is the same in every run (24 of 24 here): a stub's recall id is
			// the same number of tokens whatever the store's random secret
			// (advisor.RecallIDDigits); with the older hex ids the output was pending
			// in most runs and pruned in 4 of 40.
			advise:  want{0, `3 Read "/w/src/\x00evil\u202egnp.go" 1020 pruned - superseded by call toolu_rd2`, ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},

		// Wrong JSON shapes.
		{name: "claude-array-line.jsonl",
			inspect: want{0, "line 2: skipped: expected a JSON object, found a JSON array", ""},
			advise:  want{1, "claude-array-line.jsonl:2: expected a JSON object, found a JSON array", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-scalar-lines.jsonl",
			inspect: want{0, "line 4: skipped: expected a JSON object, found a JSON string", ""},
			advise:  want{1, "claude-scalar-lines.jsonl:4: expected a JSON object, found a JSON string", ""},
			replay:  want{0, "malformed lines  2 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-content-object.jsonl",
			inspect: want{0, "line 2: skipped: field message.content: content must be a string or an array of blocks", ""},
			advise:  want{1, "claude-content-object.jsonl:2: field message.content: content must be a string or an array of blocks", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-input-string.jsonl",
			inspect: want{0, "tool calls         1", ""},
			advise:  want{0, "(claude-code, 2 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "openai-messages-object.json",
			inspect: unknownFormat("openai-messages-object.json"), advise: unknownFormat("openai-messages-object.json"),
			replay:  notSession("openai-messages-object.json"),
			sidecar: want{400, "messages must be a JSON array of messages", ""},
			proxy:   forwarded},
		{name: "openai-nested-array.json",
			inspect: unknownFormat("openai-nested-array.json"), advise: unknownFormat("openai-nested-array.json"),
			replay:  notSession("openai-nested-array.json"),
			sidecar: want{400, "field messages.0: message is not a JSON object", ""},
			proxy:   forwarded},
		{name: "openai-content-number.json",
			inspect: want{0, "field 1.content: content is neither a string nor a list of parts", ""},
			advise:  want{1, "openai-content-number.json: field 1.content: content is neither a string nor a list of parts", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: want{400, "field messages.1.content: content is neither a string nor a list of parts", ""},
			proxy:   forwarded},
		{name: "openai-trailing-garbage.json",
			inspect: want{1, "openai-trailing-garbage.json:1: invalid JSON: invalid character '}' after top-level value", ""},
			advise:  want{1, "openai-trailing-garbage.json:1: invalid JSON: invalid character '}' after top-level value", ""},
			replay:  want{1, "openai-trailing-garbage.json:1: invalid JSON", ""},
			sidecar: invalidJSON("line 1, column 153"), proxy: invalidJSON("line 1, column 74")},
		{name: "openai-duplicate-keys.json",
			inspect: want{0, "steps              2  (2 messages)", ""},
			advise:  want{0, "(openai, 2 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: want{200, `"step":3`, ""}, proxy: forwarded},
		{name: "openai-lone-surrogate.json",
			inspect: want{0, "tool calls         1", ""},
			advise:  want{0, "(openai, 1 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: want{200, `"step":2`, ""}, proxy: forwarded},
		{name: "openai-role-unknown.json",
			inspect: want{0, `message with role "wizard" left out`, ""},
			advise:  want{0, "(openai, 0 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: want{200, `"step":1`, ""}, proxy: forwarded},
		{name: "anthropic-messages-null.json",
			inspect: unknownFormat("anthropic-messages-null.json"), advise: unknownFormat("anthropic-messages-null.json"),
			replay:  notSession("anthropic-messages-null.json"),
			sidecar: want{400, "request: messages must be a JSON array of messages", ""},
			proxy:   forwarded},
		{name: "anthropic-truncated.json",
			inspect: want{1, "anthropic-truncated.json:1: invalid JSON: unexpected end of input (truncated?)", ""},
			advise:  want{1, "anthropic-truncated.json:1: invalid JSON: unexpected end of input (truncated?)", ""},
			replay:  want{1, "anthropic-truncated.json:1: invalid JSON", ""},
			sidecar: invalidJSON("line 1, column 1595"), proxy: invalidJSON("line 1, column 1517")},
		{name: "swe-agent-history-object.traj", api: "openai",
			inspect: want{1, "swe-agent-history-object.traj: field history: not a list", ""},
			advise:  want{1, "swe-agent-history-object.traj: field history: not a list", ""},
			replay:  want{1, "swe-agent-history-object.traj: field history: not a list", ""},
			sidecar: want{400, "request: messages must be a JSON array of messages", ""},
			proxy:   forwarded},
		{name: "gemini-messages-null.json",
			inspect: want{1, "gemini-messages-null.json: field messages: missing or not a list", ""},
			advise:  want{1, "gemini-messages-null.json: field messages: missing or not a list", ""},
			replay:  want{1, "gemini-messages-null.json: field messages: missing or not a list", ""},
			sidecar: want{400, "request: messages must be a JSON array of messages", ""},
			proxy:   forwarded},
		{name: "gemini-toolcalls-string.json",
			inspect: want{0, "field messages.1.toolCalls: not a list", ""},
			advise:  want{1, "gemini-toolcalls-string.json: field messages.1.toolCalls: not a list", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: want{400, `field messages.0.role: role \"\" is neither user nor assistant`, ""},
			proxy:   forwarded},
		{name: "openhands-wrong-types.json", api: "openai",
			inspect: want{0, "field 2.content: not a string", ""},
			advise:  want{1, "openhands-wrong-types.json: field 2.content: not a string", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: want{400, "field messages.0.role: missing or not a string", ""},
			proxy:   forwarded},
		{name: "pi-header-only.jsonl",
			inspect: want{1, "pi-header-only.jsonl: empty session: no messages", ""},
			advise:  want{1, "pi-header-only.jsonl: empty session: no messages", ""},
			replay:  want{1, "pi-header-only.jsonl: empty session: no messages", ""},
			sidecar: want{400, "request: messages must be a JSON array of messages", ""},
			proxy:   forwarded},
		{name: "pi-bad-message.jsonl",
			inspect: want{0, "line 3: skipped: field message: expected a JSON object, found a JSON string", ""},
			advise:  want{1, "pi-bad-message.jsonl:3: field message: expected a JSON object, found a JSON string", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "codex-truncated.jsonl",
			inspect: want{0, "codex-truncated.jsonl:4: truncated JSON", ""},
			advise:  want{1, "codex-truncated.jsonl:4: truncated JSON", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},

		// Numbers as strings, ids as numbers, missing and null content, unknown blocks.
		{name: "claude-numbers-as-strings.jsonl",
			inspect: want{0, "tool calls         1", ""},
			advise:  want{0, "(claude-code, 2 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-ids-as-numbers.jsonl",
			inspect: want{0, "line 2: skipped: field message.content.0.id: expected a string, found JSON number", ""},
			advise:  want{1, "claude-ids-as-numbers.jsonl:2: field message.content.0.id: expected a string, found JSON number", ""},
			replay:  want{0, "malformed lines  2 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "codex-wrong-types.jsonl",
			inspect: want{0, `tool result for call id "call_1" has no earlier call`, ""},
			advise:  want{0, "(codex, 1 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "anthropic-result-content-number.json",
			inspect: want{0, "skipped messages.2.content.0.content: tool result content must be a string or an array of blocks", ""},
			advise:  want{1, "anthropic-result-content-number.json: field messages.2.content.0.content: tool result content must be a string or an array of blocks", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: want{400, "field messages.2.content.0.content: tool result content must be a string or an array of blocks", ""},
			proxy:   forwarded},
		{name: "claude-missing-content.jsonl",
			inspect: want{0, "steps              1  (2 messages)", ""},
			advise:  want{0, "(claude-code, 1 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-content-null.jsonl",
			inspect: want{0, "steps              1  (2 messages)", ""},
			advise:  want{0, "(claude-code, 1 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-unknown-blocks.jsonl",
			inspect: want{0, "steps              8  (16 messages)", ""},
			advise:  want{0, "(claude-code, 8 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "anthropic-unknown-blocks.json",
			inspect: want{0, "steps             1  (3 messages)", ""},
			advise:  want{0, "(anthropic, 1 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: want{200, `"step":2`, ""}, proxy: forwarded},

		// Calls and results that do not pair up; a parentUuid cycle.
		{name: "claude-result-without-call.jsonl",
			inspect: want{0, `line 15: tool result for call id "toolu_nowhere" has no earlier call`, ""},
			advise:  want{0, "(claude-code, 8 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "anthropic-result-without-call.json",
			inspect: want{0, `warning                 tool result for call id "toolu_nowhere" has no earlier call`, ""},
			advise:  want{0, "(anthropic, 1 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: want{200, `"step":2`, ""}, proxy: forwarded},
		{name: "openai-tool-without-id.json",
			inspect: want{0, "field 2.tool_call_id: tool message names no call", ""},
			advise:  want{1, "openai-tool-without-id.json: field 2.tool_call_id: tool message names no call", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: want{400, "field messages.2.tool_call_id: tool message names no call", ""},
			proxy:   forwarded},
		{name: "openai-args-not-json.json",
			inspect: want{0, "tool calls         1", ""},
			advise:  want{0, "(openai, 1 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: want{200, `"step":2`, ""}, proxy: forwarded},
		{name: "claude-duplicate-call-id.jsonl",
			inspect: want{0, `line 4: call id "toolu_same" used again`, ""},
			advise:  want{0, "(claude-code, 3 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-result-before-call.jsonl",
			inspect: want{0, "unanswered calls        1         toolu_late", ""},
			advise:  want{0, "(claude-code, 2 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "claude-parent-cycle.jsonl",
			inspect: want{0, "3 lines sit on a parentUuid cycle; they are kept in file order", ""},
			advise:  want{0, "(claude-code, 2 steps)", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},

		// Depth.
		{name: "claude-deep-input.jsonl",
			inspect: want{0, "line 2: skipped: invalid JSON: invalid character '{' exceeded max depth", ""},
			advise:  want{1, "claude-deep-input.jsonl:2: invalid JSON: invalid character '{' exceeded max depth", ""},
			replay:  want{0, "malformed lines  1 skipped", ""},
			sidecar: invalidJSON("line 2, column 1"), proxy: invalidJSON("line 2, column 1")},
		{name: "deep-array.json",
			inspect: unknownFormat("deep-array.json"), advise: unknownFormat("deep-array.json"), replay: notSession("deep-array.json"),
			sidecar: want{400, "exceeded max depth", ""}, proxy: forwarded},

		// Compressed request bodies (the HTTP routes only: a Content-Encoding is a
		// matter of the wire).
		{name: "anthropic-healthy.json+gzip", file: "anthropic-healthy.json", encoding: "gzip",
			inspect: na, advise: na, replay: na,
			sidecar: want{200, `"step":3`, ""}, proxy: forwarded},
		{name: "anthropic-healthy.json+zstd", file: "anthropic-healthy.json", encoding: "zstd",
			inspect: na, advise: na, replay: na,
			sidecar: want{200, `"step":3`, ""}, proxy: forwarded},
		{name: "anthropic-healthy.json+compress", file: "anthropic-healthy.json", encoding: "compress",
			inspect: na, advise: na, replay: na,
			sidecar: want{415, `unknown Content-Encoding \"compress\" (pruneadvisor decodes gzip, deflate, br and zstd)`, ""},
			proxy:   forwarded},
		{name: "gzip-bomb", gen: genBomb, encoding: "gzip",
			inspect: na, advise: na, replay: na,
			sidecar: want{413, "Content-Encoding gzip: decoded request body is over the limit of 33554432 bytes (--max-body)", ""},
			proxy:   want{413, "Content-Encoding gzip: decoded request body is over the limit of 33554432 bytes (--max-body)", ""}},
		{name: "br-bomb", gen: genBomb, encoding: "br",
			inspect: na, advise: na, replay: na,
			sidecar: want{413, "Content-Encoding br: decoded request body is over the limit of 33554432 bytes (--max-body)", ""},
			proxy:   want{413, "Content-Encoding br: decoded request body is over the limit of 33554432 bytes (--max-body)", ""}},
		{name: "anthropic-truncated.json+gzip", file: "anthropic-truncated.json", encoding: "gzip",
			inspect: na, advise: na, replay: na,
			sidecar: invalidJSON("line 1, column 1600"), proxy: want{400, "invalid JSON at line 1, column 1517 (byte offset 1516): unexpected end of JSON input (in the body decoded from gzip)", ""}},

		// Size, length and the file system, made at run time.
		{name: "50MB-output", heavy: true, gen: genBigOutput(50 << 20), tenth: genBigOutput(5 << 20), adviseArgs: []string{"--cutoff", "0.99"}, verify: recallBig,
			inspect: want{0, "output tokens     19820805", ""},
			advise:  want{0, "pruned 1 hard limit, last resort 1", ""},
			replay:  want{0, "replayed  1 sessions", ""},
			sidecar: want{413, "over the limit of 33554432 bytes (--max-body)", ""},
			proxy:   want{413, "over the limit of 33554432 bytes (--max-body)", ""}},
		{name: "100k-steps", heavy: true, gen: genLongSession(100_000), tenth: genLongSession(10_000),
			inspect: want{0, "steps             100000  (200001 messages)", ""},
			advise:  want{0, "(anthropic, 100000 steps)", ""},
			replay:  want{0, "replayed  1 sessions  100000 steps", ""},
			sidecar: want{200, `"step":100001`, ""},
			proxy:   forwarded},
		{name: "10000-sessions", heavy: true, gen: genManySessions(10_000), tenth: genManySessions(1_000),
			inspect: want{1, "is a directory", ""},
			advise:  want{1, "is a directory", ""},
			replay:  want{0, "replayed  10000 sessions", ""},
			sidecar: na, proxy: na},
		{name: "symlink-loop", gen: genSymlinkLoop,
			inspect: want{1, "is a directory", ""},
			advise:  want{1, "is a directory", ""},
			replay:  want{0, "(symlink loop or second link)", ""},
			sidecar: na, proxy: na},
		{name: "deleted-during-replay", gen: genDeleteDir, during: deleteLast,
			inspect: want{1, "is a directory", ""},
			advise:  want{1, "is a directory", ""},
			replay:  want{1, "s0299.json: no such file or directory", ""},
			sidecar: na, proxy: na},
	}
}

// TestBadInputs runs every hostile input through inspect, advise, replay, POST
// /v1/advise and the proxy. None may panic or run past its bound; each must give the
// exit code or status in the table and name the file, line or field in its message.
func TestBadInputs(t *testing.T) {
	up := upstream(t)
	srv := startServe(t, testEnv(t), "--db", filepath.Join(t.TempDir(), "serve.db"), "--scorer", "lexical",
		"--anthropic-upstream", up.URL, "--openai-upstream", up.URL)
	bad, err := filepath.Abs(filepath.Join("..", "..", "testdata", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	cases := badCases()
	files, _ := filepath.Glob(filepath.Join(bad, "*"))
	listed := map[string]bool{"gen.py": true}
	for _, c := range cases {
		listed[c.name] = true
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("testdata/bad/%s has no row in the table", filepath.Base(f))
		}
	}
	if n := len(files) - 1; n < 30 {
		t.Errorf("testdata/bad holds %d inputs; want at least 30", n)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.heavy {
				if testing.Short() {
					t.Skip("large input: skipped under -short")
				}
				t.Parallel()
			}
			dir := t.TempDir()
			path := filepath.Join(bad, c.name)
			if c.file != "" {
				path = filepath.Join(bad, c.file)
			}
			if c.gen != nil {
				path = c.gen(t, dir)
			}
			tenth := ""
			if c.heavy {
				tenth = c.tenth(t, t.TempDir())
			}
			env := testEnv(t)
			// check runs one channel on the input; a heavy case's first on the
			// tenth of it, whose CPU time sets its workBound.
			check := func(channel string, w want, light workBound, ratio int, got func(path, tag string, b workBound) ran) {
				t.Run(channel, func(t *testing.T) {
					if w.code == na.code {
						t.Skip("does not apply")
					}
					if w.bug != "" {
						t.Skip(w.bug)
					}
					b := light
					if c.heavy {
						b = tenthBound(t, tenth, ratio, got)
					}
					start := time.Now()
					r := got(path, "", b)
					if r.code == -1 {
						t.Fatalf("%s (bound: %s); output:\n%s", r.why, b, cutOut(r.out, 1500))
					}
					code, out := r.code, r.out
					t.Logf("exit/status %d in %.2fs, %s of CPU (bound: %s):\n%s", code, time.Since(start).Seconds(), r.cpu.Round(time.Millisecond), b, cutOut(out, 1500))
					if code != w.code || !strings.Contains(squeeze(out), squeeze(w.text)) {
						t.Errorf("got %d after %.1fs with:\n%s\nwant %d with %q", code, time.Since(start).Seconds(), cutOut(out, 3000), w.code, w.text)
					}
					if channel == "inspect" || channel == "advise" {
						if loc := terminalControl.FindStringIndex(out); loc != nil {
							t.Errorf("%s printed a raw control character %q at byte %d: %q", channel, out[loc[0]:loc[1]], loc[0], out[max(loc[0]-40, 0):min(loc[1]+40, len(out))])
						}
					}
				})
			}
			cli := workBound{wall: lightBound}
			check("inspect", c.inspect, cli, commandCPURatio, func(path, _ string, b workBound) ran {
				return startPA(t, "", env, "inspect", path).bounded(t, b)
			})
			// The table's advise lines were worked out with 64-token digests: with the
			// default 128 the healthy controls' two 1,020-token prunes get stubs that
			// no longer pay for their rewrite in a 7-step session, and the subject here
			// is the input, not the digest.
			digest64 := filepath.Join(dir, "digest64.json")
			if err := os.WriteFile(digest64, []byte(`{"digest_tokens": 64}`), 0o644); err != nil {
				t.Fatal(err)
			}
			check("advise", c.advise, cli, commandCPURatio, func(path, tag string, b workBound) ran {
				return startPA(t, "", env, append([]string{"advise", path, "--db", filepath.Join(dir, "advise"+tag+".db"),
					"--config", digest64, "--scorer", "lexical", "--budget", "4000", "--plan=false"}, c.adviseArgs...)...).bounded(t, b)
			})
			check("replay", c.replay, cli, commandCPURatio, func(path, tag string, b workBound) ran {
				p := startPA(t, "", env, "replay", path, "--db", filepath.Join(dir, "replay"+tag+".db"),
					"--scorer", "lexical", "--progress", "log", "--workers", "1")
				if c.during != nil && tag == "" {
					c.during(t, p, path)
				}
				return p.bounded(t, b)
			})
			api := c.api
			if api == "" {
				api = "anthropic"
				if strings.HasPrefix(c.name, "openai-") {
					api = "openai"
				}
			}
			var header []string
			encode := func(b []byte) []byte { return b }
			if c.encoding != "" {
				header = []string{"Content-Encoding", c.encoding}
				encode = func(b []byte) []byte { return encodeBody(t, c.encoding, b) }
			}
			read := func(path string) []byte {
				body, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				return body
			}
			request := workBound{wall: httpClient.Timeout}
			check("sidecar", c.sidecar, request, requestCPURatio, func(path, tag string, b workBound) ran {
				return srv.postWork(t, "/v1/advise", encode(sidecarBody(c.name+tag, api, read(path))), b, header...)
			})
			check("proxy", c.proxy, request, requestCPURatio, func(path, tag string, b workBound) ran {
				route := "/v1/messages"
				if api == "openai" {
					route = "/v1/chat/completions"
				}
				sent := encode(read(path))
				r := srv.postWork(t, route, sent, b, append(header, "X-Pruneadvisor-Session", "bad-"+c.name+tag)...)
				if got := gjson.Get(r.out, "upstream_sha256"); got.Exists() {
					if got.String() == sha(sent) {
						r.out += " [upstream: unchanged]"
					} else {
						r.out += " [upstream: rewritten]"
					}
				}
				return r
			})
			if c.verify != nil {
				c.verify(t, filepath.Join(dir, "advise.db"))
			}
		})
	}
}

// terminalControl matches what a terminal would act on or hide if a command printed
// it raw: C0 controls but newline, DEL, C1 controls, and the bidi overrides and
// isolates (U+202A-202E, U+2066-2069).
var terminalControl = regexp.MustCompile("[\\x00-\\x09\\x0b-\\x1f\\x7f\\x{80}-\\x{9f}\\x{202a}-\\x{202e}\\x{2066}-\\x{2069}]")

// blanks are runs of spaces and tabs: tables align their columns with them.
var blanks = regexp.MustCompile(`[ \t]+`)

// squeeze makes table output comparable: each run of blanks becomes one space.
func squeeze(s string) string { return blanks.ReplaceAllString(s, " ") }

// sidecarBody wraps an input as a POST /v1/advise request: its messages array when
// it is a JSON object with one, else the input itself in the messages field (so an
// input that is not JSON makes a request that is not JSON either).
func sidecarBody(name, api string, input []byte) []byte {
	msgs := input
	if json.Valid(input) {
		if m := gjson.GetBytes(input, "messages"); m.Exists() && bytes.HasPrefix(bytes.TrimSpace(input), []byte("{")) {
			msgs = []byte(m.Raw)
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"session_id":%q,"format":%q,"messages":`, "bad-"+name, api)
	b.Write(msgs)
	b.WriteString("}")
	return b.Bytes()
}

// ---- inputs made at run time ----

// genBomb writes an Anthropic request of 64 MiB, one user message of zeros: it
// compresses to about 64 KB (gzip) or 50 bytes (br), a decompression bomb against
// the 32 MiB limit.
func genBomb(t *testing.T, dir string) string {
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"`)
	b.Write(bytes.Repeat([]byte{'0'}, 64<<20))
	b.WriteString(`"}]}`)
	return writeFile(t, filepath.Join(dir, "bomb.json"), b.Bytes())
}

// encodeBody compresses b with coding (gzip, zstd or br); any other coding is
// returned as is, for the server to find it unknown.
func encodeBody(t *testing.T, coding string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	default:
		return b
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// listingRow is one line of a long log, about 80 bytes.
const listingRow = "2026-11-02T10:00:00Z INFO request served path=/api/v1/items id=%07d status=200\n"

// genBigOutput returns a generator of an Anthropic Messages request body whose
// first tool result is one output of size bytes (bigText), followed by five small
// steps.
func genBigOutput(size int) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		big, _ := json.Marshal(bigText(size))
		var b bytes.Buffer
		b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Dump the log."},`)
		b.WriteString(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_big","name":"Bash","input":{"command":"cat big.log"}}]},`)
		b.WriteString(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_big","content":`)
		b.Write(big)
		b.WriteString(`}]}`)
		for i := range 5 {
			fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_%d","name":"Bash","input":{"command":"echo %d"}}]}`, i, i)
			fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":"%d"}]}`, i, i)
		}
		b.WriteString(`]}`)
		return writeFile(t, filepath.Join(dir, "big.json"), b.Bytes())
	}
}

// bigText is a log of size bytes: the 50 MB (50 << 20) output of the 50MB-output
// case.
func bigText(size int) string {
	var text strings.Builder
	for i := 0; text.Len() < size; i++ {
		fmt.Fprintf(&text, listingRow, i)
	}
	return text.String()[:size]
}

// recallBig checks that `recall` gives the pruned 50 MB output back byte for byte.
func recallBig(t *testing.T, db string) {
	rows := querySQL(t, db, `SELECT recall_id FROM stubs`)
	if len(rows) != 1 {
		t.Fatalf("stubs: %v; want the 50 MB output's", rows)
	}
	p := startPA(t, "", testEnv(t), "recall", rows[0][0], "--db", db)
	if code := p.wait(heavyBound); code != 0 {
		t.Fatalf("recall %s: exit %d: %s", rows[0][0], code, cutOut(p.stderr.String(), 2000))
	}
	if got, want := sha([]byte(p.stdout.String())), sha([]byte(bigText(50<<20))); got != want {
		t.Errorf("recall gave %d bytes with SHA-256 %s; want the original's %d bytes, %s", len(p.stdout.String()), got, 50<<20, want)
	}
}

// querySQL runs q on the SQLite file and returns every row, each column as text
// (NULL as "NULL").
func querySQL(t testing.TB, db, q string, args ...any) [][]string {
	t.Helper()
	h, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rows, err := h.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = "NULL"
			if v.Valid {
				row[i] = v.String
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// genLongSession returns a generator of an Anthropic Messages request body of
// steps steps, each one small tool call and its result (about 20 MB for 100,000).
func genLongSession(steps int) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Count to %d."}`, steps)
		for i := range steps {
			fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"Bash","input":{"command":"echo %d"}}]}`, i, i)
			fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"%d"}]}`, i, i)
		}
		b.WriteString(`]}`)
		return writeFile(t, filepath.Join(dir, "long.json"), b.Bytes())
	}
}

// genManySessions returns a generator of n two-message sessions in 100 folders.
func genManySessions(n int) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		root := filepath.Join(dir, "sessions")
		for i := range n {
			sub := filepath.Join(root, fmt.Sprintf("d%02d", i%100))
			if i < 100 {
				if err := os.MkdirAll(sub, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, filepath.Join(sub, fmt.Sprintf("s%05d.json", i)),
				fmt.Appendf(nil, `[{"role":"user","content":"task %d"},{"role":"assistant","content":"done %d"}]`, i, i))
		}
		return root
	}
}

// genSymlinkLoop writes a folder holding one session and a link back to itself.
func genSymlinkLoop(t *testing.T, dir string) string {
	root := filepath.Join(dir, "loop")
	if err := os.MkdirAll(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "a", "s.json"), []byte(`[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]`))
	if err := os.Symlink("..", filepath.Join(root, "a", "up")); err != nil {
		t.Fatal(err)
	}
	return root
}

// genDeleteDir writes 300 small sessions; deleteLast removes the last one while the
// replay runs.
func genDeleteDir(t *testing.T, dir string) string {
	root := filepath.Join(dir, "vanishing")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		writeFile(t, filepath.Join(root, fmt.Sprintf("s%04d.json", i)),
			fmt.Appendf(nil, `[{"role":"user","content":"task %d"},{"role":"assistant","content":"done %d"}]`, i, i))
	}
	return root
}

// deleteLast waits until the replay has planned its sessions (every file found and
// hashed; one worker replays them in name order), then deletes the last one.
func deleteLast(t *testing.T, p *proc, root string) {
	if !p.waitFor("sessions to replay", 20*time.Second) {
		t.Errorf("replay never planned:\n%s", p.output())
		return
	}
	if err := os.Remove(filepath.Join(root, "s0299.json")); err != nil {
		t.Error(err)
	}
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
