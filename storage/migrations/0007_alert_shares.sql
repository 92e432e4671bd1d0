-- Each node's share of the cluster's live evaluation (issue 27, item 3): after every
-- evaluation a node replaces its row with its per-window counts and its findings judged per
-- span (`share`), and its presence signals (`signals`, which every node reads before judging
-- lanes). The alert leader merges the fresh rows; a node with a live heartbeat and no fresh
-- row makes the evaluation partial (no alert resolves). Replaced, never added to.
CREATE TABLE alert_shares (
    node_id TEXT PRIMARY KEY,
    share BYTEA NOT NULL,
    signals BYTEA NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
