//! The queries' [`AlertCluster`] port over the storage crate: the election's [`Leader`] says
//! whether this node leads, and the catalog ([`dyeline_storage::catalog::alerts`]) keeps the
//! alert book and its deliveries, fenced by the lease's epoch. Converts between the alert
//! book's [`Alert`] and the catalog's [`AlertRow`]; passes each node's share of the live
//! evaluation ([`dyeline_storage::catalog::shares`]); connects to the catalog on first use
//! and again after a failed connection.

use std::collections::HashSet;

use async_trait::async_trait;
use dyeline_queries::alerts::{Alert, AlertState};
use dyeline_queries::ports::{AlertCluster, ClusterError};
use dyeline_storage::catalog::alerts::AlertRow;
use dyeline_storage::leader::Leader;
use dyeline_storage::node::NodeId;
use dyeline_storage::{Catalog, CatalogError, PostgresUrl};

/// How old the shares of the live evaluation may be ([`Freshness`]).
#[derive(Debug, Clone, Copy)]
pub struct Freshness {
    /// A share (or presence signals) older than this is not merged: three evaluation
    /// intervals plus 2 s.
    pub share: std::time::Duration,
    /// A node whose heartbeat is younger than this should have a fresh share: three
    /// heartbeat intervals.
    pub alive: std::time::Duration,
}

/// The alert leader and the book in the catalog.
pub struct CatalogAlerts {
    leader: Leader,
    url: PostgresUrl,
    node: NodeId,
    freshness: Freshness,
    catalog: tokio::sync::Mutex<Option<Catalog>>,
}

impl CatalogAlerts {
    /// The port of node `node` over `leader` and the catalog at `url`.
    pub fn new(leader: Leader, url: PostgresUrl, node: NodeId, freshness: Freshness) -> Self {
        Self {
            leader,
            url,
            node,
            freshness,
            catalog: tokio::sync::Mutex::new(None),
        }
    }

    async fn catalog(&self) -> Result<Catalog, ClusterError> {
        let mut c = self.catalog.lock().await;
        if let Some(c) = &*c {
            return Ok(c.clone());
        }
        let connected = Catalog::connect(&self.url, 2).await.map_err(unavailable)?;
        *c = Some(connected.clone());
        Ok(connected)
    }
}

fn unavailable(e: CatalogError) -> ClusterError {
    match e {
        CatalogError::LeaderFenced { epoch } => ClusterError::Fenced(epoch),
        e => ClusterError::Unavailable(e.to_string()),
    }
}

/// The catalog's row of `a`.
pub fn to_row(a: &Alert) -> AlertRow {
    AlertRow {
        fingerprint: a.fingerprint(),
        labels: a.labels.clone(),
        annotations: a.annotations.clone(),
        firing: a.state == AlertState::Firing,
        starts_at_unix_nano: a.starts_at_unix_nano,
        ends_at_unix_nano: a.ends_at_unix_nano,
        last_window_end_unix_nano: a.last_window_end_unix_nano,
        window_ns: a.window_ns,
        exemplar_trace_ids: a.exemplar_trace_ids.clone(),
    }
}

/// The alert of the catalog's row `r`.
pub fn from_row(r: AlertRow) -> Alert {
    Alert {
        labels: r.labels,
        annotations: r.annotations,
        state: if r.firing {
            AlertState::Firing
        } else {
            AlertState::Resolved
        },
        starts_at_unix_nano: r.starts_at_unix_nano,
        ends_at_unix_nano: r.ends_at_unix_nano,
        last_window_end_unix_nano: r.last_window_end_unix_nano,
        exemplar_trace_ids: r.exemplar_trace_ids,
        window_ns: r.window_ns,
    }
}

#[async_trait]
impl AlertCluster for CatalogAlerts {
    fn leading(&self) -> Option<i64> {
        self.leader.leading()
    }

    fn lease_left(&self) -> std::time::Duration {
        self.leader.lease_left()
    }

    async fn load(&self) -> Result<Vec<Alert>, ClusterError> {
        let rows = self.catalog().await?.alerts().await.map_err(unavailable)?;
        Ok(rows.into_iter().map(from_row).collect())
    }

    async fn save(&self, epoch: i64, alerts: &[Alert]) -> Result<(), ClusterError> {
        let rows: Vec<AlertRow> = alerts.iter().map(to_row).collect();
        self.catalog()
            .await?
            .store_alerts(epoch, &rows)
            .await
            .map_err(unavailable)
    }

    async fn delivered(&self, keys: &[String]) -> Result<HashSet<(String, String)>, ClusterError> {
        self.catalog()
            .await?
            .deliveries(keys)
            .await
            .map_err(unavailable)
    }

    async fn record(&self, epoch: i64, key: &str, target: &str) -> Result<(), ClusterError> {
        self.catalog()
            .await?
            .record_delivery(epoch, key, target)
            .await
            .map_err(unavailable)
    }

    fn node(&self) -> String {
        self.node.as_str().to_owned()
    }

    async fn publish(&self, share: Vec<u8>, signals: Vec<u8>) -> Result<(), ClusterError> {
        self.catalog()
            .await?
            .put_share(&self.node, &share, &signals)
            .await
            .map_err(unavailable)
    }

    async fn other_signals(&self) -> Result<Vec<Vec<u8>>, ClusterError> {
        self.catalog()
            .await?
            .other_signals(&self.node, self.freshness.share)
            .await
            .map_err(unavailable)
    }

    async fn shares(&self) -> Result<(Vec<(String, Vec<u8>)>, Vec<String>), ClusterError> {
        let s = self
            .catalog()
            .await?
            .shares(self.freshness.share, self.freshness.alive)
            .await
            .map_err(unavailable)?;
        Ok((s.fresh, s.missing))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// An alert survives the catalog's row unchanged, its fingerprint the row's key.
    #[test]
    fn an_alert_round_trips_through_its_row() {
        let a = Alert {
            labels: BTreeMap::from([("alertname".into(), "DyelineCrossColorHop".into())]),
            annotations: BTreeMap::from([("summary".into(), "3 hops".into())]),
            state: AlertState::Resolved,
            starts_at_unix_nano: 5,
            ends_at_unix_nano: Some(9),
            last_window_end_unix_nano: 7,
            exemplar_trace_ids: vec!["ab".repeat(16)],
            window_ns: 60,
        };
        let row = to_row(&a);
        assert_eq!(row.fingerprint, a.fingerprint());
        assert!(!row.firing);
        assert_eq!(from_row(row), a);
    }
}
