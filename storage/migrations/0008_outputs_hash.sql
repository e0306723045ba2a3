-- 0008_outputs_hash: the index of outputs by hash goes. No query looks outputs up by
-- their hash (recall joins outputs to blobs by blobs' own key), and the foreign key
-- outputs.hash -> blobs(hash) would use it only to check a deleted or re-keyed blob,
-- which nothing does. Its keys are SHA-256s, so every pruned output wrote one more
-- page of it at a random place: 14 of the 86 WAL frames of a ten-prune rewrite
-- (docs/PERFORMANCE.md, "The prune commit (H25)").
DROP INDEX IF EXISTS outputs_hash;
