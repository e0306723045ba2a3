-- 0003_session_versions: a counter per session that grows by one for every stub saved
-- and every recall recorded, by any process, so an advisor can tell with one indexed
-- read whether it must re-read the session's stubs and recalls
-- (advisor.VersionedStore).
CREATE TABLE session_versions (
	session_id TEXT PRIMARY KEY,
	version    INTEGER NOT NULL
) STRICT;

INSERT INTO session_versions(session_id, version)
	SELECT session_id, COUNT(*) FROM (
		SELECT session_id FROM stubs UNION ALL SELECT session_id FROM recalls
	) GROUP BY session_id;
