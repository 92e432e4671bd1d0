-- The control plane in PostgreSQL (`[control] postgres_url`): the same operation log and
-- current rows as the SQLite database of `control/migrations/`, shared by every node. These
-- tables live in the schema `dyeline_control` (the connections' search_path), beside the
-- storage catalog's tables of the same database, with this schema's own `_sqlx_migrations`.
--
-- `control_seq` is one counter row: a write locks it first (so writers of every node take
-- turns) and takes each sequence number from it (`seq = seq + 1`) in its own transaction, so
-- sequence numbers are allocated in commit order and a refused or rolled-back write consumes
-- none: the log never has a gap.
CREATE TABLE control_seq (
    id  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id),
    seq BIGINT NOT NULL CHECK (seq >= 0)
);
INSERT INTO control_seq (id, seq) VALUES (TRUE, 0);

-- Every accepted operation. `subject` is the channel, or the lane group for the ops
-- `lane_group_put` (the whole group as JSON in `lane_group`) and `lane_group_delete`.
CREATE TABLE control_ops (
    seq          BIGINT PRIMARY KEY CHECK (seq > 0),
    t_unix_nano  BIGINT NOT NULL,
    subject      TEXT NOT NULL,
    op           TEXT NOT NULL,      -- start | ratio | finish | apps | delete | lane_group_put | lane_group_delete
    blue_percent BIGINT,             -- ratio only
    apps         TEXT,               -- apps only: JSON array
    lane_group   TEXT,               -- lane_group_put only: the group as JSON
    actor        TEXT NOT NULL,      -- token name, or `import`
    imported     BOOLEAN NOT NULL DEFAULT FALSE,
    note         TEXT                -- trimmed, 1..=500 characters, NULL when none
);

CREATE INDEX control_ops_by_time ON control_ops (t_unix_nano, seq);

-- The current state of each channel and lane group, rewritten in the same transaction as each
-- of its ops, guarded by the version the writer validated against.
CREATE TABLE control_channels (
    id           TEXT PRIMARY KEY,
    apps         TEXT NOT NULL,      -- JSON array of app names
    state        TEXT NOT NULL,      -- idle | releasing
    blue_percent BIGINT NOT NULL,    -- 0..=100
    version      BIGINT NOT NULL
);

CREATE TABLE control_lane_groups (
    id      TEXT PRIMARY KEY,
    body    TEXT NOT NULL,           -- the group as JSON (the timeline's `lane_group` object)
    version BIGINT NOT NULL
);
