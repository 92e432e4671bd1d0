-- The upload checkpoint is a write time, not a WAL position: a node's local staging unit is
-- the hourly Parquet file named by its write time (Unix ms), and the WAL is gone once a file
-- is written. `uploaded_through_unix_ms`: every local file of the node written at or before it
-- is in registered objects (its rows are, and the local file may be dropped).
ALTER TABLE ingest_checkpoints RENAME COLUMN wal_position TO uploaded_through_unix_ms;
