//! What `dyeline cluster status` shows: every node the catalog knows ([`Catalog::nodes`]),
//! whether it is alive (a heartbeat within three intervals), its owner epoch, version, API
//! address, staging bytes, upload lag and live objects, and the cluster's alert leader and
//! epoch (the lease row, [`crate::catalog::alerts`]); as text (a table) or
//! JSON.
//!
//! Does not own the heartbeat ([`crate::heartbeat`]) or the node rows ([`crate::catalog`]).

use std::fmt;
use std::time::Duration;

use comfy_table::presets::NOTHING;
use comfy_table::{CellAlignment, Table};
use serde::Serialize;

use crate::catalog::alerts::LeaseStatus;
use crate::catalog::nodes::NodeStatus;
use crate::catalog::{Catalog, CatalogError};

/// How many heartbeat intervals a node may miss before it shows as stale.
pub const MISSED_BEATS: u32 = 3;

/// A node's liveness as the status judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// A heartbeat within [`MISSED_BEATS`] intervals.
    Alive,
    /// Its last heartbeat is older.
    Stale,
    /// It never sent one (claimed by a version without heartbeats, or gone before its first).
    Never,
}

/// One node and its liveness.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeLine {
    /// Alive, stale or never.
    pub state: Liveness,
    /// The catalog's row.
    #[serde(flatten)]
    pub node: NodeStatus,
}

/// The cluster as the catalog knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterStatus {
    /// The heartbeat interval the liveness was judged by, seconds.
    pub heartbeat_interval_s: f64,
    /// Every node, by id.
    pub nodes: Vec<NodeLine>,
    /// The alert lease: its holder, epoch and time left (`holder` none before the first
    /// election).
    pub alert_leader: LeaseStatus,
}

/// Reads the status from `catalog`, judging liveness by `heartbeat_interval`.
///
/// # Errors
/// [`CatalogError::Query`].
pub async fn read(
    catalog: &Catalog,
    heartbeat_interval: Duration,
) -> Result<ClusterStatus, CatalogError> {
    let limit = (heartbeat_interval * MISSED_BEATS).as_secs_f64();
    let nodes = catalog
        .nodes()
        .await?
        .into_iter()
        .map(|node| NodeLine {
            state: match node.heartbeat_age_s {
                None => Liveness::Never,
                Some(age) if age <= limit => Liveness::Alive,
                Some(_) => Liveness::Stale,
            },
            node,
        })
        .collect();
    Ok(ClusterStatus {
        heartbeat_interval_s: heartbeat_interval.as_secs_f64(),
        nodes,
        alert_leader: catalog.alert_lease().await?,
    })
}

fn or_dash<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "-".to_owned(), f)
}

fn bytes(b: u64) -> String {
    bytesize::ByteSize::b(b).to_string()
}

impl fmt::Display for ClusterStatus {
    /// A table of the nodes, then the leader line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut table = Table::new();
        table.load_preset(NOTHING).set_header(vec![
            "node",
            "state",
            "epoch",
            "heartbeat",
            "version",
            "api",
            "staging",
            "upload lag",
            "objects",
            "object bytes",
        ]);
        for line in &self.nodes {
            let n = &line.node;
            let state = match line.state {
                Liveness::Alive => "alive",
                Liveness::Stale => "stale",
                Liveness::Never => "never",
            };
            table.add_row(vec![
                n.node_id.clone(),
                state.to_owned(),
                n.owner_epoch.to_string(),
                or_dash(n.heartbeat_age_s, |a| format!("{a:.1}s ago")),
                or_dash(n.version.clone(), |v| v),
                or_dash(n.api_url.clone(), |v| v),
                or_dash(n.staging_bytes, bytes),
                or_dash(n.upload_lag_ms, |ms| format!("{:.1}s", ms as f64 / 1000.0)),
                n.live_span_files.to_string(),
                bytes(n.live_span_bytes),
            ]);
        }
        for i in [2, 6, 7, 8, 9] {
            if let Some(c) = table.column_mut(i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
        if self.nodes.is_empty() {
            writeln!(f, "no node has claimed a node id in this catalog yet")?;
        } else {
            writeln!(f, "{table}")?;
        }
        let alive = self
            .nodes
            .iter()
            .filter(|n| n.state == Liveness::Alive)
            .count();
        writeln!(
            f,
            "{alive} of {} nodes alive (a heartbeat within {MISSED_BEATS} × {}s)",
            self.nodes.len(),
            self.heartbeat_interval_s
        )?;
        let l = &self.alert_leader;
        match (&l.holder, l.remaining_s) {
            (Some(holder), Some(left)) if left > 0.0 => write!(
                f,
                "alert leader: {holder} (epoch {}, lease {left:.1}s left)",
                l.epoch
            ),
            (Some(holder), left) => write!(
                f,
                "alert leader: none (the lease of {holder}, epoch {}, expired {:.1}s ago)",
                l.epoch,
                -left.unwrap_or(0.0)
            ),
            (None, _) => write!(f, "alert leader: none elected yet"),
        }
    }
}
