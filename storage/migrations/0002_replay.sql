-- 0002_replay: what `pruneadvisor replay` records beyond asks, decisions and evidence,
-- so that `calibrate` and `backoff` can work from the store alone (replay/record.go
-- defines each field). Every row of these tables, and the asks, decisions and
-- evidence of a replayed session, are written in one transaction per session
-- (DB.CommitReplay), so an interrupted replay leaves no partial session behind.

-- The session file a replay read, so `backoff` and `calibrate` can read it again
-- (after checking content_hash). '' for sessions not read from a file.
ALTER TABLE sessions ADD COLUMN path TEXT NOT NULL DEFAULT '';

-- The settings a settings_hash stands for: JSON of replay.Settings (advisor config,
-- scorer name, reader mode, replay version).
CREATE TABLE replay_settings (
	hash     TEXT PRIMARY KEY,
	scorer   TEXT NOT NULL DEFAULT '',
	settings TEXT NOT NULL
) STRICT;

-- One row per tool output of a replayed session. Steps are advisor steps (1 = the
-- first model call); 0 means never.
CREATE TABLE replay_outputs (
	session_id     TEXT NOT NULL,
	output_key     TEXT NOT NULL,
	seq            INTEGER NOT NULL, -- position among the session's outputs, from 0
	tool           TEXT NOT NULL DEFAULT '',
	summary        TEXT NOT NULL DEFAULT '',
	tokens         INTEGER NOT NULL,
	step           INTEGER NOT NULL, -- step of the call that produced it
	candidate_from INTEGER NOT NULL, -- first step it was not protected
	rule_dead_at   INTEGER NOT NULL, -- first step a rule made it a pending prune
	pending_at     INTEGER NOT NULL, -- first step it was a pending prune (rule or score)
	pruned_at      INTEGER NOT NULL, -- step its stub was applied
	end_step       INTEGER NOT NULL, -- last step of the session
	PRIMARY KEY (session_id, output_key)
) STRICT;

-- One row per step of a replayed session: the context sizes behind the rewrite
-- simulation and the token-steps actually saved.
CREATE TABLE replay_steps (
	session_id     TEXT NOT NULL,
	step           INTEGER NOT NULL,
	context_tokens INTEGER NOT NULL, -- tokens of the messages before call `step`, nothing pruned
	applied_tokens INTEGER NOT NULL, -- the same with the stubs applied at this step
	asked          INTEGER NOT NULL, -- cards sent to the scorer at this step
	over_budget    INTEGER NOT NULL, -- 1 when context_tokens minus earlier stubs exceeded the budget
	rewrite        INTEGER NOT NULL, -- 1 when stubs were applied at this step
	PRIMARY KEY (session_id, step)
) STRICT;
