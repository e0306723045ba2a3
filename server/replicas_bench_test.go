package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/server"
	"github.com/pruneadvisor/pruneadvisor/storage"
	"github.com/pruneadvisor/pruneadvisor/storage/pgtest"
)

// BenchmarkReplicas200k is BenchmarkProxy200k/steady-rewrites (the same
// 200,000-token sessions of 20 requests, Config.PriceForced off) on one server and
// on two replicas sharing one store, each session's requests alternating between
// them, so that every step of a replica follows a step the other advised: the
// added latency of a proxy that reads what the other replica did (asks, step
// record, stubs) before each step, beside a bare httputil.ReverseProxy measured in
// the same loop. The store is an SQLite file, or a PostgreSQL schema on the pgtest
// server with PRUNEADVISOR_BENCH_POSTGRES=1.
func BenchmarkReplicas200k(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("replicas-%d", n), func(b *testing.B) {
			cfg := advisor.DefaultConfig()
			cfg.PriceForced = false
			srvs, up := benchReplicaSet(b, cfg, n)
			hs := make([]http.Handler, n)
			for i, s := range srvs {
				hs[i] = s.Handler()
			}
			bare := bareProxy(up)
			const perSession = 20
			var lat, bareLat []time.Duration
			var cpu time.Duration
			var sess *bigSession
			var id string
			rw := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if i%perSession == 0 {
					sess = &bigSession{s: 3000 + i/perSession}
					id = fmt.Sprintf("replicas-%d-%d", n, i/perSession)
					send(b, hs[0], id, sess.reuse(bigTurns))
				}
				body := sess.reuse(bigTurns + 1 + i%perSession)
				bareLat = append(bareLat, send(b, bare, id, body))
				before := 0.0
				for _, s := range srvs {
					before += rewrites(b, s)
				}
				h := hs[(1+i)%n] // the first timed request goes to the replica that did not advise the untimed one
				b.StartTimer()
				c0 := cpuTime()
				lat = append(lat, send(b, h, id, body))
				cpu += cpuTime() - c0
				b.StopTimer()
				after := 0.0
				for _, s := range srvs {
					after += rewrites(b, s)
				}
				if after > before {
					rw++
				}
				b.StartTimer()
			}
			reportLatency(b, "", lat)
			reportAdded(b, lat, bareLat)
			reportCPU(b, cpu, len(lat))
			b.ReportMetric(float64(rw)/float64(len(lat)), "rewrites/op")
		})
	}
}

// benchReplicaSet returns n servers on one store (as benchProxyWith makes one),
// each with a connection pool of its own, as separate processes have.
func benchReplicaSet(b *testing.B, cfg advisor.Config, n int) ([]*server.Server, *discardTransport) {
	up := &discardTransport{}
	dsn := filepath.Join(b.TempDir(), "replicas.db")
	if os.Getenv("PRUNEADVISOR_BENCH_POSTGRES") == "1" {
		dsn = pgtest.URL(b)
	}
	var srvs []*server.Server
	for range n {
		db, err := storage.Open(context.Background(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = db.Close() })
		opts := server.Options{Config: cfg, AnthropicUpstream: "http://upstream.invalid", Transport: up}
		srvs = append(srvs, newProxyOn(b, opts, db, dsn).srv)
	}
	return srvs, up
}
