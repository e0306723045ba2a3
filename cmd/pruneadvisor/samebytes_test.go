package main

// The same bytes from any replica (issue 35): a session whose requests go to
// several `serve` processes sharing one store reaches the upstream byte for byte
// as it does through one process.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/storage/pgtest"
	"github.com/pruneadvisor/pruneadvisor/tokencount"
)

// sameBytesArgs are the settings: rewrites over a 4,000-token budget,
// priced rewrites off, the lexical scorer (asked on the step's path).
var sameBytesArgs = []string{"--scorer", "lexical", "--budget", "4000", "--price-forced=false"}

// sameBytesRequests is the session's length: 20 requests.
const sameBytesRequests = 20

// readOutput is the text of read k of the session: a source file of about 2,279
// tokens (o200k_base), its own for every k.
func readOutput(k int) string {
	var b strings.Builder
	for j := 0; tokencount.Count(b.String()) < 2279-40; j++ {
		fmt.Fprintf(&b, "%4d\tvar gauge%dx%d = ledger%d.Sum(bucket%d, %d) + ratio%d\n",
			j+1, k, j, (k*31+j)%97, j%13, k*j, j%7)
	}
	return b.String()
}

// readBody is request r (1-based) of the session: its task, then r-1 reads of
// files of the module, each answered by readOutput.
func readBody(r int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"gpt-test","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"Find why the scheduler drops jobs and fix it."}`)
	for k := 1; k < r; k++ {
		out, _ := json.Marshal(readOutput(k))
		fmt.Fprintf(&b, `,{"role":"assistant","content":"Continuing.","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"internal/mod/part%d.go\"}"}}]}`, k, k)
		fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":%s}`, k, out)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// anyRecallID matches a recall id, which is keyed by its store's secret: runs on
// different stores are compared with their ids set aside.
var anyRecallID = regexp.MustCompile(`o_[0-9]{12}`)

// withoutIDs is body with every recall id replaced by o_XXXXXXXXXX.
func withoutIDs(body []byte) []byte { return anyRecallID.ReplaceAll(body, []byte("o_XXXXXXXXXX")) }

// replicaRun sends the session's requests through the replicas: request r goes to
// the replica pick(r) names (1-based r; restart, when set, runs before request
// restartAt). It returns the bodies the upstream received, by request.
func replicaRun(t *testing.T, procs []*served, pick func(r int) int, restartAt int, restart func()) [][]byte {
	t.Helper()
	got := make([][]byte, sameBytesRequests)
	for r := 1; r <= sameBytesRequests; r++ {
		if r == restartAt && restart != nil {
			restart()
		}
		code, resp := procs[pick(r)].post(t, "/v1/chat/completions", readBody(r))
		if code != http.StatusOK {
			t.Fatalf("request %d to replica %d: %d %s", r, pick(r), code, cutOut(resp, 300))
		}
		got[r-1] = []byte(resp)
	}
	return got
}

// compareRuns reports every request of got that differs from want (recall ids set
// aside) and returns how many did.
func compareRuns(t *testing.T, what string, want, got [][]byte) int {
	t.Helper()
	n := 0
	for i := range want {
		if !bytes.Equal(withoutIDs(want[i]), withoutIDs(got[i])) {
			if n == 0 {
				t.Errorf("%s: request %d differs (%d stubs, %d through one process):\n%s", what, i+1,
					stubCount(t, got[i]), stubCount(t, want[i]), cutOut(toolDiff(t, withoutIDs(want[i]), withoutIDs(got[i])), 2000))
			}
			n++
		}
	}
	if n > 0 {
		t.Errorf("%s: %d of %d requests differ from one process's", what, n, len(want))
	}
	return n
}

// stores returns a fresh store of each kind: a PostgreSQL schema of its own and an
// SQLite file.
func sameBytesStores(t *testing.T) map[string]string {
	return map[string]string{
		"postgres": pgtest.URL(t),
		"sqlite":   filepath.Join(t.TempDir(), "shared.db"),
	}
}

// throughOneProcess starts the echo upstream and one serve process on a store of
// its own, sends the session through it, and returns the environment and serve
// flags (sameBytesArgs, the upstream) the replicas are started with and what the
// upstream received for each request: the bytes every replica run must match.
func throughOneProcess(t *testing.T) ([]string, []string, [][]byte) {
	t.Helper()
	up := echoUpstream(t)
	env := testEnv(t)
	args := append(append([]string{}, sameBytesArgs...), "--openai-upstream", up.URL)
	one := startServe(t, env, append([]string{"--db", filepath.Join(t.TempDir(), "one.db")}, args...)...)
	want := replicaRun(t, []*served{one}, func(int) int { return 0 }, 0, nil)
	return env, args, want
}

// TestReplicasSameBytes sends the session through one process, then through two
// replicas on one store (PostgreSQL, and one SQLite file), its requests
// alternating between them, in a random order, and alternating with both replicas
// restarted halfway: every request reaches the upstream byte for byte as through
// one process (recall ids set aside), with at least ten stubs in the last, and
// every stub recalls from either replica.
func TestReplicasSameBytes(t *testing.T) {
	t.Parallel()
	env, args, want := throughOneProcess(t)
	n := stubCount(t, want[len(want)-1])
	if n < 10 {
		t.Fatalf("through one process the last request carries %d stubs; the test needs at least 10", n)
	}
	t.Logf("through one process the last request carries %d stubs", n)
	seed := rand.Uint64()
	t.Logf("random order seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 35))
	orders := map[string][]int{"alternating": nil, "random": nil, "restarted": nil}
	for r := 1; r <= sameBytesRequests; r++ {
		orders["alternating"] = append(orders["alternating"], r%2)
		orders["restarted"] = append(orders["restarted"], r%2)
		orders["random"] = append(orders["random"], rng.IntN(2))
	}
	for _, kind := range []string{"postgres", "sqlite"} {
		for _, name := range []string{"alternating", "random", "restarted"} {
			order := orders[name]
			// A store per run: the runs' sessions would otherwise meet.
			db := filepath.Join(t.TempDir(), name+".db")
			if kind == "postgres" {
				db = pgtest.URL(t)
			}
			what := kind + "/" + name
			start := func() *served { return startServe(t, env, append([]string{"--db", db}, args...)...) }
			procs := []*served{start(), start()}
			restart := func() {
				for i, p := range procs {
					_ = p.cmd.Process.Signal(syscall.SIGKILL)
					p.wait(10 * time.Second)
					procs[i] = start()
				}
			}
			if name != "restarted" {
				restart = nil
			}
			got := replicaRun(t, procs, func(r int) int { return order[r-1] }, sameBytesRequests/2+1, restart)
			compareRuns(t, what, want, got)
			tools, err := toolContents(got[len(got)-1])
			if err != nil {
				t.Fatal(err)
			}
			checkRecalls(t, what, procs, tools)
		}
	}
}

// checkRecalls recalls every stub among tools (tool results by call id) from every
// replica: each must give its original byte for byte.
func checkRecalls(t *testing.T, what string, procs []*served, tools map[string]string) {
	t.Helper()
	for call, c := range tools {
		m := stubRecallID.FindStringSubmatch(c)
		if m == nil || !strings.HasPrefix(c, "[pruned: ") {
			continue
		}
		var k int
		fmt.Sscanf(call, "call_%d", &k)
		for i, p := range procs {
			if code, text := p.get(t, "/v1/recall/"+m[1]); code != http.StatusOK || text != readOutput(k) {
				t.Errorf("%s: recall %s (%s) from replica %d: %d, %d bytes; want 200 and the original's %d", what, m[1], call, i, code, len(text), len(readOutput(k)))
			}
		}
	}
}

// TestReplicasAtOnce sends every request of the session to two replicas on one
// store at the same moment (a client retrying on the other replica, or a balancer
// that duplicates), on PostgreSQL and on one SQLite file. Both answers of a step
// carry the same stubs (no two different stub sets for one step), no output is ever
// sent with two different stubs or whole after its stub, and every stub recalls its
// original byte for byte from either replica (no lost original).
func TestReplicasAtOnce(t *testing.T) {
	t.Parallel()
	env, args, want := throughOneProcess(t)
	for kind, db := range sameBytesStores(t) {
		procs := []*served{startServe(t, env, append([]string{"--db", db}, args...)...), startServe(t, env, append([]string{"--db", db}, args...)...)}
		stubs := map[string]string{} // call id -> its stub
		sameAsOne := 0
		for r := 1; r <= sameBytesRequests; r++ {
			var got [2][]byte
			var wg sync.WaitGroup
			for i, p := range procs {
				wg.Go(func() {
					code, resp := p.post(t, "/v1/chat/completions", readBody(r))
					if code != http.StatusOK {
						t.Errorf("%s: request %d to replica %d: %d %s", kind, r, i, code, cutOut(resp, 300))
					}
					got[i] = []byte(resp)
				})
			}
			wg.Wait()
			if !bytes.Equal(got[0], got[1]) {
				t.Errorf("%s: request %d: the replicas sent different bodies (%d and %d stubs):\n%s", kind, r,
					stubCount(t, got[0]), stubCount(t, got[1]), cutOut(toolDiff(t, got[0], got[1]), 2000))
			}
			if bytes.Equal(withoutIDs(got[0]), withoutIDs(want[r-1])) {
				sameAsOne++
			}
			for _, body := range got {
				tools, err := toolContents(body)
				if err != nil {
					t.Fatalf("%s: request %d: %v", kind, r, err)
				}
				for call, c := range tools {
					var k int
					fmt.Sscanf(call, "call_%d", &k)
					switch old, ok := stubs[call]; {
					case c == readOutput(k):
						if ok {
							t.Errorf("%s: request %d: %s sent whole after its stub", kind, r, call)
						}
					case !strings.HasPrefix(c, "[pruned: "):
						t.Errorf("%s: request %d: %s is neither its original nor a stub: %q", kind, r, call, cutOut(c, 200))
					case ok && old != c:
						t.Errorf("%s: request %d: %s sent with two stubs:\n%s\n%s", kind, r, call, old, c)
					default:
						stubs[call] = c
					}
				}
			}
		}
		if len(stubs) < 10 {
			t.Errorf("%s: %d outputs stubbed; the test needs at least 10", kind, len(stubs))
		}
		t.Logf("%s: %d outputs stubbed; %d of %d requests as through one process", kind, len(stubs), sameAsOne, sameBytesRequests)
		checkRecalls(t, kind, procs, stubs)
	}
}
