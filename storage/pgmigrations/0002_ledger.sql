-- 0002_ledger: the ledger table of SQLite's migration 0007 (storage/migrations,
-- where each column is explained): one row per upstream response of a proxied model
-- call.
CREATE TABLE ledger (
	id                    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	session_id            TEXT NOT NULL,
	step                  BIGINT NOT NULL DEFAULT 0,
	at                    TEXT,
	route                 TEXT NOT NULL,
	provider              TEXT NOT NULL,
	model                 TEXT NOT NULL DEFAULT '',
	status                BIGINT NOT NULL,
	stream                BOOLEAN NOT NULL DEFAULT false,
	result                TEXT NOT NULL,
	note                  TEXT NOT NULL DEFAULT '',
	input_tokens          BIGINT NOT NULL DEFAULT 0,
	cache_read_tokens     BIGINT NOT NULL DEFAULT 0,
	cache_write_5m_tokens BIGINT NOT NULL DEFAULT 0,
	cache_write_1h_tokens BIGINT NOT NULL DEFAULT 0,
	output_tokens         BIGINT NOT NULL DEFAULT 0,
	advised               BOOLEAN NOT NULL DEFAULT false,
	context_tokens        BIGINT NOT NULL DEFAULT 0,
	full_tokens           BIGINT NOT NULL DEFAULT 0,
	rewrite               TEXT NOT NULL DEFAULT '',
	cold                  BOOLEAN NOT NULL DEFAULT false,
	planned_rewrite_usd   DOUBLE PRECISION NOT NULL DEFAULT 0,
	paid_usd              DOUBLE PRECISION NOT NULL DEFAULT 0,
	keep_all_usd          DOUBLE PRECISION NOT NULL DEFAULT 0,
	removed_tokens        BIGINT NOT NULL DEFAULT 0,
	rewrite_tokens        BIGINT NOT NULL DEFAULT 0,
	rewrite_usd           DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE INDEX ledger_session ON ledger(session_id, id);
