-- 0006_planner: what the rewrite regime, the fitted scorer and restart-transparent
-- advising need (DESIGN.md step 6, "The embedded default").

-- The card's signals at each ask (cards.Signals as JSON): what `pruneadvisor fit`
-- trains on. '' for asks recorded before this migration.
ALTER TABLE asks ADD COLUMN signals TEXT NOT NULL DEFAULT '';

-- One row per advisor step (advisor.StepRecord): its time (the cache-TTL rule after a
-- restart), its context and its rewrite (the ledger attributes cache writes to it).
CREATE TABLE steps (
	id             INTEGER PRIMARY KEY,
	session_id     TEXT NOT NULL,
	step           INTEGER NOT NULL,
	at             TEXT,
	context_tokens INTEGER NOT NULL,
	full_tokens    INTEGER NOT NULL,
	rewrite        TEXT NOT NULL DEFAULT '', -- the planner's reason, '' without a rewrite
	pruned         INTEGER NOT NULL DEFAULT 0,
	frees          INTEGER NOT NULL DEFAULT 0,
	suffix         INTEGER NOT NULL DEFAULT 0,
	cost_usd       REAL NOT NULL DEFAULT 0,
	saving_usd     REAL NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX steps_session ON steps(session_id, step);

-- Replays: where each output sits (tokens before its message) and its stub's size,
-- so calibrate prices a rewrite by its real suffix; each step's call time and whether
-- the cache was cold before it; the session's provider and its timestamp faults.
ALTER TABLE replay_outputs ADD COLUMN offset_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_outputs ADD COLUMN stub_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_steps ADD COLUMN at TEXT;
ALTER TABLE replay_steps ADD COLUMN cold INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_steps ADD COLUMN rewrite_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN provider TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN time_missing INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN time_unordered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN time_future INTEGER NOT NULL DEFAULT 0;
