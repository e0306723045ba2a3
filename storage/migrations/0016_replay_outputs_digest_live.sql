-- 0016_replay_outputs_digest_live: each replayed output records what the digest of
-- a stub made protected_steps steps after it costs by budget
-- (replay.OutputFacts.DigestLive: 0, then the cumulative costs in digest tokens of
-- the names that stub holds; decimal numbers separated by spaces; '' for an output
-- without a digest and for rows written before this migration, which are priced
-- at the bound min(budget, digest_tokens) as before).
ALTER TABLE replay_outputs ADD COLUMN digest_live TEXT NOT NULL DEFAULT '';
