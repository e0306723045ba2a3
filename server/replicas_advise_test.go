package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// anyRecallID matches a recall id; ids are keyed by their store's secret.
var anyRecallID = regexp.MustCompile(`o_[0-9a-f]{10}`)

// A session advised through /v1/advise by two servers sharing one SQLite file, its
// requests alternating between them, gets back the messages one server alone
// gives, request by request (recall ids set aside): /v1/advise answers once the
// step's asks and step record are stored, so the other server reads them.
func TestAdviseReplicasSameMessages(t *testing.T) {
	one := newProxy(t, server.Options{})
	dsn := filepath.Join(t.TempDir(), "shared.db")
	var pair []*proxyEnv
	for range 2 {
		db, err := storage.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		pair = append(pair, newProxyOn(t, server.Options{}, db, dsn))
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
	for n := 1; n <= 16; n++ {
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
