-- 0015_evidence_names: each later use records, per name of the use (each compound
-- of the agent's words that made it), the least stub digest budget that holds it
-- (evidence.Use.NameDigests: decimal tokens separated by spaces, 0 for a name no
-- digest holds; '' for a recall and for rows written before this migration), and
-- how many of its names the output's head and tail hold
-- (evidence.Use.NamesPreviewed), so that calibrate counts a digest's coverage per
-- name as issue 39 measured it, beside its coverage per use.
ALTER TABLE evidence ADD COLUMN name_digests TEXT NOT NULL DEFAULT '';
ALTER TABLE evidence ADD COLUMN names_previewed INTEGER NOT NULL DEFAULT 0;
