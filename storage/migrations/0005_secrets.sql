-- 0005_secrets: per-database secrets. "recall-id" keys the recall ids of new stubs
-- (advisor.KeyedRecallID), so an id cannot be computed from a session id and a call
-- id. The row is written by the first process that asks for it (DB.RecallSecret),
-- not here: it is 32 bytes from crypto/rand.
CREATE TABLE secrets (
	name       TEXT PRIMARY KEY,
	value      BLOB NOT NULL,
	created_at TEXT NOT NULL
) STRICT;
