-- The shared-storage catalog (issue 26): the files in the object store, each node's upload
-- checkpoint, and the owner epoch that fences both. Keys are relative to the object store's
-- configured prefix. Times of spans are Unix nanoseconds (as in the `spans` table); times of
-- catalog events are timestamps.

-- One row per node id: the epoch of its current owner. Claiming a node id bumps it; every
-- write of a node checks `owner_epoch = mine` under this row's lock.
CREATE TABLE nodes (
    node_id TEXT PRIMARY KEY,
    owner_epoch BIGINT NOT NULL CHECK (owner_epoch > 0),
    claimed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per uploaded object of rows (`spans` or `presence`).
CREATE TABLE span_files (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('spans', 'presence')),
    hour_unix_nano BIGINT NOT NULL,
    node_id TEXT NOT NULL REFERENCES nodes (node_id),
    rows BIGINT NOT NULL CHECK (rows >= 0),
    bytes BIGINT NOT NULL CHECK (bytes >= 0),
    min_start_unix_nano BIGINT NOT NULL,
    max_start_unix_nano BIGINT NOT NULL,
    -- Where the file's trace-id index is (its own object), if it has one.
    trace_index_key TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Set by retention; the janitor deletes the objects, then the row.
    deleted_at TIMESTAMPTZ,
    CHECK (min_start_unix_nano <= max_start_unix_nano)
);
CREATE INDEX span_files_live_by_start ON span_files (kind, min_start_unix_nano)
    WHERE deleted_at IS NULL;
CREATE INDEX span_files_deleted ON span_files (deleted_at) WHERE deleted_at IS NOT NULL;

-- Per node and kind: the last WAL position whose rows are in registered files.
CREATE TABLE ingest_checkpoints (
    node_id TEXT NOT NULL REFERENCES nodes (node_id),
    kind TEXT NOT NULL CHECK (kind IN ('spans', 'presence')),
    wal_position BIGINT NOT NULL CHECK (wal_position >= 0),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (node_id, kind)
);
