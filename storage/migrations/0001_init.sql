-- 0001_init: the tables of DESIGN.md "Storage".
-- Times are TEXT in RFC 3339 with nanoseconds, UTC; NULL when unknown.
-- session_id columns are plain text, not foreign keys: the advisor records asks,
-- decisions and originals without registering the session first.

CREATE TABLE sessions (
	id            TEXT PRIMARY KEY,
	format        TEXT NOT NULL DEFAULT '',
	name          TEXT NOT NULL DEFAULT '',
	content_hash  TEXT NOT NULL DEFAULT '',
	settings_hash TEXT NOT NULL DEFAULT '',
	created_at    TEXT,
	finished_at   TEXT
) STRICT;

-- Original texts, stored once per content: hash is the hex SHA-256 of text.
CREATE TABLE blobs (
	hash  TEXT PRIMARY KEY,
	text  BLOB NOT NULL,
	bytes INTEGER NOT NULL
) STRICT;

CREATE TABLE outputs (
	recall_id  TEXT PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	tool       TEXT NOT NULL DEFAULT '',
	summary    TEXT NOT NULL DEFAULT '',
	hash       TEXT NOT NULL REFERENCES blobs(hash),
	tokens     INTEGER NOT NULL DEFAULT 0,
	step       INTEGER NOT NULL DEFAULT 0,
	saved_at   TEXT,
	UNIQUE (session_id, output_key),
	UNIQUE (recall_id, session_id, output_key)
) STRICT;
CREATE INDEX outputs_hash ON outputs(hash);

-- One row per pruned output: the latest stub applied to it.
CREATE TABLE stubs (
	recall_id  TEXT PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	stub       TEXT NOT NULL,
	step       INTEGER NOT NULL,
	reason     TEXT NOT NULL DEFAULT '',
	score      REAL, -- NULL for NaN
	at         TEXT,
	FOREIGN KEY (recall_id, session_id, output_key)
		REFERENCES outputs(recall_id, session_id, output_key)
) STRICT;
CREATE INDEX stubs_session ON stubs(session_id);

CREATE TABLE recalls (
	id         INTEGER PRIMARY KEY,
	recall_id  TEXT NOT NULL,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	step       INTEGER NOT NULL,
	at         TEXT,
	FOREIGN KEY (recall_id, session_id, output_key)
		REFERENCES outputs(recall_id, session_id, output_key)
) STRICT;
CREATE INDEX recalls_session ON recalls(session_id, id);
CREATE INDEX recalls_recall_id ON recalls(recall_id);

CREATE TABLE asks (
	id         INTEGER PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	step       INTEGER NOT NULL,
	card_hash  TEXT NOT NULL DEFAULT '',
	scorer     TEXT NOT NULL DEFAULT '',
	score      REAL, -- NULL for NaN
	ok         INTEGER NOT NULL,
	fail_kind  TEXT NOT NULL DEFAULT '',
	latency_ns INTEGER NOT NULL DEFAULT 0,
	tokens     INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX asks_session ON asks(session_id, output_key, step);
CREATE INDEX asks_scorer ON asks(scorer);

CREATE TABLE decisions (
	id         INTEGER PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	step       INTEGER NOT NULL,
	decision   TEXT NOT NULL,
	reason     TEXT NOT NULL DEFAULT '',
	score      REAL, -- NULL for NaN
	superseder TEXT NOT NULL DEFAULT '',
	tokens     INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX decisions_session ON decisions(session_id, step);

-- Later-use evidence (DESIGN.md "Replay and later-use evidence").
CREATE TABLE evidence (
	id         INTEGER PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	use_step   INTEGER NOT NULL,
	proof      TEXT NOT NULL DEFAULT '',
	weight     REAL -- NULL for NaN
) STRICT;
CREATE INDEX evidence_session ON evidence(session_id, output_key);

-- One replay of one session under one configuration; (content_hash, settings_hash)
-- lets a replay be skipped or resumed.
CREATE TABLE replay_runs (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT NOT NULL,
	content_hash  TEXT NOT NULL,
	settings_hash TEXT NOT NULL,
	scorer        TEXT NOT NULL DEFAULT '',
	schedule      TEXT NOT NULL DEFAULT '',
	status        TEXT NOT NULL DEFAULT '',
	started_at    TEXT,
	finished_at   TEXT
) STRICT;
CREATE INDEX replay_runs_key ON replay_runs(content_hash, settings_hash);
