//! Each node's share of the cluster's live evaluation in the catalog (migration 0007,
//! `alert_shares`): one row per node, replaced after each of its evaluations, holding what it
//! counted and judged (`share`) and its presence signals (`signals`), both as the `queries`
//! crate wrote them (opaque here). The alert leader reads every fresh share and the nodes
//! that should have one ([`Catalog::shares`]); every node reads the others' signals
//! ([`Catalog::other_signals`]). Ages are measured by PostgreSQL's clock.
//!
//! Does not own what a share holds nor how shares merge (the `queries` crate's alerts).

use std::time::Duration;

use sqlx::Row;

use super::{Catalog, CatalogError, query_error};
use crate::node::NodeId;

/// The shares as the alert leader reads them ([`Catalog::shares`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shares {
    /// (node id, share) of every share written within the freshness bound, by node id.
    pub fresh: Vec<(String, Vec<u8>)>,
    /// Nodes with a recent heartbeat but no fresh share, by node id.
    pub missing: Vec<String>,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Catalog {
    /// Replaces `node`'s share and signals.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn put_share(
        &self,
        node: &NodeId,
        share: &[u8],
        signals: &[u8],
    ) -> Result<(), CatalogError> {
        sqlx::query(
            "INSERT INTO alert_shares (node_id, share, signals, updated_at) \
             VALUES ($1, $2, $3, now()) \
             ON CONFLICT (node_id) DO UPDATE SET share = excluded.share, \
               signals = excluded.signals, updated_at = now()",
        )
        .bind(node.as_str())
        .bind(share)
        .bind(signals)
        .execute(&self.pool)
        .await
        .map_err(query_error("writing a node's share"))?;
        Ok(())
    }

    /// The signals of every node but `node` written within `fresh`, by node id.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn other_signals(
        &self,
        node: &NodeId,
        fresh: Duration,
    ) -> Result<Vec<Vec<u8>>, CatalogError> {
        let rows = sqlx::query(
            "SELECT signals FROM alert_shares \
             WHERE node_id <> $1 AND updated_at > now() - make_interval(secs => $2) \
             ORDER BY node_id",
        )
        .bind(node.as_str())
        .bind(secs(fresh))
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("reading the other nodes' signals"))?;
        rows.iter()
            .map(|r| r.try_get("signals").map_err(query_error("reading signals")))
            .collect()
    }

    /// Every share written within `fresh`, and the nodes whose heartbeat is younger than
    /// `alive` that wrote none within it.
    ///
    /// # Errors
    /// [`CatalogError::Query`].
    pub async fn shares(&self, fresh: Duration, alive: Duration) -> Result<Shares, CatalogError> {
        let rows = sqlx::query(
            "SELECT node_id, share FROM alert_shares \
             WHERE updated_at > now() - make_interval(secs => $1) ORDER BY node_id",
        )
        .bind(secs(fresh))
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("reading the nodes' shares"))?;
        let fresh_rows: Vec<(String, Vec<u8>)> = rows
            .iter()
            .map(|r| {
                Ok((
                    r.try_get("node_id")
                        .map_err(query_error("reading a share"))?,
                    r.try_get("share").map_err(query_error("reading a share"))?,
                ))
            })
            .collect::<Result<_, CatalogError>>()?;
        let alive_rows = sqlx::query(
            "SELECT node_id FROM nodes \
             WHERE heartbeat_at > now() - make_interval(secs => $1) ORDER BY node_id",
        )
        .bind(secs(alive))
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("reading the live nodes"))?;
        let mut missing = Vec::new();
        for r in &alive_rows {
            let id: String = r
                .try_get("node_id")
                .map_err(query_error("reading a node"))?;
            if !fresh_rows.iter().any(|(n, _)| *n == id) {
                missing.push(id);
            }
        }
        Ok(Shares {
            fresh: fresh_rows,
            missing,
        })
    }
}
