-- 0005_evidence_preview: as SQLite's migration 0011 (storage/migrations): each later
-- use records whether the output's head and tail (Gemini CLI's masking preview)
-- hold its names (evidence.Use.Preview; 0 for older rows).
ALTER TABLE evidence ADD COLUMN IF NOT EXISTS preview INTEGER NOT NULL DEFAULT 0;
