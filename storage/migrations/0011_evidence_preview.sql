-- 0011_evidence_preview: each later use records whether the output's first and last
-- 250 characters (Gemini CLI's masking preview) hold the use's names
-- (evidence.Use.Preview: 1 yes, 0 no, and for rows written before this migration),
-- so that calibrate judges Gemini CLI's masking with its own stub.
ALTER TABLE evidence ADD COLUMN preview INTEGER NOT NULL DEFAULT 0;
