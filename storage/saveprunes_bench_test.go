package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/ledger"
	"github.com/pruneadvisor/pruneadvisor/storage/pgtest"
)

// benchPrunes is the number of outputs one benchmarked rewrite prunes: the cold
// request of BenchmarkProxy200k (server) prunes about 40.
const benchPrunes = 40

// BenchmarkSavePrunes stores one rewrite per iteration, as the advisor's apply does
// on a session's first request: benchPrunes distinct originals of about 11 KB (the
// size of that benchmark's tool results) and their stubs, in one SavePrunes (one
// transaction, fsynced on SQLite). ns/op is per rewrite.
func BenchmarkSavePrunes(b *testing.B) {
	for _, f := range fixtures {
		b.Run(f.name, func(b *testing.B) {
			db := openDB(b, benchDSN(b, f))
			ctx := context.Background()
			body := strings.Repeat("0123456789abcdef", 11_000/16)
			b.SetBytes(int64(benchPrunes * len(body)))
			defer reportCPU(b, cpuTime())
			i := 0
			for b.Loop() {
				session := fmt.Sprintf("bench-%d", i)
				prunes := make([]advisor.Prune, benchPrunes)
				for k := range prunes {
					key := fmt.Sprintf("call_%04d", k)
					prunes[k] = prune(session, key, session+key+body, fmt.Sprintf("[pruned: read src/%s.go, 2,750 tokens, score 0.08; recall(%q) restores it]", key, advisor.RecallID(session, key)))
				}
				if err := db.SavePrunes(ctx, prunes); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkSessionVersion reads one session's version per iteration, as every
// request's first advisor phase does.
func BenchmarkSessionVersion(b *testing.B) {
	for _, f := range fixtures {
		b.Run(f.name, func(b *testing.B) {
			db := openDB(b, benchDSN(b, f))
			ctx := context.Background()
			if err := db.SavePrunes(ctx, []advisor.Prune{prune("s", "k", "text", "[pruned]")}); err != nil {
				b.Fatal(err)
			}
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				v, err := db.SessionVersion(ctx, "s")
				if err != nil || v != 1 {
					b.Fatalf("SessionVersion = %d, %v; want 1", v, err)
				}
			}
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used so far, all its
// threads together (getrusage(2)).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports cpu-us/op: the process's CPU time since start per iteration
// (building each iteration's records included). Unlike ns/op it hardly moves with
// the machine's load; it leaves out the time spent waiting for the disk (fsync).
func reportCPU(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(cpuTime()-start)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
	}
}

// benchDSN is a fresh database of f's backend for a benchmark.
func benchDSN(b *testing.B, f fixture) string {
	if f.kind == postgresBackend {
		return pgtest.URL(b)
	}
	return filepath.Join(b.TempDir(), "bench.db")
}

// BenchmarkRecordBatch writes one record round per iteration, as the proxy's record
// queue does after a step that scored every card of a 200k-token session (40 asks,
// 40 decisions, one step record): one crash-safe commit.
func BenchmarkRecordBatch(b *testing.B) {
	for _, f := range fixtures {
		b.Run(f.name, func(b *testing.B) {
			db := openDB(b, benchDSN(b, f))
			ctx := context.Background()
			step := 0
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				step++
				asks := make([]advisor.AskRecord, benchPrunes)
				ds := make([]advisor.DecisionRecord, benchPrunes)
				for k := range asks {
					key := fmt.Sprintf("call_%04d", k)
					asks[k] = advisor.AskRecord{SessionID: "bench", OutputKey: key, Step: step, CardHash: "0123456789abcdef", Scorer: "fitted", Score: 0.4, OK: true, Tokens: 2750}
					ds[k] = advisor.DecisionRecord{SessionID: "bench", OutputKey: key, Step: step, Decision: advisor.DecisionKeep, Reason: "score 0.40 >= cutoff 0.25", Score: 0.4, Tokens: 2750}
				}
				steps := []advisor.StepRecord{{SessionID: "bench", Step: step, ContextTokens: 120_000, FullTokens: 219_000}}
				if err := db.RecordBatch(ctx, asks, ds, steps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecordRound writes what the proxy's background writers write after one
// steady step of a session: a record round of one decision and the step record
// (RecordBatch, one crash-safe commit) and the response's ledger entry
// (RecordLedger, one commit).
func BenchmarkRecordRound(b *testing.B) {
	for _, f := range fixtures {
		b.Run(f.name, func(b *testing.B) {
			db := openDB(b, benchDSN(b, f))
			ctx := context.Background()
			step := 0
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				step++
				ds := []advisor.DecisionRecord{{SessionID: "bench", OutputKey: fmt.Sprintf("call_%04d", step), Step: step, Decision: advisor.DecisionKeep, Reason: "protected", Tokens: 2750}}
				steps := []advisor.StepRecord{{SessionID: "bench", Step: step, ContextTokens: 120_000, FullTokens: 219_000}}
				if err := db.RecordBatch(ctx, nil, ds, steps); err != nil {
					b.Fatal(err)
				}
				e := ledger.Entry{SessionID: "bench", Step: step, Route: "anthropic", Provider: "anthropic", Model: "claude-test", Status: 200, Result: ledger.ResultOK}
				if err := db.RecordLedger(ctx, []ledger.Entry{e}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSavePrunesSteady stores one rewrite per iteration as a proxy serving a
// steady stream of requests does (BenchmarkProxy200k/steady-rewrites, server): ten
// distinct originals of about 11 KB and their stubs in one SavePrunes, into an
// SQLite database already holding 2,000 outputs (its WAL then emptied), with 2 ms
// between commits (the rest of a request's work). commit-p50-ms and commit-p99-ms are over the
// SavePrunes calls, wal-mb the size of the WAL file at the end (it grows when the
// WAL never restarts: storage/checkpoint.go catchUp). ns/op includes the pauses.
func BenchmarkSavePrunesSteady(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	db := openDB(b, path)
	ctx := context.Background()
	body := strings.Repeat("0123456789abcdef", 11_000/16)
	rewrite := func(session string, n int) []advisor.Prune {
		prunes := make([]advisor.Prune, n)
		for k := range prunes {
			key := fmt.Sprintf("call_%04d", k)
			prunes[k] = prune(session, key, session+key+body, fmt.Sprintf("[pruned: read src/%s.go, 2,750 tokens, score 0.08; recall(%q) restores it]", key, advisor.RecallID(session, key)))
		}
		return prunes
	}
	for i := range 50 {
		if err := db.SavePrunes(ctx, rewrite(fmt.Sprintf("fill-%d", i), benchPrunes)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for i := range b.N {
		prunes := rewrite(fmt.Sprintf("steady-%d", i), 10)
		t0 := time.Now()
		if err := db.SavePrunes(ctx, prunes); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		time.Sleep(2 * time.Millisecond)
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(ms(0.5), "commit-p50-ms")
	b.ReportMetric(ms(0.99), "commit-p99-ms")
	if st, err := os.Stat(path + "-wal"); err == nil {
		b.ReportMetric(float64(st.Size())/(1<<20), "wal-mb")
	}
}

// BenchmarkSessionCatchUp reads what a replica reads before a step that follows a
// step another replica advised (advisor syncStore): the session's mark, then the
// asks of that step and its step record (SessionHistoryBetween), in a session of
// 100 steps with 40 asks each. ns/op is per catch-up.
func BenchmarkSessionCatchUp(b *testing.B) {
	for _, f := range fixtures {
		b.Run(f.name, func(b *testing.B) {
			db := openDB(b, benchDSN(b, f))
			ctx := context.Background()
			const steps, asks = 100, 40
			for step := 1; step <= steps; step++ {
				as := make([]advisor.AskRecord, asks)
				for k := range as {
					as[k] = advisor.AskRecord{SessionID: "s", OutputKey: fmt.Sprintf("call_%04d", k), Step: step, Scorer: "lexical", Score: 0.3, OK: true}
				}
				if err := db.RecordBatch(ctx, as, nil, []advisor.StepRecord{{SessionID: "s", Step: step, At: time.Now(), ContextTokens: 1000 * step}}); err != nil {
					b.Fatal(err)
				}
			}
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				m, err := db.SessionMark(ctx, "s")
				if err != nil || m.Step != steps {
					b.Fatalf("SessionMark = %+v, %v; want step %d", m, err, steps)
				}
				h, err := db.SessionHistoryBetween(ctx, "s", steps-1, steps+1)
				if err != nil || len(h.Asks) != asks || h.Last.Step != steps {
					b.Fatalf("SessionHistoryBetween: %d asks, last step %d, %v; want %d and %d", len(h.Asks), h.Last.Step, err, asks, steps)
				}
			}
		})
	}
}
