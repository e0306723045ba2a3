-- 0003_outputs_hash: the index of outputs by hash goes, as in SQLite's migration
-- 0008 (storage/migrations, where the reason is given): no query looks outputs up by
-- hash, and each pruned output's commit wrote one more index entry at a random place.
DROP INDEX IF EXISTS outputs_hash;
