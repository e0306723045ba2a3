-- 0009_replay_runs_session: replay_runs by session, as PostgreSQL's schema has had
-- from its first migration. CommitReplay deletes a session's earlier runs
-- (DELETE FROM replay_runs WHERE session_id = ?) before it stores the new one;
-- without the index every commit scanned the whole table, so replaying N sessions
-- into one store cost time quadratic in N: 10,000 two-message sessions spent 20 of
-- their 31 s of CPU in that scan (docs/PERFORMANCE.md, "Replay at scale").
CREATE INDEX IF NOT EXISTS replay_runs_session ON replay_runs(session_id);
