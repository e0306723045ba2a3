-- 0004_rule_by: the call whose output made a replayed output dead by a rule
-- (superseded read, duplicate), so calibration can credit uses after the rule's
-- step to the live copy instead of counting them as misses of the dead one.
ALTER TABLE replay_outputs ADD COLUMN rule_by TEXT NOT NULL DEFAULT '';
