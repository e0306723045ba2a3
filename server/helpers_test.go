package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tidwall/gjson"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
)

// noiseScorer gives keep 0.05 to outputs whose head holds "NOISE" and 0.9 to the
// others, so a test knows exactly which outputs a scorer sends under the cutoff.
var noiseScorer = testkit.Noise("noise-test")

// testConfig prunes eagerly: K = 2 protected steps, candidates from 50 tokens, a
// 1,000-token budget (a rewrite once pending prunes reach 50 tokens), and the design's
// rule b unpriced (PriceForced off: over the budget the rewrite happens whether or not
// it pays, as these short sessions would never pay).
func testConfig() advisor.Config {
	cfg := advisor.DefaultConfig()
	cfg.ProtectedSteps = 2
	cfg.MinCandidateTokens = 50
	cfg.Budget = 1000
	cfg.PriceForced = false
	return cfg
}

// recorder is a fake upstream that records every request it receives and answers
// with respond.
type recorder struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	paths   []string
	discard atomic.Bool // count requests without keeping them (load tests)
	n       atomic.Int64
}

func newRecorder(t testing.TB, respond func(w http.ResponseWriter, r *http.Request, body []byte)) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		rec.n.Add(1)
		if rec.discard.Load() {
			respond(w, r, body)
			return
		}
		rec.mu.Lock()
		rec.bodies = append(rec.bodies, body)
		rec.headers = append(rec.headers, r.Header.Clone())
		rec.paths = append(rec.paths, r.URL.RequestURI())
		rec.mu.Unlock()
		respond(w, r, body)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) body(i int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[i]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

// sentBodies records the bodies an SDK sends (as an SDK middleware or transport).
type sentBodies struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
}

func (s *sentBodies) add(req *http.Request) error {
	if req.Body == nil {
		return nil
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.headers = append(s.headers, req.Header.Clone())
	s.mu.Unlock()
	return nil
}

// checkHeadersPassed checks that every header the client set reached the upstream
// with the same values.
func checkHeadersPassed(t *testing.T, sent, got http.Header) {
	t.Helper()
	for k, vs := range sent {
		if d := cmp.Diff(vs, got.Values(k)); d != "" {
			t.Errorf("header %s (-sent +upstream):\n%s", k, d)
		}
	}
}

func (s *sentBodies) get(i int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[i]
}

// proxyEnv is a server under test with its store, log and upstreams.
type proxyEnv struct {
	srv   *server.Server
	http  *httptest.Server
	db    *storage.DB
	dbPth string
	log   *testkit.SyncBuffer
}

// newProxy starts a server on a SQLite store in a temp dir. opts.Store, Ledger (when
// nil) and Logger are filled in; Config defaults to testConfig and Scorer to
// noiseScorer when unset.
func newProxy(t testing.TB, opts server.Options) *proxyEnv {
	t.Helper()
	dbPath := filepath.Join(t.TempDir(), "pa.db")
	db, err := storage.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return newProxyOn(t, opts, db, dbPath)
}

// newProxyOn is newProxy on the open store db (found at dsn).
func newProxyOn(t testing.TB, opts server.Options, db *storage.DB, dsn string) *proxyEnv {
	t.Helper()
	logBuf := &testkit.SyncBuffer{}
	opts.Store = db
	if opts.Ledger == nil {
		opts.Ledger = db
	}
	opts.Logger = slog.New(slog.NewTextHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.Config.RecallTool == "" {
		opts.Config = testConfig()
	}
	if opts.Scorer == nil {
		opts.Scorer = noiseScorer
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Flush(context.Background()) }) // before the store closes
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &proxyEnv{srv: srv, http: hs, db: db, dbPth: dsn, log: logBuf}
}

// checkOnlyChanged checks that got equals sent except inside the JSON values at the
// given gjson paths (located independently in each body), and returns the values'
// raw bytes in got. Paths must be in document order.
func checkOnlyChanged(t *testing.T, sent, got []byte, paths []string) []string {
	t.Helper()
	var raws []string
	pos, gpos := 0, 0
	for _, p := range paths {
		a, b := gjson.GetBytes(sent, p), gjson.GetBytes(got, p)
		if !a.Exists() || !b.Exists() {
			t.Fatalf("path %s missing (sent %v, got %v)", p, a.Exists(), b.Exists())
		}
		if !bytes.Equal(sent[pos:a.Index], got[gpos:b.Index]) {
			t.Errorf("bytes before %s differ:\nsent %q\ngot  %q", p, clip(sent[pos:a.Index]), clip(got[gpos:b.Index]))
		}
		raws = append(raws, b.Raw)
		pos, gpos = a.Index+len(a.Raw), b.Index+len(b.Raw)
	}
	if !bytes.Equal(sent[pos:], got[gpos:]) {
		t.Errorf("bytes after the last changed value differ:\nsent %q\ngot  %q", clip(sent[pos:]), clip(got[gpos:]))
	}
	return raws
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:150]) + " ... " + string(b[len(b)-150:])
	}
	return string(b)
}
