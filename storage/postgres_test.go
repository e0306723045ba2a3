package storage

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/storage/pgtest"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestIsPostgresAndRedact(t *testing.T) {
	tests := []struct {
		dsn    string
		pg     bool
		redact string
	}{
		{"/var/lib/pa.db", false, "/var/lib/pa.db"},
		{"pa.db", false, "pa.db"},
		{"postgres://alice:s3cret@db.example.com:5433/pa?sslmode=require", true, "postgres://alice@db.example.com:5433/pa?sslmode=require"},
		{"postgresql://alice@db/pa", true, "postgresql://alice@db/pa"},
		{"postgres://db/pa?password=s3cret&sslpassword=k3y&application_name=x", true, "postgres://db/pa?application_name=x&password=xxxxx&sslpassword=xxxxx"},
		{"postgres://alice:s3cret@[::1:5432/pa", true, "postgres://(a URL that does not parse)"},
		{"mysql://alice:s3cret@db/pa", false, "mysql://alice:s3cret@db/pa"}, // an SQLite file of that name
	}
	for _, tt := range tests {
		if got := IsPostgres(tt.dsn); got != tt.pg {
			t.Errorf("IsPostgres(%q) = %v, want %v", tt.dsn, got, tt.pg)
		}
		if got := Redact(tt.dsn); got != tt.redact {
			t.Errorf("Redact(%q) = %q, want %q", tt.dsn, got, tt.redact)
		}
	}
}

// Opening a PostgreSQL URL that cannot be used fails at once with the host and port
// (or what was wrong with the URL), and never shows a password.
func TestOpenPostgresErrors(t *testing.T) {
	const secret = "s3cret-Pw"
	addr := closedPort(t)
	host, port, _ := net.SplitHostPort(addr)
	tests := []struct {
		name, dsn string
		want      error
		text      []string
	}{
		{"refused", "postgres://alice:" + secret + "@" + addr + "/pa", ErrUnreachable,
			[]string{"storage: open postgres://alice@" + addr + "/pa: cannot reach the PostgreSQL server at " + addr + ": ", "connection refused"}},
		{"password parameter", "postgres://alice@" + addr + "/pa?password=" + secret, ErrUnreachable,
			[]string{"at " + addr + ": ", "password=xxxxx"}},
		{"host and port parameters", "postgres:///pa?host=" + host + "&port=" + port + "&user=bob&password=" + secret, ErrUnreachable,
			[]string{"cannot reach the PostgreSQL server at " + addr}},
		{"bad port", "postgres://alice:" + secret + "@localhost:notaport/pa", ErrInvalid, []string{"storage: open postgres://", "invalid"}},
		{"unknown parameter value", "postgres://alice:" + secret + "@" + addr + "/pa?sslmode=sometimes", ErrInvalid, []string{"sslmode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(t.Context(), tt.dsn)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%s) succeeded", tt.dsn)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Open = %v, want errors.Is %v", err, tt.want)
			}
			for _, s := range tt.text {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Open = %q, want it to say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), url.QueryEscape(secret)) {
				t.Errorf("the error shows the password: %q", err)
			}
		})
	}
}

// A server that answers but refuses: the error names the server and the database,
// and is not ErrUnreachable.
func TestOpenPostgresRefused(t *testing.T) {
	base, _ := pgtest.Base(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/pruneadvisor_no_such_database"
	_, err = Open(t.Context(), u.String())
	if err == nil || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "refused the connection") ||
		!strings.Contains(err.Error(), `database "pruneadvisor_no_such_database" does not exist`) {
		t.Errorf("Open of an unknown database = %v; want the server's refusal naming it", err)
	}
}

// Two handles (two replicas) save rewrites of the same outputs at the same moment,
// each with stubs of its own words and in the opposite order: in every round exactly
// one rewrite is stored whole (first writer wins, all or nothing), the other fails
// with advisor.ErrConflict and stores nothing, no stub mixes the two, nothing
// deadlocks, and the version counts exactly the stubs stored.
func TestConcurrentRewritesFirstWriterWins(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		handles := [2]*DB{openDB(t, dsn), openDB(t, dsn)}
		const rounds = 30
		for r := range rounds {
			x, y := fmt.Sprintf("x%d", r), fmt.Sprintf("y%d", r)
			batches := [2][]advisor.Prune{
				{prune("s", x, "text "+x, "[A "+x+"]"), prune("s", y, "text "+y, "[A "+y+"]")},
				{prune("s", y, "text "+y, "[B "+y+"]"), prune("s", x, "text "+x, "[B "+x+"]")},
			}
			var errs [2]error
			var start, wg sync.WaitGroup
			start.Add(1)
			for i := range handles {
				wg.Go(func() {
					start.Wait()
					errs[i] = handles[i].SavePrunes(ctx, batches[i])
				})
			}
			start.Done()
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner == -1:
					winner = i
				case err == nil:
					t.Fatalf("round %d: both rewrites stored", r)
				case !errors.Is(err, advisor.ErrConflict) || !errors.Is(err, ErrConflict):
					t.Fatalf("round %d: handle %d: %v; want nil or ErrConflict", r, i, err)
				}
			}
			if winner == -1 {
				t.Fatalf("round %d: neither rewrite stored: %v", r, errs)
			}
			letter := []string{"A", "B"}[winner]
			stubs, err := handles[1-winner].SessionStubs(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{x, y} {
				if got, want := stubs[key].Stub, "["+letter+" "+key+"]"; got != want {
					t.Errorf("round %d: the loser reads stub %q for %s; want the winner's %q", r, got, key, want)
				}
			}
		}
		if v, err := handles[0].SessionVersion(ctx, "s"); err != nil || v != 2*rounds {
			t.Errorf("SessionVersion = %d, %v; want %d (two stubs a round)", v, err, 2*rounds)
		}
		if got := [3]int{count(t, handles[0], "outputs"), count(t, handles[0], "blobs"), count(t, handles[0], "stubs")}; got != [3]int{2 * rounds, 2 * rounds, 2 * rounds} {
			t.Errorf("outputs, blobs, stubs = %v; want %d each", got, 2*rounds)
		}
	})
}

// Replicas pruning different outputs of one session at once, and recalls recorded
// meanwhile: every stub and recall is counted once in SessionVersion, whichever
// handle asks.
func TestConcurrentSessionVersion(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		handles := [2]*DB{openDB(t, dsn), openDB(t, dsn)}
		const perHandle = 40
		var wg sync.WaitGroup
		errs := make(chan error, 4*perHandle)
		for i, db := range handles {
			wg.Go(func() {
				for j := range perHandle {
					p := prune("s", fmt.Sprintf("h%d-%d", i, j), fmt.Sprintf("text %d %d", i, j), "[stub]")
					if err := db.SavePrunes(ctx, []advisor.Prune{p}); err != nil {
						errs <- err
						continue
					}
					if j%4 == 0 {
						e := advisor.RecallEvent{RecallID: p.Original.RecallID, SessionID: "s", OutputKey: p.Original.OutputKey}
						if err := handles[1-i].RecordRecall(ctx, e); err != nil {
							errs <- err
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		want := int64(2*perHandle + 2*perHandle/4)
		for i, db := range handles {
			if v, err := db.SessionVersion(ctx, "s"); err != nil || v != want {
				t.Errorf("handle %d: SessionVersion = %d, %v; want %d", i, v, err, want)
			}
		}
	})
}

// Two machines committing the replay of one session at once: both succeed and the
// session's rows are those of one commit.
func TestConcurrentCommitReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		handles := [2]*DB{openDB(t, dsn), openDB(t, dsn)}
		rec := replayRecord()
		var wg sync.WaitGroup
		var errs [2][]error
		for i, db := range handles {
			wg.Go(func() {
				for range 10 {
					if err := db.CommitReplay(ctx, rec); err != nil {
						errs[i] = append(errs[i], err)
					}
				}
			})
		}
		wg.Wait()
		if len(errs[0])+len(errs[1]) > 0 {
			t.Errorf("CommitReplay errors: %v", errs)
		}
		counts := [6]int{count(t, handles[0], "asks"), count(t, handles[0], "decisions"), count(t, handles[0], "evidence"),
			count(t, handles[0], "replay_outputs"), count(t, handles[0], "replay_steps"), count(t, handles[0], "replay_runs")}
		if counts != [6]int{2, 1, 2, 2, 3, 1} {
			t.Errorf("asks, decisions, evidence, outputs, steps, runs = %v, want [2 1 2 2 3 1]", counts)
		}
	})
}
