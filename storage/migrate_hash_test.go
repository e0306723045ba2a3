package storage

import (
	"github.com/pruneadvisor/pruneadvisor/advisor"
	"testing"
)

// A database from before migration 0008 (PostgreSQL: 0003), its originals and stubs
// saved under the index of outputs by hash, migrates on open: the index is gone,
// the version is the latest, and what was saved before reads back byte for byte.
func TestMigrationDropsOutputsHash(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		// The migration that drops the index, and those after it, are undone.
		drops := map[backend]int{sqliteBackend: 8, postgresBackend: 3}[db.kind]
		if _, err := db.w.ExecContext(ctx, `CREATE INDEX outputs_hash ON outputs(hash)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.w.ExecContext(ctx, `DELETE FROM schema_version WHERE version >= $1`, drops); err != nil {
			t.Fatal(err)
		}
		// Undo what the later migrations added (SQLite's ADD COLUMN has no IF NOT
		// EXISTS): 0010's to 0016's columns, and 0012's index.
		if db.kind == sqliteBackend {
			if _, err := db.w.ExecContext(ctx, `DROP INDEX asks_session_step`); err != nil {
				t.Fatal(err)
			}
			for _, drop := range []string{"evidence DROP COLUMN digest_tokens", "replay_outputs DROP COLUMN digest_tokens", "evidence DROP COLUMN preview",
				"session_versions DROP COLUMN last_step", "steps DROP COLUMN max_growth", "replay_steps DROP COLUMN prompt",
				"replay_steps DROP COLUMN compaction_dropped", "replay_steps DROP COLUMN compaction_summary",
				"evidence DROP COLUMN name_digests", "evidence DROP COLUMN names_previewed", "replay_outputs DROP COLUMN digest_live"} {
				if _, err := db.w.ExecContext(ctx, `ALTER TABLE `+drop); err != nil {
					t.Fatal(err)
				}
			}
		}
		p := prune("s", "k", "the original, byte for byte: é\x00\n", "[pruned]")
		if err := db.SavePrunes(ctx, []advisor.Prune{p}); err != nil {
			t.Fatal(err)
		}
		if !hasIndex(t, db, "outputs_hash") {
			t.Fatal("outputs_hash not made: the test would pass without a migration")
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		db = openDB(t, dsn)
		if v, err := db.SchemaVersion(ctx); err != nil || v != wantVersion[db.kind] {
			t.Errorf("SchemaVersion = %d, %v; want %d", v, err, wantVersion[db.kind])
		}
		if hasIndex(t, db, "outputs_hash") {
			t.Error("outputs_hash still there after the migration")
		}
		got, err := db.Original(ctx, p.Original.RecallID)
		if err != nil || got.Text != p.Original.Text {
			t.Errorf("Original = %q, %v; want %q", got.Text, err, p.Original.Text)
		}
	})
}

// hasIndex reports whether db's schema holds an index named name.
func hasIndex(t *testing.T, db *DB, name string) bool {
	t.Helper()
	q := `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = $1`
	if db.kind == postgresBackend {
		q = `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1`
	}
	var n int
	if err := db.w.QueryRowContext(t.Context(), q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}
