package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/cards"

	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// anyRecallID matches a recall id; ids are keyed by their store's secret.
var anyRecallID = regexp.MustCompile(`o_[0-9]{12}`)

// ageScorer scores the NOISE outputs by the step they are asked at (0.01 a step
// of age, so a stub names the step its score came from) and keeps the others.
var ageScorer = testkit.Func{Label: "age-test", Keep: func(c cards.Card) float64 {
	if strings.Contains(c.Head, "NOISE") {
		return 0.01 * float64(c.Age)
	}
	return 0.9
}}

// A session advised through /v1/advise by two servers sharing one SQLite file, its
// requests alternating between them, gets back the messages one server alone
// gives, request by request (recall ids set aside): /v1/advise answers once the
// step's asks and step record are stored, and the other server reads them before
// its step (without, it asks again a step later, and its stubs name other scores).
func TestAdviseReplicasSameMessages(t *testing.T) {
	cfg := testConfig()
	cfg.Budget = 8000
	cfg.RewriteFraction = 0.4 // a rewrite waits for 3,200 tokens of pending prunes: they wait a few steps
	opts := server.Options{Config: cfg, Scorer: ageScorer}
	one := newProxy(t, opts)
	dsn := filepath.Join(t.TempDir(), "shared.db")
	var pair []*proxyEnv
	for range 2 {
		db, err := storage.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		pair = append(pair, newProxyOn(t, opts, db, dsn))
	}
	advise := func(env *proxyEnv, n int) adviseAnswer {
		t.Helper()
		req := fmt.Sprintf(`{"session_id":"replicas","format":"openai","messages":%s}`, openAIMessages(n))
		resp, body := post(t, env.http.URL+"/v1/advise", []byte(req), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%d outputs: %d %s", n, resp.StatusCode, body)
		}
		var ans adviseAnswer
		if err := json.Unmarshal(body, &ans); err != nil {
			t.Fatal(err)
		}
		return ans
	}
	stubs := 0
	for n := 1; n <= 24; n++ {
		want, got := advise(one, n), advise(pair[n%2], n)
		if w, g := anyRecallID.ReplaceAll(want.Messages, nil), anyRecallID.ReplaceAll(got.Messages, nil); string(w) != string(g) {
			t.Fatalf("%d outputs: the replicas answered other messages than one server:\n%s\n%s", n, g, w)
		}
		stubs = 0
		for _, it := range got.Plan.Items {
			if it.Stub != "" {
				stubs++
			}
		}
	}
	if stubs < 4 {
		t.Fatalf("%d stubs at the end; the test needs rewrites", stubs)
	}
	t.Logf("%d stubs at the end, the same through both servers", stubs)
}
