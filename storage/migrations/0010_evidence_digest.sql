-- 0010_evidence_digest: each later use records the least stub digest budget, in
-- tokens, whose digest of the output holds the use's names (evidence.Use.Digest;
-- 0 = no digest holds it, and for rows written before this migration).
ALTER TABLE evidence ADD COLUMN digest_tokens INTEGER NOT NULL DEFAULT 0;
