-- 0012_replica_steps: what a replica needs to advise a session's step after steps
-- another process advised (docs/TEAM.md, "Several replicas"): the session's latest
-- advised step beside its version (one indexed read tells whether another process
-- advised since), each step's largest context growth so far (the hard limit's
-- margin, advisor.StepRecord.MaxGrowth), and the asks of a session by step.
ALTER TABLE session_versions ADD COLUMN last_step INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN max_growth INTEGER NOT NULL DEFAULT 0;
CREATE INDEX asks_session_step ON asks(session_id, step);

UPDATE session_versions SET last_step = COALESCE((SELECT MAX(step) FROM steps WHERE steps.session_id = session_versions.session_id), 0);
INSERT INTO session_versions(session_id, version, last_step)
	SELECT session_id, 0, MAX(step) FROM steps
	WHERE session_id NOT IN (SELECT session_id FROM session_versions)
	GROUP BY session_id;
