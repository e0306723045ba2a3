-- 0013_replay_steps_prompt: whether a user prompt came before each replayed model
-- call (replay.StepFacts.Prompt): the turns an agent that compacts only between
-- them (pi) counts by (calibrate.Calls.TurnStart). 0 in replays made before it:
-- calibrate then counts at every call.
ALTER TABLE replay_steps ADD COLUMN prompt INTEGER NOT NULL DEFAULT 0;
