-- 0009_evidence_names: as SQLite's migration 0015 (storage/migrations): each later
-- use records the least digest budget that holds each of its names (decimal
-- tokens separated by spaces) and how many of them the output's head and tail
-- hold.
ALTER TABLE evidence ADD COLUMN IF NOT EXISTS name_digests TEXT NOT NULL DEFAULT '';
ALTER TABLE evidence ADD COLUMN IF NOT EXISTS names_previewed INTEGER NOT NULL DEFAULT 0;
