-- Control plane schema. `ops` is the source of truth (every accepted operation, in sequence
-- order; AUTOINCREMENT so a sequence number is never reused); `channels` is the current state
-- of each channel, rewritten in the same transaction as each op.
CREATE TABLE channels (
    id           TEXT PRIMARY KEY NOT NULL,
    apps         TEXT NOT NULL,            -- JSON array of app names
    state        TEXT NOT NULL,            -- idle | releasing
    blue_percent INTEGER NOT NULL,         -- 0..=100
    version      INTEGER NOT NULL
) STRICT;

CREATE TABLE ops (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    t_unix_nano  INTEGER NOT NULL,
    channel      TEXT NOT NULL,
    op           TEXT NOT NULL,            -- start | ratio | finish | apps | delete
    blue_percent INTEGER,                  -- ratio only
    apps         TEXT,                     -- apps only: JSON array
    actor        TEXT NOT NULL,            -- token name, or `import`
    imported     INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX ops_by_time ON ops (t_unix_nano, seq);
