-- Cluster-wide views (issue 27): each node's heartbeat says where its API answers, so that any
-- node (and `dyeline cluster status`) can reach the others. Null until the node's first
-- heartbeat with it.
ALTER TABLE nodes ADD COLUMN api_url TEXT;
