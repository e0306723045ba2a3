-- 0007_replay_steps_prompt: as SQLite's migration 0013 (storage/migrations):
-- whether a user prompt came before each replayed model call.
ALTER TABLE replay_steps ADD COLUMN IF NOT EXISTS prompt BOOLEAN NOT NULL DEFAULT false;
