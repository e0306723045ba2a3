package storage

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/evidence"
	"github.com/pruneadvisor/pruneadvisor/replay"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

func replayRecord() *replay.Record {
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 123, time.UTC)
	st := replay.Settings{Version: replay.Version, Config: advisor.DefaultConfig(), Scorer: "lexical", Lenient: true}
	rec := &replay.Record{
		Path: "/s/a.jsonl", Name: "a.jsonl", Format: transcript.FormatClaudeCode,
		ContentHash: "c0ffee", Settings: st, SettingsHash: st.Hash(), Steps: 3, Skipped: 2,
		Outputs: []replay.OutputFacts{
			{Key: "k1", Tool: "Read", Summary: "a.go", Tokens: 500, Step: 1, CandidateFrom: 2, RuleDeadAt: 3, PendingAt: 3, PrunedAt: 3, EndStep: 3, DigestTokens: 37, DigestLive: []int{0, 5, 9}},
			{Key: "k2", Tool: "Bash", Summary: "ls", Tokens: 10, Step: 2, EndStep: 3},
		},
		StepFacts: []replay.StepFacts{
			{Step: 1, ContextTokens: 10, AppliedTokens: 10, Prompt: true, CompactionDropped: 7, CompactionSummary: 2},
			{Step: 2, ContextTokens: 520, AppliedTokens: 520, Asked: 1, OverBudget: true},
			{Step: 3, ContextTokens: 540, AppliedTokens: 80, Rewrite: true, OverBudget: true},
		},
		Asks: []advisor.AskRecord{
			{OutputKey: "k1", Step: 2, CardHash: "h", Scorer: "lexical", Score: 0.4, OK: true, Latency: time.Millisecond, Tokens: 120},
			{OutputKey: "k1", Step: 3, Scorer: "lexical", Score: math.NaN(), FailKind: "timeout"},
		},
		Decisions: []advisor.DecisionRecord{{OutputKey: "k1", Step: 3, Decision: advisor.DecisionPruned, Reason: "superseded", Score: 0.4, Superseder: "k3", Tokens: 500}},
		Evidence: []evidence.Use{
			{Key: "k1", Step: 2, Kind: evidence.UseName, Proof: `name "parseConfig" +1 more`, Weight: 0.75, Digest: 12, NameDigests: []int{5, 12}, NamesPreviewed: 1},
			{Key: "k2", Step: 3, Kind: evidence.UseReread, Proof: "re-read a.go", Weight: 1},
		},
		Started: t0, Finished: t0.Add(time.Second),
	}
	rec.ID = replay.SessionID(rec.ContentHash, rec.SettingsHash)
	for i := range rec.Asks {
		rec.Asks[i].SessionID = rec.ID
	}
	for i := range rec.Decisions {
		rec.Decisions[i].SessionID = rec.ID
	}
	return rec
}

// TestCommitReplay stores a record, reads it back, and commits it again: the
// second commit replaces the first (same rows). ReplayDone stays false while the
// record has an ask to ask again (its timeout: replay.Incomplete) and turns true
// once that ask's failure is one no new ask can mend.
func TestCommitReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		rec := replayRecord()
		if done, err := db.ReplayDone(ctx, rec.ContentHash, rec.SettingsHash); err != nil || done {
			t.Fatalf("ReplayDone before commit = %v, %v", done, err)
		}
		for round := 1; round <= 2; round++ {
			if err := db.CommitReplay(ctx, rec); err != nil {
				t.Fatal(err)
			}
			counts := [6]int{count(t, db, "asks"), count(t, db, "decisions"), count(t, db, "evidence"),
				count(t, db, "replay_outputs"), count(t, db, "replay_steps"), count(t, db, "replay_runs")}
			if counts != [6]int{2, 1, 2, 2, 3, 1} {
				t.Errorf("round %d: asks, decisions, evidence, outputs, steps, runs = %v, want [2 1 2 2 3 1]", round, counts)
			}
		}
		if done, err := db.ReplayDone(ctx, rec.ContentHash, rec.SettingsHash); err != nil || done {
			t.Errorf("ReplayDone after a commit with a timed-out ask = %v, %v; want false (incomplete)", done, err)
		}
		final := *replayRecord()
		final.Asks[1].FailKind = "too_large"
		if err := db.CommitReplay(ctx, &final); err != nil {
			t.Fatal(err)
		}
		if done, err := db.ReplayDone(ctx, rec.ContentHash, rec.SettingsHash); err != nil || !done {
			t.Errorf("ReplayDone after commit = %v, %v", done, err)
		}
		if err := db.CommitReplay(ctx, rec); err != nil { // back to the record compared below
			t.Fatal(err)
		}
		if done, _ := db.ReplayDone(ctx, rec.ContentHash, "other"); done {
			t.Error("ReplayDone with other settings = true")
		}
		got, err := db.LoadReplay(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := *rec
		want.Decisions = nil // not loaded
		want.Evidence = []evidence.Use{{Key: "k1", Step: 2, Proof: `name "parseConfig" +1 more`, Weight: 0.75, Digest: 12, NameDigests: []int{5, 12}, NamesPreviewed: 1}, {Key: "k2", Step: 3, Proof: "re-read a.go", Weight: 1}}
		want.Skipped = 0 // not stored
		if diff := cmp.Diff(&want, got, cmpopts.EquateNaNs()); diff != "" {
			t.Errorf("LoadReplay (-want +got):\n%s", diff)
		}
		rs, err := db.ReplayedSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Path != "/s/a.jsonl" || rs[0].Scorer != "lexical" || rs[0].Settings != rec.Settings.JSON() || !rs[0].Started.Equal(rec.Started) {
			t.Errorf("ReplayedSessions = %+v", rs)
		}
		ss, err := db.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != 1 || ss[0].Path != "/s/a.jsonl" || ss[0].ContentHash != "c0ffee" {
			t.Errorf("Sessions = %+v, want the replayed session with its path", ss)
		}
		if _, err := db.LoadReplay(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("LoadReplay(unknown) = %v, want ErrNotFound", err)
		}
		if err := db.CommitReplay(ctx, &replay.Record{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("CommitReplay(empty) = %v, want ErrInvalid", err)
		}
		// A name_digests column something else wrote: an error naming the use and
		// the field, not a panic or a silent zero.
		if _, err := db.w.ExecContext(ctx, `UPDATE evidence SET name_digests = '5 x12' WHERE output_key = 'k1'`); err != nil {
			t.Fatal(err)
		}
		_, err = db.LoadReplay(ctx, rec.ID)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `output "k1" step 2: name_digests: field 2 "x12"`) {
			t.Errorf("LoadReplay with a bad name_digests = %v; want ErrInvalid naming output k1, step 2, field 2", err)
		}
		// The same for a digest_live column.
		if _, err := db.w.ExecContext(ctx, `UPDATE evidence SET name_digests = '5 12' WHERE output_key = 'k1'`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.w.ExecContext(ctx, `UPDATE replay_outputs SET digest_live = '0 5 nine' WHERE output_key = 'k1'`); err != nil {
			t.Fatal(err)
		}
		_, err = db.LoadReplay(ctx, rec.ID)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `output "k1": digest_live: field 3 "nine"`) {
			t.Errorf("LoadReplay with a bad digest_live = %v; want ErrInvalid naming output k1 and field 3", err)
		}
	})
}

// CommitReplay deletes a session's earlier rows from every replay table by its
// session id (replayTables): each of them must find those rows by an index, or
// replaying N sessions into one store costs time quadratic in N (replay_runs had
// none in SQLite before migration 0009: 10,000 sessions spent 20 of their 31 s of
// CPU scanning it).
func TestReplayTablesBySession(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		db := openDB(t, dsn)
		for _, table := range replayTables {
			if db.kind == postgresBackend {
				var n int
				q := `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1 AND indexdef LIKE '%(session_id%'`
				if err := db.w.QueryRowContext(t.Context(), q, table).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					t.Errorf("%s: no index starts with session_id", table)
				}
				continue
			}
			rows, err := db.w.QueryContext(t.Context(), `EXPLAIN QUERY PLAN DELETE FROM `+table+` WHERE session_id = $1`, "s")
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var id, parent, notused int
				var detail string
				if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			rows.Close()
			if p := strings.Join(plan, "; "); !strings.Contains(p, "USING INDEX") && !strings.Contains(p, "USING PRIMARY KEY") {
				t.Errorf("%s: DELETE by session_id plans %q: a scan of the whole table", table, p)
			}
		}
	})
}
