-- 0014_replay_steps_compaction: the compaction a transcript records before a
-- replayed model call, the agent's own or a provider's
-- (replay.StepFacts.CompactionDropped and CompactionSummary): the tokens of the
-- history it dropped and of its summary, so that calibrate replays every pruner
-- through it (calibrate.Calls.Recorded). 0 in replays made before it (replay-13):
-- no recorded compaction is modelled.
ALTER TABLE replay_steps ADD COLUMN compaction_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_steps ADD COLUMN compaction_summary INTEGER NOT NULL DEFAULT 0;
