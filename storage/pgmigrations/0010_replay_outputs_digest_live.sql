-- 0010_replay_outputs_digest_live: as SQLite's migration 0016 (storage/migrations):
-- each replayed output records what its stub's digest costs by budget (decimal
-- digest tokens separated by spaces; '' for none and for older rows).
ALTER TABLE replay_outputs ADD COLUMN IF NOT EXISTS digest_live TEXT NOT NULL DEFAULT '';
