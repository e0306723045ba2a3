-- 0001_init: the PostgreSQL schema, the same tables and columns as SQLite's
-- migrations 0001-0006 (storage/migrations; each column is explained there), so
-- that one set of queries serves both backends.
-- Times are TEXT in RFC 3339 with nanoseconds, UTC, NULL when unknown, as in SQLite
-- (both backends return the same bytes; cast with ::timestamptz to query by time).
-- Yes/no columns are BOOLEAN. session_id columns are plain text, not foreign keys:
-- the advisor records asks, decisions and originals without registering the
-- session first.

CREATE TABLE sessions (
	id             TEXT PRIMARY KEY,
	format         TEXT NOT NULL DEFAULT '',
	name           TEXT NOT NULL DEFAULT '',
	path           TEXT NOT NULL DEFAULT '',
	content_hash   TEXT NOT NULL DEFAULT '',
	settings_hash  TEXT NOT NULL DEFAULT '',
	created_at     TEXT,
	finished_at    TEXT,
	provider       TEXT NOT NULL DEFAULT '',
	time_missing   BIGINT NOT NULL DEFAULT 0,
	time_unordered BIGINT NOT NULL DEFAULT 0,
	time_future    BIGINT NOT NULL DEFAULT 0
);

-- Original texts, stored once per content: hash is the hex SHA-256 of text.
CREATE TABLE blobs (
	hash  TEXT PRIMARY KEY,
	text  BYTEA NOT NULL,
	bytes BIGINT NOT NULL
);

CREATE TABLE outputs (
	recall_id  TEXT PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	tool       TEXT NOT NULL DEFAULT '',
	summary    TEXT NOT NULL DEFAULT '',
	hash       TEXT NOT NULL REFERENCES blobs(hash),
	tokens     BIGINT NOT NULL DEFAULT 0,
	step       BIGINT NOT NULL DEFAULT 0,
	saved_at   TEXT,
	UNIQUE (session_id, output_key),
	UNIQUE (recall_id, session_id, output_key)
);
CREATE INDEX outputs_hash ON outputs(hash);

-- One row per pruned output, written once (first writer wins): its stub.
CREATE TABLE stubs (
	recall_id  TEXT PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	stub       TEXT NOT NULL,
	step       BIGINT NOT NULL,
	reason     TEXT NOT NULL DEFAULT '',
	score      DOUBLE PRECISION, -- NULL for NaN
	at         TEXT,
	FOREIGN KEY (recall_id, session_id, output_key)
		REFERENCES outputs(recall_id, session_id, output_key)
);
CREATE INDEX stubs_session ON stubs(session_id);

CREATE TABLE recalls (
	id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	recall_id  TEXT NOT NULL,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	step       BIGINT NOT NULL,
	at         TEXT,
	FOREIGN KEY (recall_id, session_id, output_key)
		REFERENCES outputs(recall_id, session_id, output_key)
);
CREATE INDEX recalls_session ON recalls(session_id, id);
CREATE INDEX recalls_recall_id ON recalls(recall_id);

CREATE TABLE asks (
	id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	step       BIGINT NOT NULL,
	card_hash  TEXT NOT NULL DEFAULT '',
	scorer     TEXT NOT NULL DEFAULT '',
	score      DOUBLE PRECISION, -- NULL for NaN
	ok         BOOLEAN NOT NULL,
	fail_kind  TEXT NOT NULL DEFAULT '',
	latency_ns BIGINT NOT NULL DEFAULT 0,
	tokens     BIGINT NOT NULL DEFAULT 0,
	signals    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX asks_session ON asks(session_id, output_key, step);
CREATE INDEX asks_scorer ON asks(scorer);

CREATE TABLE decisions (
	id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	step       BIGINT NOT NULL,
	decision   TEXT NOT NULL,
	reason     TEXT NOT NULL DEFAULT '',
	score      DOUBLE PRECISION, -- NULL for NaN
	superseder TEXT NOT NULL DEFAULT '',
	tokens     BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX decisions_session ON decisions(session_id, step);

CREATE TABLE evidence (
	id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	session_id TEXT NOT NULL,
	output_key TEXT NOT NULL,
	use_step   BIGINT NOT NULL,
	proof      TEXT NOT NULL DEFAULT '',
	weight     DOUBLE PRECISION -- NULL for NaN
);
CREATE INDEX evidence_session ON evidence(session_id, output_key);

CREATE TABLE replay_runs (
	id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	session_id    TEXT NOT NULL,
	content_hash  TEXT NOT NULL,
	settings_hash TEXT NOT NULL,
	scorer        TEXT NOT NULL DEFAULT '',
	schedule      TEXT NOT NULL DEFAULT '',
	status        TEXT NOT NULL DEFAULT '',
	started_at    TEXT,
	finished_at   TEXT
);
CREATE INDEX replay_runs_key ON replay_runs(content_hash, settings_hash);
CREATE INDEX replay_runs_session ON replay_runs(session_id);

CREATE TABLE replay_settings (
	hash     TEXT PRIMARY KEY,
	scorer   TEXT NOT NULL DEFAULT '',
	settings TEXT NOT NULL
);

CREATE TABLE replay_outputs (
	session_id     TEXT NOT NULL,
	output_key     TEXT NOT NULL,
	seq            BIGINT NOT NULL,
	tool           TEXT NOT NULL DEFAULT '',
	summary        TEXT NOT NULL DEFAULT '',
	tokens         BIGINT NOT NULL,
	step           BIGINT NOT NULL,
	candidate_from BIGINT NOT NULL,
	rule_dead_at   BIGINT NOT NULL,
	pending_at     BIGINT NOT NULL,
	pruned_at      BIGINT NOT NULL,
	end_step       BIGINT NOT NULL,
	rule_by        TEXT NOT NULL DEFAULT '',
	offset_tokens  BIGINT NOT NULL DEFAULT 0,
	stub_tokens    BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, output_key)
);

CREATE TABLE replay_steps (
	session_id     TEXT NOT NULL,
	step           BIGINT NOT NULL,
	context_tokens BIGINT NOT NULL,
	applied_tokens BIGINT NOT NULL,
	asked          BIGINT NOT NULL,
	over_budget    BOOLEAN NOT NULL,
	rewrite        BOOLEAN NOT NULL,
	at             TEXT,
	cold           BOOLEAN NOT NULL DEFAULT false,
	rewrite_reason TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (session_id, step)
);

CREATE TABLE session_versions (
	session_id TEXT PRIMARY KEY,
	version    BIGINT NOT NULL
);

CREATE TABLE secrets (
	name       TEXT PRIMARY KEY,
	value      BYTEA NOT NULL,
	created_at TEXT NOT NULL
);

CREATE TABLE steps (
	id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	session_id     TEXT NOT NULL,
	step           BIGINT NOT NULL,
	at             TEXT,
	context_tokens BIGINT NOT NULL,
	full_tokens    BIGINT NOT NULL,
	rewrite        TEXT NOT NULL DEFAULT '',
	pruned         BIGINT NOT NULL DEFAULT 0,
	frees          BIGINT NOT NULL DEFAULT 0,
	suffix         BIGINT NOT NULL DEFAULT 0,
	cost_usd       DOUBLE PRECISION NOT NULL DEFAULT 0,
	saving_usd     DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE INDEX steps_session ON steps(session_id, step);
