-- 0004_evidence_digest: as SQLite's migration 0010 (storage/migrations): each later
-- use records the least stub digest budget, in tokens, whose digest of the output
-- holds the use's names (evidence.Use.Digest; 0 = none, and for older rows).
-- Each replayed output records the tokens of its whole digest.
ALTER TABLE evidence ADD COLUMN IF NOT EXISTS digest_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_outputs ADD COLUMN IF NOT EXISTS digest_tokens INTEGER NOT NULL DEFAULT 0;
