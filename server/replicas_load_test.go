package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/storage/pgtest"
)

// loadSetup is one way to serve the load: a store and a number of replicas on it.
type loadSetup struct {
	name     string
	replicas int
	fresh    func(t *testing.T) string // the dsn of a new, empty store
}

var (
	sqliteStore   = func(t *testing.T) string { return filepath.Join(t.TempDir(), "pa.db") }
	postgresStore = func(t *testing.T) string { return pgtest.URL(t) }
)

var storageErrors = regexp.MustCompile(`(?m)^pruneadvisor_storage_errors_total (\d+)$`)

// The load of TestLoadAndShutdown served by replicas sharing one store: each
// session's requests alternate between two server.Server instances (two replicas,
// each with its own advisor state and its own connection pool) on one PostgreSQL
// database. No request fails, no replica counts a storage error, and pruning happens.
// The default run is a bounded slice on PostgreSQL x 2; PRUNEADVISOR_LOAD=1 runs 200
// sessions x 50 requests on SQLite x 1, PostgreSQL x 1 and PostgreSQL x 2 in the same
// run, after the direct baseline, and logs the figures docs/PERFORMANCE.md reports
// ("Replicas on PostgreSQL").
func TestLoadReplicas(t *testing.T) {
	sessions, requests := 20, 8
	setups := []loadSetup{{"postgres-x2", 2, postgresStore}}
	if fullLoad {
		sessions, requests = 200, 50
		if v := os.Getenv("PRUNEADVISOR_LOAD_SIZE"); v != "" {
			fmt.Sscanf(v, "%dx%d", &sessions, &requests)
		}
		setups = []loadSetup{{"sqlite-x1", 1, sqliteStore}, {"postgres-x1", 1, postgresStore}, {"postgres-x2", 2, postgresStore}}
	}
	pgtest.Base(t) // skip (or fail in CI) before any work when there is no server
	up := newRecorder(t, okJSON)
	up.discard.Store(true)
	transport := &http.Transport{MaxIdleConnsPerHost: sessions, MaxConnsPerHost: 0}
	client := &http.Client{Transport: transport, Timeout: 60 * time.Second}
	defer transport.CloseIdleConnections()
	if fullLoad {
		direct, errs := runLoad(t, client, up.URL, sessions, requests)
		if errs != 0 {
			t.Fatalf("%d errors talking to the upstream directly", errs)
		}
		t.Logf("direct: %d requests, p50 %v p99 %v", len(direct), percentile(direct, 0.5), percentile(direct, 0.99))
	}
	for _, setup := range setups {
		t.Run(setup.name, func(t *testing.T) {
			dsn := setup.fresh(t)
			var envs []*proxyEnv
			var bases []string
			for range setup.replicas {
				db, err := storage.Open(context.Background(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				env := newProxyOn(t, server.Options{OpenAIUpstream: up.URL}, db, dsn)
				envs = append(envs, env)
				bases = append(bases, env.http.URL)
			}
			cpu0, pg0 := cpuTime(), postmasterCPU(t)
			start := time.Now()
			lat, errs := runLoadOn(t, client, bases, sessions, requests)
			wall := time.Since(start)
			cpu := cpuTime() - cpu0
			if errs != 0 {
				t.Fatalf("%d of %d requests failed", errs, len(lat))
			}
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			pruned, storeErrs := 0.0, 0
			for i, env := range envs {
				if err := env.srv.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				m := scrape(t, env.http.URL)
				se := storageErrors.FindStringSubmatch(m)
				if se == nil {
					t.Fatalf("replica %d: no pruneadvisor_storage_errors_total", i)
				}
				n, _ := strconv.Atoi(se[1])
				storeErrs += n
				if n > 0 {
					// Under a full load on a busy machine a step may wait past the advise
					// timeout; the bounded run must see none.
					t.Logf("replica %d: %d requests with a storage error, the first logged: %s", i, n, firstLine(env.log.String(), "storage"))
					if !fullLoad {
						t.Errorf("replica %d: %d storage errors; want 0", i, n)
					}
				}
				for _, v := range regexp.MustCompile(`(?m)^pruneadvisor_outputs_pruned_total\{[^}]*\} (\S+)$`).FindAllStringSubmatch(m, -1) {
					n, _ := strconv.ParseFloat(v[1], 64)
					pruned += n
				}
			}
			stubs := countStubs(t, dsn)
			pgCPU := "no PostgreSQL server"
			if storage.IsPostgres(dsn) {
				pgCPU = "PostgreSQL server CPU not measured (" + postmasterEnv + " unset)"
			}
			if pg0 >= 0 && storage.IsPostgres(dsn) {
				for _, env := range envs {
					env.http.Close()
					_ = env.db.Close() // its backends exit and the postmaster reaps their CPU time
				}
				time.Sleep(200 * time.Millisecond)
				pgCPU = fmt.Sprintf("PostgreSQL server %v CPU per request", ((postmasterCPU(t) - pg0) / time.Duration(len(lat))).Round(10*time.Microsecond))
			}
			if pruned == 0 || stubs == 0 {
				t.Errorf("nothing was pruned under load (pruned %v, %d stubs stored)", pruned, stubs)
			}
			t.Logf("%s: %d sessions x %d requests in %v (%.0f req/s, %v CPU per request in this process: load generator, replicas and upstream; %s); latency p50 %v p99 %v max %v; %d requests with a storage error; %d stubs stored; heap after GC %.1f MiB",
				setup.name, sessions, requests, wall.Round(time.Millisecond), float64(len(lat))/wall.Seconds(), (cpu / time.Duration(len(lat))).Round(10*time.Microsecond),
				pgCPU, percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1), storeErrs, stubs, float64(ms.HeapAlloc)/(1<<20))
		})
	}
}

// countStubs counts the stubs stored in the store at dsn, read with the database's
// own driver.
func countStubs(t *testing.T, dsn string) int {
	t.Helper()
	driver, name := "sqlite", dsn
	if storage.IsPostgres(dsn) {
		driver = "pgx"
	}
	db, err := sql.Open(driver, name)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM stubs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// postmasterEnv names the PostgreSQL server's postmaster process (its pid, the first
// line of postmaster.pid in its data folder), whose CPU time TestLoadReplicas then
// reports.
const postmasterEnv = "PRUNEADVISOR_LOAD_POSTMASTER"

// postmasterCPU is the CPU time of the postmaster and of its exited children (the
// backends of closed connections: utime, stime, cutime and cstime of
// /proc/PID/stat, in clock ticks of 10 ms), or -1 when postmasterEnv is unset.
func postmasterCPU(t *testing.T) time.Duration {
	pid := os.Getenv(postmasterEnv)
	if pid == "" {
		return -1
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatalf("%s=%s: %v", postmasterEnv, pid, err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // fields 14-17 of proc(5), counted from field 3
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// firstLine returns the first line of s that holds sub ("" when none).
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
