-- 0010_evidence_digest: each later use records the least stub digest budget, in
-- tokens, whose digest of the output holds the use's names (evidence.Use.Digest;
-- 0 = no digest holds it, and for rows written before this migration).
-- Each replayed output records the tokens of its whole digest (every candidate
-- name: replay.OutputFacts.DigestTokens), so that a digest budget's stub size is
-- known without the text.
ALTER TABLE evidence ADD COLUMN digest_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_outputs ADD COLUMN digest_tokens INTEGER NOT NULL DEFAULT 0;
