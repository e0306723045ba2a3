-- 0008_replay_steps_agent_compaction: as SQLite's migration 0014
-- (storage/migrations): the agent's own compaction a transcript records before
-- each replayed model call, the tokens it dropped and of its summary.
ALTER TABLE replay_steps ADD COLUMN IF NOT EXISTS agent_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_steps ADD COLUMN IF NOT EXISTS agent_summary INTEGER NOT NULL DEFAULT 0;
