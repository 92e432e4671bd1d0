-- Shared compaction (issue 26): a file written by a compaction is marked, so an hour holding
-- only compaction outputs is not merged again however they were cut.
ALTER TABLE span_files ADD COLUMN compacted BOOLEAN NOT NULL DEFAULT false;
