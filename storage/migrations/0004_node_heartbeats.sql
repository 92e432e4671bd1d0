-- Cluster status (issue 27): each node's owner writes a heartbeat into its `nodes` row, with
-- what `dyeline cluster status` shows of it. All null until the node's first heartbeat.
ALTER TABLE nodes
    ADD COLUMN started_at TIMESTAMPTZ,
    ADD COLUMN heartbeat_at TIMESTAMPTZ,
    ADD COLUMN version TEXT,
    ADD COLUMN staging_bytes BIGINT CHECK (staging_bytes >= 0),
    ADD COLUMN upload_lag_ms BIGINT CHECK (upload_lag_ms >= 0);
