package server_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// commitCounter is a SQLite store that counts SavePrunes calls (each one
// transaction: storage.DB.SavePrunes) and the prunes they carry. It overrides
// nothing else, so every other write the serve path makes goes to the DB as is.
type commitCounter struct {
	*storage.DB
	mu     sync.Mutex
	calls  int
	prunes int
}

func (c *commitCounter) SavePrunes(ctx context.Context, ps []advisor.Prune) error {
	c.mu.Lock()
	c.calls++
	c.prunes += len(ps)
	c.mu.Unlock()
	return c.DB.SavePrunes(ctx, ps)
}

var rewritesTotal = regexp.MustCompile(`(?m)^pruneadvisor_rewrites_total\{[^}]*\} (\d+)$`)

// The serve path (the record queue in front of the store) commits each rewrite's
// originals and stubs in one SavePrunes call: as many calls as rewrites (the
// pruneadvisor_rewrites_total counter), and as many prunes in them as distinct
// stubs in the last forwarded body (stubs are frozen, so each one is committed
// once and stays in every later body). The budget is set so that some rewrites
// carry several prunes.
func TestOneCommitPerRewrite(t *testing.T) {
	up := newRecorder(t, okJSON)
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL})
	counter := &commitCounter{DB: env.db}
	cfg := testConfig()
	cfg.Budget = 4000 // pending prunes gather until the budget forces a rewrite of several
	opts := server.Options{OpenAIUpstream: up.URL, Store: counter, Ledger: env.db, Config: cfg, Scorer: noiseScorer}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Flush(context.Background()) })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	var last []byte
	for r := 1; r <= 16; r++ {
		n := up.count()
		resp, body := post(t, hs.URL+"/v1/chat/completions", chatBody(3, r), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", r, resp.StatusCode, body)
		}
		last = up.body(n)
	}
	rewrites := 0
	for _, m := range rewritesTotal.FindAllStringSubmatch(scrape(t, hs.URL), -1) {
		n, _ := strconv.Atoi(m[1])
		rewrites += n
	}
	stubs := len(regexp.MustCompile(`o_[0-9]{12}`).FindAll(last, -1))
	if rewrites < 2 {
		t.Fatalf("%d rewrites in 16 requests; the test needs at least 2", rewrites)
	}
	if counter.prunes <= rewrites {
		t.Fatalf("%d prunes in %d rewrites; the test needs a rewrite of several", counter.prunes, rewrites)
	}
	if counter.calls != rewrites {
		t.Errorf("%d SavePrunes calls for %d rewrites; want one per rewrite", counter.calls, rewrites)
	}
	if counter.prunes != stubs {
		t.Errorf("%d prunes committed; the last forwarded body holds %d stubs", counter.prunes, stubs)
	}
	if !bytes.Contains(last, []byte("[pruned: run_command make s1")) {
		t.Errorf("output 1 not pruned in the last body: %s", clip(last))
	}
}
