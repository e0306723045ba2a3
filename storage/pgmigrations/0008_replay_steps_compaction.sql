-- 0008_replay_steps_compaction: as SQLite's migration 0014
-- (storage/migrations): the compaction a transcript records before each replayed
-- model call, the agent's own or a provider's: the tokens it dropped and of its
-- summary.
ALTER TABLE replay_steps ADD COLUMN IF NOT EXISTS compaction_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_steps ADD COLUMN IF NOT EXISTS compaction_summary INTEGER NOT NULL DEFAULT 0;
