-- 0006_replica_steps: as SQLite's migration 0012 (storage/migrations): the
-- session's latest advised step beside its version, each step's largest context
-- growth so far, and the asks of a session by step.
ALTER TABLE session_versions ADD COLUMN IF NOT EXISTS last_step INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN IF NOT EXISTS max_growth INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS asks_session_step ON asks(session_id, step);

UPDATE session_versions SET last_step = COALESCE((SELECT MAX(step) FROM steps WHERE steps.session_id = session_versions.session_id), 0);
INSERT INTO session_versions(session_id, version, last_step)
	SELECT session_id, 0, MAX(step) FROM steps
	WHERE session_id NOT IN (SELECT session_id FROM session_versions)
	GROUP BY session_id;
