-- 0007_ledger: what each proxied model call really cost (DESIGN.md "ledger"): one row
-- per upstream response, from the provider's own `usage` (ledger.Entry). Token counts
-- are the provider's; context_tokens, full_tokens and removed_tokens the advisor's
-- (o200k_base). Dollars under the price model the proxy ran with.
CREATE TABLE ledger (
	id                    INTEGER PRIMARY KEY,
	session_id            TEXT NOT NULL,
	step                  INTEGER NOT NULL DEFAULT 0, -- the advisor's step; 0 when not advised
	at                    TEXT,
	route                 TEXT NOT NULL,
	provider              TEXT NOT NULL,
	model                 TEXT NOT NULL DEFAULT '',
	status                INTEGER NOT NULL,
	stream                INTEGER NOT NULL DEFAULT 0,
	result                TEXT NOT NULL, -- ok, none, malformed, error (ledger.Result)
	note                  TEXT NOT NULL DEFAULT '',
	input_tokens          INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
	cache_write_5m_tokens INTEGER NOT NULL DEFAULT 0,
	cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0,
	output_tokens         INTEGER NOT NULL DEFAULT 0,
	advised               INTEGER NOT NULL DEFAULT 0,
	context_tokens        INTEGER NOT NULL DEFAULT 0,
	full_tokens           INTEGER NOT NULL DEFAULT 0,
	rewrite               TEXT NOT NULL DEFAULT '', -- the planner's reason, '' without a rewrite
	cold                  INTEGER NOT NULL DEFAULT 0,
	planned_rewrite_usd   REAL NOT NULL DEFAULT 0,
	paid_usd              REAL NOT NULL DEFAULT 0,
	keep_all_usd          REAL NOT NULL DEFAULT 0,
	removed_tokens        INTEGER NOT NULL DEFAULT 0,
	rewrite_tokens        INTEGER NOT NULL DEFAULT 0,
	rewrite_usd           REAL NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX ledger_session ON ledger(session_id, id);
