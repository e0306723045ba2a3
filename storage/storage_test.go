package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/storage/pgtest"
)

// tables lists the tables of db's schema by name.
func tables(t *testing.T, db *DB) []string {
	t.Helper()
	q := `SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`
	if db.kind == postgresBackend {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`
	}
	rows, err := db.r.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// wantVersion is each backend's schema version: the files in migrations/ and
// pgmigrations/.
var wantVersion = map[backend]int{sqliteBackend: 16, postgresBackend: 10}

// Both backends end with the same tables, whatever the number of migrations that
// built them.
func TestOpenMigratesOnceAndReopens(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		for round := 1; round <= 2; round++ {
			db, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("round %d: Open: %v", round, err)
			}
			v, err := db.SchemaVersion(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := wantVersion[db.kind]
			if v != want || db.LatestSchemaVersion() != want {
				t.Errorf("round %d: SchemaVersion = %d, LatestSchemaVersion = %d, want %d and %d", round, v, db.LatestSchemaVersion(), want, want)
			}
			if got := count(t, db, "schema_version"); got != want {
				t.Errorf("round %d: schema_version has %d rows, want %d (each migration applied once)", round, got, want)
			}
			tabs := []string{"asks", "blobs", "decisions", "evidence", "ledger", "outputs", "recalls", "replay_outputs", "replay_runs", "replay_settings", "replay_steps", "schema_version", "secrets", "session_versions", "sessions", "steps", "stubs"}
			if diff := cmp.Diff(tabs, tables(t, db)); diff != "" {
				t.Errorf("round %d: tables (-want +got):\n%s", round, diff)
			}
			if round == 1 {
				if err := db.SaveOriginal(ctx, original("s", "k", "kept across reopen")); err != nil {
					t.Fatal(err)
				}
			} else {
				o, err := db.Original(ctx, advisor.RecallID("s", "k"))
				if err != nil || o.Text != "kept across reopen" {
					t.Errorf("after reopen: Original = %q, %v; want the saved text", o.Text, err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Both backends keep the same columns: every column of SQLite's tables is in
// PostgreSQL's, in the same table, and no other.
func TestSchemasAgree(t *testing.T) {
	var cols [2]map[string]bool
	eachBackend(t, func(t *testing.T, dsn string) {
		db := openDB(t, dsn)
		q := `SELECT m.name || '.' || p.name FROM sqlite_schema m, pragma_table_info(m.name) p WHERE m.type = 'table'`
		if db.kind == postgresBackend {
			q = `SELECT table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = current_schema()`
		}
		rows, err := db.r.QueryContext(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols[db.kind] = map[string]bool{}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			cols[db.kind][c] = true
		}
	})
	if cols[postgresBackend] == nil {
		return // skipped
	}
	if len(cols[sqliteBackend]) < 100 {
		t.Fatalf("SQLite has %d columns; want the whole schema", len(cols[sqliteBackend]))
	}
	if diff := cmp.Diff(cols[sqliteBackend], cols[postgresBackend]); diff != "" {
		t.Errorf("columns (-sqlite +postgres):\n%s", diff)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		if _, err := db.w.ExecContext(ctx, `INSERT INTO schema_version(version, name, applied_at) VALUES (99, '0099_future.sql', 'x')`); err != nil {
			t.Fatal(err)
		}
		db2, err := Open(ctx, dsn)
		if err == nil {
			db2.Close()
			t.Fatal("Open of a version-99 database succeeded")
		}
		want := fmt.Sprintf("migration 0001_init.sql: unsupported schema version: database is at version 99, newer than this program's %d", db.LatestSchemaVersion())
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open = %v, want ErrSchema saying %q", err, want)
		}
	})
}

func TestLoadMigrations(t *testing.T) {
	tests := []struct {
		name string
		fsys fstest.MapFS
		want []int
		err  string
	}{
		{"ordered", fstest.MapFS{"m/0002_b.sql": {Data: []byte("B")}, "m/0001_a.sql": {Data: []byte("A")}}, []int{1, 2}, ""},
		{"gap", fstest.MapFS{"m/0001_a.sql": {}, "m/0003_c.sql": {}}, nil, "m/0003_c.sql: version 3, want 2"},
		{"duplicate", fstest.MapFS{"m/0001_a.sql": {}, "m/0001_b.sql": {}}, nil, "version 1, want 2"},
		{"bad name", fstest.MapFS{"m/1_a.sql": {}}, nil, "m/1_a.sql: name must be NNNN_lowercase_name.sql"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := loadMigrations(tt.fsys, "m")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("loadMigrations = %v, want error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("versions (-want +got):\n%s", diff)
			}
		})
	}
}

// fiveMB is 5 MiB of pseudo-random bytes (fixed seed): invalid UTF-8 and NULs included.
func fiveMB() string {
	r := rand.New(rand.NewChaCha8([32]byte{1, 2, 3}))
	b := make([]byte, 5<<20)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

func TestOriginalRoundTripByteForByte(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		big := fiveMB()
		tests := []struct{ name, text string }{
			{"ascii", "package main\n\nfunc main() {}\n"},
			{"invalid utf-8", "ok \xff\xfe\xc3 broken \xe2\x82"},
			{"nuls", "\x00a\x00\x00b\x00"},
			{"empty", ""},
			{"crlf and emoji", "line\r\nü 🎉\r\n"},
			{"5 MiB random", big},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				want := original("sess", fmt.Sprintf("call_%d", i), tt.text)
				want.Hash = "" // computed by SaveOriginal
				if err := db.SaveOriginal(ctx, want); err != nil {
					t.Fatalf("SaveOriginal: %v", err)
				}
				got, err := db.Original(ctx, want.RecallID)
				if err != nil {
					t.Fatalf("Original: %v", err)
				}
				if got.Text != tt.text {
					t.Fatalf("Text differs: got %d bytes, want %d", len(got.Text), len(tt.text))
				}
				sum := sha256.Sum256([]byte(tt.text))
				want.Hash = hex.EncodeToString(sum[:])
				if diff := cmp.Diff(want, got); diff != "" && len(tt.text) < 1000 {
					t.Errorf("Original (-want +got):\n%s", diff)
				} else if diff != "" {
					t.Errorf("Original differs outside Text")
				}
				// Independent route: the blob as the database stores it, and its byte length.
				var raw []byte
				var n int
				if err := db.w.QueryRowContext(ctx, `SELECT text, bytes FROM blobs WHERE hash = $1`, want.Hash).Scan(&raw, &n); err != nil {
					t.Fatal(err)
				}
				if string(raw) != tt.text || n != len(tt.text) {
					t.Errorf("stored blob: %d bytes (column says %d), want %d identical bytes", len(raw), n, len(tt.text))
				}
			})
		}
		if len(big) != 5<<20 || !strings.Contains(big, "\x00") {
			t.Errorf("5 MiB case is %d bytes, NUL present %v; want 5242880 and true", len(big), strings.Contains(big, "\x00"))
		}
	})
}

func TestSameTextStoredOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		text := strings.Repeat("identical output\n", 100)
		a, b := original("s1", "call_a", text), original("s2", "call_b", text)
		for _, o := range []advisor.Original{a, b} {
			if err := db.SaveOriginal(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		if got := [2]int{count(t, db, "blobs"), count(t, db, "outputs")}; got != [2]int{1, 2} {
			t.Errorf("blobs, outputs = %v, want [1 2]", got)
		}
		for _, o := range []advisor.Original{a, b} {
			got, err := db.Original(ctx, o.RecallID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(o, got); diff != "" {
				t.Errorf("Original(%s) (-want +got):\n%s", o.RecallID, diff)
			}
		}
	})
}

func TestSaveOriginalErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		base := original("s", "k", "first text")
		if err := db.SaveOriginal(ctx, base); err != nil {
			t.Fatal(err)
		}
		if err := db.SaveOriginal(ctx, base); err != nil {
			t.Errorf("saving the same original again = %v, want nil (idempotent)", err)
		}
		changed := original("s", "k", "other text")
		otherID := base
		otherID.RecallID = "o_0000000000"
		badID := base
		badID.RecallID = "o_XYZ"
		badHash := base
		badHash.Hash = strings.Repeat("0", 64)
		noSession := original("", "k", "x")
		noSession.RecallID = "o_1111111111"
		tests := []struct {
			name string
			o    advisor.Original
			want error
			text string
		}{
			{"same id other text", changed, ErrConflict, `recall id holds session "s", output "k"`},
			{"same output other id", otherID, ErrConflict, `stored under recall id "` + base.RecallID + `"`},
			{"malformed id", badID, ErrInvalid, `save original "o_XYZ"`},
			{"wrong hash", badHash, ErrInvalid, "is not the SHA-256 of the text"},
			{"no session", noSession, ErrInvalid, "empty session id"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := db.SaveOriginal(ctx, tt.o)
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
					t.Errorf("SaveOriginal = %v, want %v containing %q", err, tt.want, tt.text)
				}
			})
		}
		got, err := db.Original(ctx, base.RecallID)
		if err != nil || got.Text != "first text" {
			t.Errorf("after refused saves: Original = %q, %v; want the first text", got.Text, err)
		}
		if n := count(t, db, "outputs"); n != 1 {
			t.Errorf("outputs rows = %d, want 1", n)
		}
	})
}

func TestOriginalUnknownID(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		db := openDB(t, dsn)
		_, err := db.Original(t.Context(), "o_0123456789")
		if !errors.Is(err, ErrNotFound) || !errors.Is(err, advisor.ErrNotFound) {
			t.Fatalf("Original(unknown) = %v, want ErrNotFound and advisor.ErrNotFound", err)
		}
		want := `storage: original "o_0123456789": not found: no pruned output with this id`
		if err.Error() != want {
			t.Errorf("error text\n got %q\nwant %q", err, want)
		}
	})
}

func TestOriginalCorruptDetected(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		o := original("s", "k", "good bytes")
		if err := db.SaveOriginal(ctx, o); err != nil {
			t.Fatal(err)
		}
		if _, err := db.w.ExecContext(ctx, `UPDATE blobs SET text = $1 WHERE hash = $2`, []byte("evil bytes"), o.Hash); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Original(ctx, o.RecallID); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Original after tampering = %v, want ErrCorrupt", err)
		}
	})
}

func TestSaveStubNeedsOriginal(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		o := original("s", "k", "text")
		stub := advisor.StubRecord{RecallID: o.RecallID, SessionID: "s", OutputKey: "k", Stub: "[pruned]", Step: 5, Reason: "score", Score: 0.1}
		err := db.SaveStub(ctx, stub)
		if !errors.Is(err, ErrNoOriginal) {
			t.Fatalf("SaveStub before SaveOriginal = %v, want ErrNoOriginal", err)
		}
		if !strings.Contains(err.Error(), `save stub "`+o.RecallID+`" (session "s", output "k"): no original stored for this output`) {
			t.Errorf("error text %q does not name the stub and the cause", err)
		}
		if n := count(t, db, "stubs"); n != 0 {
			t.Errorf("stubs rows after failed SaveStub = %d, want 0", n)
		}
		if err := db.SaveOriginal(ctx, o); err != nil {
			t.Fatal(err)
		}
		mismatched := stub
		mismatched.OutputKey = "other"
		if err := db.SaveStub(ctx, mismatched); !errors.Is(err, ErrNoOriginal) {
			t.Errorf("SaveStub with the recall id of another output = %v, want ErrNoOriginal", err)
		}
		if err := db.SaveStub(ctx, stub); err != nil {
			t.Errorf("SaveStub after SaveOriginal = %v", err)
		}
		if n := count(t, db, "stubs"); n != 1 {
			t.Errorf("stubs rows = %d, want 1", n)
		}
	})
}

func TestSessionStubsRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		at := time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.FixedZone("CET", 3600))
		var want = map[string]advisor.StubRecord{}
		for i, key := range []string{"call_1", "call_2", "call_3#2"} {
			o := original("A", key, "text of "+key)
			if err := db.SaveOriginal(ctx, o); err != nil {
				t.Fatal(err)
			}
			s := advisor.StubRecord{RecallID: o.RecallID, SessionID: "A", OutputKey: key,
				Stub: "[pruned: " + key + "; recall(\"" + o.RecallID + "\") restores it]", Step: 10 + i,
				Reason: "score", Score: 0.05 * float64(i), At: at.Add(time.Duration(i) * time.Second)}
			if i == 2 {
				s.Reason, s.Score = "superseded", -1
			}
			if err := db.SaveStub(ctx, s); err != nil {
				t.Fatal(err)
			}
			want[key] = s
		}
		other := original("B", "call_1", "b text")
		if err := db.SaveOriginal(ctx, other); err != nil {
			t.Fatal(err)
		}
		if err := db.SaveStub(ctx, advisor.StubRecord{RecallID: other.RecallID, SessionID: "B", OutputKey: "call_1", Stub: "x", Score: math.NaN()}); err != nil {
			t.Fatal(err)
		}
		// A stub is frozen: a second one for the same output is refused (first writer
		// wins), the same one again is a no-op.
		again := want["call_2"]
		again.Step, again.Stub = 40, "[pruned again]"
		if err := db.SaveStub(ctx, again); !errors.Is(err, ErrConflict) || !errors.Is(err, advisor.ErrConflict) {
			t.Errorf("SaveStub of another stub = %v; want ErrConflict and advisor.ErrConflict", err)
		}
		same := want["call_2"]
		same.Step = 41
		if err := db.SaveStub(ctx, same); err != nil {
			t.Errorf("SaveStub of the same stub text = %v; want nil", err)
		}

		got, err := db.SessionStubs(ctx, "A")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SessionStubs(A) (-want +got):\n%s", diff)
		}
		gotB, err := db.SessionStubs(ctx, "B")
		if err != nil {
			t.Fatal(err)
		}
		if s := gotB["call_1"]; len(gotB) != 1 || !math.IsNaN(s.Score) || !s.At.IsZero() {
			t.Errorf("SessionStubs(B) = %+v, want one stub with NaN score and zero time", gotB)
		}
		none, err := db.SessionStubs(ctx, "nobody")
		if err != nil || none == nil || len(none) != 0 {
			t.Errorf("SessionStubs(unknown) = %v, %v; want an empty non-nil map", none, err)
		}
	})
}

func TestRecallsRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		o := original("s", "k", "text")
		if err := db.SaveOriginal(ctx, o); err != nil {
			t.Fatal(err)
		}
		t0 := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
		want := []advisor.RecallEvent{
			{RecallID: o.RecallID, SessionID: "s", OutputKey: "k", Step: 7, At: t0},
			{RecallID: o.RecallID, SessionID: "s", OutputKey: "k", Step: 0, At: t0.Add(time.Minute)},
		}
		for _, e := range want {
			if err := db.RecordRecall(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		err := db.RecordRecall(ctx, advisor.RecallEvent{RecallID: "o_0123456789", SessionID: "s", OutputKey: "zz"})
		if !errors.Is(err, ErrNoOriginal) {
			t.Errorf("RecordRecall(unknown) = %v, want ErrNoOriginal", err)
		}
		// Step 0 once the session has steps: its latest step (not another session's).
		steps := []advisor.StepRecord{{SessionID: "s", Step: 3, At: t0}, {SessionID: "s", Step: 5, At: t0}, {SessionID: "other", Step: 9, At: t0}}
		if err := db.RecordSteps(ctx, steps); err != nil {
			t.Fatal(err)
		}
		late := advisor.RecallEvent{RecallID: o.RecallID, SessionID: "s", OutputKey: "k", At: t0.Add(2 * time.Minute)}
		if err := db.RecordRecall(ctx, late); err != nil {
			t.Fatal(err)
		}
		late.Step = 5
		want = append(want, late)
		got, err := db.SessionRecalls(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SessionRecalls (-want +got):\n%s", diff)
		}
	})
}

func TestAsksAndDecisions(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		asks := []advisor.AskRecord{
			{SessionID: "s", OutputKey: "a", Step: 4, CardHash: "h1", Scorer: "lexical", Score: 0.125, OK: true, Latency: 1500 * time.Microsecond, Tokens: 80},
			{SessionID: "s", OutputKey: "b", Step: 4, CardHash: "h2", Scorer: "ollama:qwen2.5:0.5b", Score: math.NaN(), FailKind: "timeout", Latency: 30 * time.Second, Tokens: 80},
			{SessionID: "t", OutputKey: "a", Step: 9, CardHash: "h3", Scorer: "lexical", Score: 1, OK: true},
		}
		if err := db.RecordAsks(ctx, asks); err != nil {
			t.Fatal(err)
		}
		all, err := db.Asks(ctx, AskFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(asks, all, cmpopts.EquateNaNs()); diff != "" {
			t.Errorf("Asks(all) (-want +got):\n%s", diff)
		}
		lex, err := db.Asks(ctx, AskFilter{SessionID: "s", Scorer: "lexical"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(asks[:1], lex); diff != "" {
			t.Errorf("Asks(s, lexical) (-want +got):\n%s", diff)
		}
		bad := append([]advisor.AskRecord{asks[0]}, advisor.AskRecord{SessionID: "s"})
		if err := db.RecordAsks(ctx, bad); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "ask 1") {
			t.Errorf("RecordAsks with an empty output key = %v, want ErrInvalid naming ask 1", err)
		}
		if n := count(t, db, "asks"); n != 3 {
			t.Errorf("asks rows after the refused batch = %d, want 3", n)
		}

		ds := []advisor.DecisionRecord{
			{SessionID: "s", OutputKey: "a", Step: 4, Decision: advisor.DecisionPending, Reason: "score", Score: 0.125, Tokens: 900},
			{SessionID: "s", OutputKey: "c", Step: 4, Decision: advisor.DecisionPruned, Reason: "superseded", Score: -1, Superseder: "call_9", Tokens: 4210},
			{SessionID: "s", OutputKey: "a", Step: 5, Decision: advisor.DecisionPruned, Reason: "score", Score: 0.125, Tokens: 900},
		}
		if err := db.RecordDecisions(ctx, ds); err != nil {
			t.Fatal(err)
		}
		pruned, err := db.Decisions(ctx, DecisionFilter{SessionID: "s", Decision: advisor.DecisionPruned})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]advisor.DecisionRecord{ds[1], ds[2]}, pruned); diff != "" {
			t.Errorf("Decisions(s, pruned) (-want +got):\n%s", diff)
		}
		byOutput, err := db.Decisions(ctx, DecisionFilter{OutputKey: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]advisor.DecisionRecord{ds[0], ds[2]}, byOutput); diff != "" {
			t.Errorf("Decisions(output a) (-want +got):\n%s", diff)
		}
		if err := db.RecordDecisions(ctx, nil); err != nil {
			t.Errorf("RecordDecisions(nil) = %v, want nil", err)
		}
	})
}

func TestSessions(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
		s := SessionRow{ID: "b", Format: "claude-code", Name: "b.jsonl", ContentHash: "c1", SettingsHash: "s1", CreatedAt: t0}
		if err := db.SaveSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := db.SaveSession(ctx, SessionRow{ID: "a", Format: "pi"}); err != nil {
			t.Fatal(err)
		}
		// Update: a later CreatedAt does not replace the first, FinishedAt is set.
		upd := s
		upd.SettingsHash, upd.CreatedAt, upd.FinishedAt = "s2", t0.Add(time.Hour), t0.Add(2*time.Hour)
		if err := db.SaveSession(ctx, upd); err != nil {
			t.Fatal(err)
		}
		// A zero FinishedAt does not clear it.
		upd2 := upd
		upd2.FinishedAt = time.Time{}
		if err := db.SaveSession(ctx, upd2); err != nil {
			t.Fatal(err)
		}
		got, err := db.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []SessionRow{
			{ID: "a", Format: "pi"},
			{ID: "b", Format: "claude-code", Name: "b.jsonl", ContentHash: "c1", SettingsHash: "s2", CreatedAt: t0, FinishedAt: t0.Add(2 * time.Hour)},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Sessions (-want +got):\n%s", diff)
		}
		if err := db.SaveSession(ctx, SessionRow{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("SaveSession(no id) = %v, want ErrInvalid", err)
		}
	})
}

func TestEvidenceAndReplayRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		evs := []Evidence{
			{SessionID: "s", OutputKey: "a", UseStep: 8, Proof: "parseConfig", Weight: 2.5},
			{SessionID: "s", OutputKey: "b", UseStep: 9, Proof: "recall", Weight: 10},
		}
		if err := db.RecordEvidence(ctx, evs); err != nil {
			t.Fatal(err)
		}
		got, err := db.Evidence(ctx, EvidenceFilter{SessionID: "s", OutputKey: "b"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(evs[1:], got); diff != "" {
			t.Errorf("Evidence(s, b) (-want +got):\n%s", diff)
		}

		t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
		r := ReplayRun{SessionID: "s", ContentHash: "c", SettingsHash: "x", Scorer: "lexical", Schedule: "3,6,12,24", Status: ReplayRunning, StartedAt: t0}
		id1, err := db.InsertReplayRun(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		r2 := r
		r2.SettingsHash = "y"
		id2, err := db.InsertReplayRun(ctx, r2)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.FinishReplayRun(ctx, id1, ReplayDone, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		done, err := db.ReplayRuns(ctx, ReplayRunFilter{ContentHash: "c", SettingsHash: "x", Status: ReplayDone})
		if err != nil {
			t.Fatal(err)
		}
		wantDone := r
		wantDone.ID, wantDone.Status, wantDone.FinishedAt = id1, ReplayDone, t0.Add(time.Minute)
		if diff := cmp.Diff([]ReplayRun{wantDone}, done); diff != "" {
			t.Errorf("ReplayRuns(done) (-want +got):\n%s", diff)
		}
		all, err := db.ReplayRuns(ctx, ReplayRunFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || all[1].ID != id2 || all[1].Status != ReplayRunning {
			t.Errorf("ReplayRuns(all) = %+v, want 2 runs, the second %d still running", all, id2)
		}
		if err := db.FinishReplayRun(ctx, 999, ReplayDone, t0); !errors.Is(err, ErrNotFound) {
			t.Errorf("FinishReplayRun(999) = %v, want ErrNotFound", err)
		}
		if _, err := db.InsertReplayRun(ctx, ReplayRun{SessionID: "s"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("InsertReplayRun without hashes = %v, want ErrInvalid", err)
		}
	})
}

// TestTwoHandlesWriteConcurrently stands in for two processes on one database: with
// SQLite each DB has its own writer connection, so they contend for the file's
// write lock and rely on the busy timeout; with PostgreSQL, two pools.
func TestTwoHandlesWriteConcurrently(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		var handles [2]*DB
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		// Open both at once on a database that has no schema yet: migrations must
		// apply once.
		for i := range handles {
			wg.Go(func() {
				db, err := Open(ctx, dsn)
				if err != nil {
					errs <- fmt.Errorf("open %d: %w", i, err)
					return
				}
				handles[i] = db
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		defer handles[0].Close()
		defer handles[1].Close()

		const perHandle = 25
		errs = make(chan error, 4*perHandle)
		for i, db := range handles {
			wg.Go(func() {
				for j := range perHandle {
					session := fmt.Sprintf("proc%d", i)
					o := original(session, fmt.Sprintf("call_%d", j), fmt.Sprintf("output %d of %s\n%s", j, session, strings.Repeat("x", 2000)))
					if err := db.SaveOriginal(ctx, o); err != nil {
						errs <- err
					}
					if err := db.RecordAsks(ctx, []advisor.AskRecord{{SessionID: session, OutputKey: o.OutputKey, Scorer: "lexical", OK: true}}); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		latest := handles[0].LatestSchemaVersion()
		if got := [4]int{count(t, handles[0], "outputs"), count(t, handles[1], "blobs"), count(t, handles[0], "asks"), count(t, handles[1], "schema_version")}; got != [4]int{2 * perHandle, 2 * perHandle, 2 * perHandle, latest} {
			t.Errorf("outputs, blobs, asks, schema_version rows = %v, want [%d %d %d %d]", got, 2*perHandle, 2*perHandle, 2*perHandle, latest)
		}
		// Each handle reads the other's writes.
		o, err := handles[0].Original(ctx, advisor.RecallID("proc1", "call_7"))
		if err != nil || !strings.HasPrefix(o.Text, "output 7 of proc1\n") {
			t.Errorf("handle 0 reading handle 1's original: %q, %v", o.Text[:min(len(o.Text), 20)], err)
		}
	})
}

// helperDSN names the database the helper process of TestTwoProcessesWriteConcurrently
// writes into.
const helperDSN = "PRUNEADVISOR_STORAGE_HELPER_DB"

// TestTwoProcessesWriteConcurrently runs this test binary a second time as a helper
// process (env PRUNEADVISOR_STORAGE_HELPER_DB) that writes into the same database
// while the parent does: SQLite's cross-process (fcntl) locks and the busy timeout,
// or two PostgreSQL clients.
func TestTwoProcessesWriteConcurrently(t *testing.T) {
	const n = 50
	write := func(ctx context.Context, db *DB, session string) error {
		for j := range n {
			o := original(session, fmt.Sprintf("call_%d", j), fmt.Sprintf("%s output %d %s", session, j, strings.Repeat("y", 3000)))
			if err := db.SaveOriginal(ctx, o); err != nil {
				return err
			}
			if err := db.RecordDecisions(ctx, []advisor.DecisionRecord{{SessionID: session, OutputKey: o.OutputKey, Decision: advisor.DecisionKeep}}); err != nil {
				return err
			}
		}
		return nil
	}
	if dsn := os.Getenv(helperDSN); dsn != "" {
		db, err := Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := write(t.Context(), db, "child"); err != nil {
			t.Fatal(err)
		}
		return
	}
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn) // the schema exists before the child starts
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTwoProcessesWriteConcurrently$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperDSN+"="+dsn)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Start writing once the child has written its first row, so the two overlap.
		for deadline := time.Now().Add(10 * time.Second); count(t, db, "outputs") == 0; {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("helper process wrote nothing in 10s:\n%s", out.String())
			}
			time.Sleep(time.Millisecond)
		}
		parentErr := write(ctx, db, "parent")
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v\n%s", err, out.String())
		}
		if parentErr != nil {
			t.Fatal(parentErr)
		}
		latest := db.LatestSchemaVersion()
		if got := [3]int{count(t, db, "outputs"), count(t, db, "decisions"), count(t, db, "schema_version")}; got != [3]int{2 * n, 2 * n, latest} {
			t.Errorf("outputs, decisions, schema_version rows = %v, want [%d %d %d]", got, 2*n, 2*n, latest)
		}
		o, err := db.Original(ctx, advisor.RecallID("child", "call_49"))
		if err != nil || !strings.HasPrefix(o.Text, "child output 49 ") {
			t.Errorf("child's original read by the parent: %v", err)
		}
	})
}

// Options.ReadOnly: reads work, every write fails with ErrReadOnly naming the record.
// The SQLite file is also chmod 0444 (the process could not write it anyway).
func TestReadOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		o := saveAndClose(t, dsn)
		if !IsPostgres(dsn) {
			if err := os.Chmod(dsn, 0o444); err != nil {
				t.Fatal(err)
			}
		}
		ro, err := OpenWith(ctx, dsn, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("OpenWith(ReadOnly): %v", err)
		}
		defer ro.Close()
		got, err := ro.Original(ctx, o.RecallID)
		if err != nil || got.Text != "readable" {
			t.Errorf("read-only Original = %q, %v; want the saved text", got.Text, err)
		}
		err = ro.SaveOriginal(ctx, original("s", "k2", "new"))
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("read-only SaveOriginal = %v, want ErrReadOnly", err)
		}
		wantPrefix := `storage: save original "` + advisor.RecallID("s", "k2") + `" (session "s", output "k2"): database is read-only: `
		if !strings.HasPrefix(err.Error(), wantPrefix) {
			t.Errorf("error text\n got %q\nwant prefix %q", err, wantPrefix)
		}
		for name, err := range map[string]error{
			"RecordAsks":   ro.RecordAsks(ctx, []advisor.AskRecord{{SessionID: "s", OutputKey: "k"}}),
			"RecordRecall": ro.RecordRecall(ctx, advisor.RecallEvent{RecallID: o.RecallID, SessionID: "s", OutputKey: "k"}),
			"SaveSession":  ro.SaveSession(ctx, SessionRow{ID: "s"}),
		} {
			if !errors.Is(err, ErrReadOnly) {
				t.Errorf("read-only %s = %v, want ErrReadOnly", name, err)
			}
		}
		if n := count(t, ro, "outputs"); n != 1 {
			t.Errorf("outputs rows = %d, want 1", n)
		}
	})
}

// A read-only open cannot migrate: a database without our schema is refused with
// the versions. SQLite also refuses a missing file, and does not create it.
func TestReadOnlyOpenErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		if !IsPostgres(dsn) {
			if db, err := OpenWith(ctx, dsn, Options{ReadOnly: true}); err == nil {
				db.Close()
				t.Error("read-only open of a missing file succeeded")
			} else if !strings.Contains(err.Error(), dsn) {
				t.Errorf("error %q does not name the file", err)
			}
			if _, err := os.Stat(dsn); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("read-only open created %s (stat: %v)", dsn, err)
			}
			// A WAL file without our schema.
			raw, err := sql.Open("sqlite", dsn+"?_pragma=journal_mode(WAL)")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.ExecContext(ctx, "CREATE TABLE t(x)"); err != nil {
				t.Fatal(err)
			}
			raw.Close()
		}
		db, err := OpenWith(ctx, dsn, Options{ReadOnly: true})
		if err == nil {
			db.Close()
			t.Fatal("read-only open of an unmigrated database succeeded")
		}
		want := fmt.Sprintf("database is at version 0, this program reads versions 1 to %d", wantVersion[sqliteBackend])
		if IsPostgres(dsn) {
			want = fmt.Sprintf("database is at version 0, this program reads versions 1 to %d", wantVersion[postgresBackend])
		}
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), want) {
			t.Errorf("read-only open of an unmigrated database = %v, want ErrSchema with %q", err, want)
		}
	})
}

// BenchmarkSaveOriginal saves a distinct 8 KiB output per iteration (a new blob and
// outputs row, one committed transaction each: fsynced on SQLite; on PostgreSQL as
// the server's synchronous_commit says).
func BenchmarkSaveOriginal(b *testing.B) {
	for _, f := range fixtures {
		b.Run(f.name, func(b *testing.B) {
			var dsn string
			if f.kind == postgresBackend {
				dsn = pgtest.URL(b)
			} else {
				dsn = filepath.Join(b.TempDir(), "bench.db")
			}
			db := openDB(b, dsn)
			ctx := context.Background()
			body := strings.Repeat("0123456789abcdef", 512)
			b.SetBytes(int64(len(body) + 16))
			i := 0
			for b.Loop() {
				key := fmt.Sprintf("call_%08d", i)
				if err := db.SaveOriginal(ctx, original("bench", key, key+body)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// SessionVersion counts stubs saved and recalls recorded, per session, across two
// handles on one database; a stub saved again (the same text) does not count.
func TestSessionVersion(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		a, b := openDB(t, dsn), openDB(t, dsn)
		version := func(db *DB, session string) int64 {
			t.Helper()
			v, err := db.SessionVersion(ctx, session)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if got := version(a, "s1"); got != 0 {
			t.Fatalf("new session version = %d, want 0", got)
		}
		for i, key := range []string{"k1", "k2"} {
			id := advisor.RecallID("s1", key)
			if err := a.SaveOriginal(ctx, original("s1", key, "text "+key)); err != nil {
				t.Fatal(err)
			}
			if got := version(b, "s1"); got != int64(i) {
				t.Fatalf("after original %d: version = %d, want %d (originals do not count)", i+1, got, i)
			}
			s := advisor.StubRecord{RecallID: id, SessionID: "s1", OutputKey: key, Stub: "[pruned]", Step: 3}
			if err := a.SaveStub(ctx, s); err != nil {
				t.Fatal(err)
			}
			if err := b.SaveStub(ctx, s); err != nil {
				t.Fatalf("the same stub again from the other handle: %v", err)
			}
		}
		if err := b.RecordRecall(ctx, advisor.RecallEvent{RecallID: advisor.RecallID("s1", "k1"), SessionID: "s1", OutputKey: "k1"}); err != nil {
			t.Fatal(err)
		}
		if got, want := version(a, "s1"), int64(3); got != want {
			t.Errorf("version after 2 stubs and 1 recall = %d, want %d", got, want)
		}
		if got := version(a, "s2"); got != 0 {
			t.Errorf("other session version = %d, want 0", got)
		}
	})
}

// SavePrunes stores every original and stub in one transaction, or none of them.
func TestSavePrunesAllOrNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		// A conflicting second record (the first's recall id with another text) fails
		// the whole batch: the first original and stub are not stored either.
		bad := prune("s1", "k1", "one", "[pruned k1]")
		clash := prune("s1", "k1", "another text", "[pruned k1]")
		err := db.SavePrunes(ctx, []advisor.Prune{bad, clash})
		if !errors.Is(err, ErrConflict) || !errors.Is(err, advisor.ErrConflict) {
			t.Fatalf("SavePrunes with a clash = %v, want ErrConflict and advisor.ErrConflict", err)
		}
		if got := [3]int{count(t, db, "outputs"), count(t, db, "blobs"), count(t, db, "stubs")}; got != [3]int{0, 0, 0} {
			t.Fatalf("after a failed batch: outputs, blobs, stubs = %v, want none", got)
		}
		if err := db.SavePrunes(ctx, []advisor.Prune{prune("s1", "k1", "one", "[pruned k1]"), prune("s1", "k2", "two", "[pruned k2]"), prune("s1", "k3", "one", "[pruned k3]")}); err != nil {
			t.Fatal(err)
		}
		// Three outputs, two distinct texts, three stubs, version 3.
		if got := [3]int{count(t, db, "outputs"), count(t, db, "blobs"), count(t, db, "stubs")}; got != [3]int{3, 2, 3} {
			t.Errorf("outputs, blobs, stubs = %v, want [3 2 3]", got)
		}
		if v, err := db.SessionVersion(ctx, "s1"); err != nil || v != 3 {
			t.Errorf("SessionVersion = %d, %v; want 3", v, err)
		}
		got, err := db.Original(ctx, advisor.RecallID("s1", "k2"))
		if err != nil || got.Text != "two" {
			t.Errorf("Original(k2) = %q, %v", got.Text, err)
		}
		// A rewrite that holds one output already stubbed otherwise stores nothing:
		// not its new output k4 either, and the version stays.
		err = db.SavePrunes(ctx, []advisor.Prune{prune("s1", "k4", "four", "[pruned k4]"), prune("s1", "k2", "two", "[pruned k2, other words]")})
		if !errors.Is(err, advisor.ErrConflict) || !strings.Contains(err.Error(), `output "k2" of session "s1" already has another stub (first writer wins): "[pruned k2]"`) {
			t.Errorf("SavePrunes over another stub = %v, want advisor.ErrConflict naming the stored stub", err)
		}
		if got := [2]int{count(t, db, "outputs"), count(t, db, "stubs")}; got != [2]int{3, 3} {
			t.Errorf("after the conflict: outputs, stubs = %v, want [3 3]", got)
		}
		if v, err := db.SessionVersion(ctx, "s1"); err != nil || v != 3 {
			t.Errorf("SessionVersion after the conflict = %d, %v; want 3", v, err)
		}
	})
}

// TestRecordBatch: asks, decisions and step records of one batch are stored in one
// transaction (a bad step record refuses the asks and decisions beside it), read back
// as the one-kind calls store them, and on SQLite the writer connection is back at
// synchronous=FULL afterwards, so originals still commit durably.
func TestRecordBatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		asks := []advisor.AskRecord{{SessionID: "s", OutputKey: "a", Step: 3, Scorer: "lexical", Score: 0.25, OK: true, Tokens: 40}}
		ds := []advisor.DecisionRecord{{SessionID: "s", OutputKey: "a", Step: 3, Decision: advisor.DecisionPending, Reason: "score", Score: 0.25, Tokens: 900}}
		steps := []advisor.StepRecord{{SessionID: "s", Step: 3, ContextTokens: 12000, FullTokens: 12900}}
		bad := []advisor.StepRecord{steps[0], {SessionID: "s", Step: 0}}
		err := db.RecordBatch(ctx, asks, ds, bad)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "step record 1") {
			t.Errorf("RecordBatch with a step 0 = %v, want ErrInvalid naming step record 1", err)
		}
		for _, table := range []string{"asks", "decisions", "steps"} {
			if n := count(t, db, table); n != 0 {
				t.Errorf("%s rows after the refused batch = %d, want 0", table, n)
			}
		}
		if err := db.RecordBatch(ctx, asks, ds, steps); err != nil {
			t.Fatal(err)
		}
		gotAsks, err := db.Asks(ctx, AskFilter{})
		if err != nil {
			t.Fatal(err)
		}
		gotDs, err := db.Decisions(ctx, DecisionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		gotSteps, err := db.Steps(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(asks, gotAsks); d != "" {
			t.Errorf("asks (-want +got):\n%s", d)
		}
		if d := cmp.Diff(ds, gotDs); d != "" {
			t.Errorf("decisions (-want +got):\n%s", d)
		}
		if d := cmp.Diff(steps, gotSteps, cmpopts.EquateApproxTime(time.Second)); d != "" {
			t.Errorf("steps (-want +got):\n%s", d)
		}
		if err := db.RecordBatch(ctx, nil, nil, nil); err != nil {
			t.Errorf("RecordBatch(nothing) = %v, want nil", err)
		}
		if db.kind != sqliteBackend {
			return
		}
		var sync int
		if err := db.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if sync != 2 {
			t.Errorf("writer PRAGMA synchronous after RecordBatch = %d, want 2 (FULL)", sync)
		}
	})
}
