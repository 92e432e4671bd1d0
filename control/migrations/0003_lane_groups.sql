-- Lane groups (domain §7.1). Their operations are rows of `ops`, numbered in the same sequence
-- as the channel operations: `op` is `lane_group_put` (the whole group as JSON in the new
-- `lane_group` column) or `lane_group_delete`, and `channel` holds the lane group's id.
-- Existing rows get NULL. `lane_groups` is the current state of each group, rewritten in the
-- same transaction as each of its ops.
ALTER TABLE ops ADD COLUMN lane_group TEXT;

CREATE TABLE lane_groups (
    id      TEXT PRIMARY KEY NOT NULL,
    body    TEXT NOT NULL,            -- the group as JSON (the timeline's `lane_group` object)
    version INTEGER NOT NULL
) STRICT;
