package storage

// The store suite: every test that calls eachBackend runs once per fixture, as the
// subtests sqlite (a file in t.TempDir()) and postgres (a fresh schema on the
// server pgtest names; skipped locally when none answers, required in CI).

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/storage/pgtest"
)

// fixture is one backend of the suite: fresh returns the dsn of a new, empty
// database, removed when the test ends.
type fixture struct {
	name  string
	kind  backend
	fresh func(t *testing.T) string
}

var fixtures = []fixture{
	{"sqlite", sqliteBackend, func(t *testing.T) string { return filepath.Join(t.TempDir(), "prune.db") }},
	{"postgres", postgresBackend, func(t *testing.T) string { return pgtest.URL(t) }},
}

// eachBackend runs test on every fixture, as a subtest named after it, with the dsn
// of a fresh database.
func eachBackend(t *testing.T, test func(t *testing.T, dsn string)) {
	t.Helper()
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) { test(t, f.fresh(t)) })
	}
}

// openDB opens dsn with default options, closed at cleanup.
func openDB(t testing.TB, dsn string) *DB {
	t.Helper()
	db, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open(%s): %v", Redact(dsn), err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// openTemp opens a fresh SQLite database in a temporary directory, closed at
// cleanup (the SQLite-only tests).
func openTemp(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prune.db")
	return openDB(t, path), path
}

// count returns SELECT count(*) FROM table, read through the writer (no snapshot lag).
func count(t *testing.T, db *DB, table string) int {
	t.Helper()
	var n int
	if err := db.w.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// original builds an Original of session/key with the given text and its recall id.
func original(session, key, text string) advisor.Original {
	sum := sha256.Sum256([]byte(text))
	return advisor.Original{
		RecallID:  advisor.RecallID(session, key),
		SessionID: session,
		OutputKey: key,
		Tool:      "Read",
		Summary:   "src/" + key + ".go",
		Text:      text,
		Hash:      hex.EncodeToString(sum[:]),
		Tokens:    len(text) / 4,
		Step:      3,
	}
}

// prune builds the Prune of output key of session: its original with text and the
// stub stub.
func prune(session, key, text, stub string) advisor.Prune {
	o := original(session, key, text)
	return advisor.Prune{Original: o, Stub: advisor.StubRecord{RecallID: o.RecallID, SessionID: session, OutputKey: key, Stub: stub, Step: 5}}
}

// freshLike returns the dsn of another fresh database on dsn's backend.
func freshLike(t *testing.T, dsn string) string {
	t.Helper()
	for _, f := range fixtures {
		if (f.kind == postgresBackend) == IsPostgres(dsn) {
			return f.fresh(t)
		}
	}
	panic("no fixture")
}

// saveAndClose opens dsn, saves one original ("readable") and closes it again.
func saveAndClose(t *testing.T, dsn string) advisor.Original {
	t.Helper()
	db, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	o := original("s", "k", "readable")
	if err := db.SaveOriginal(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return o
}
