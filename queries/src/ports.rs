//! The ports between queries and the running server: the release state queries read
//! ([`Releases`], implemented by the server's wiring over the control plane, so `queries`
//! depends on `model` and `store` only: GreptimeDB's "through the trait, not engine
//! internals"), and the observers of the rows the store keeps ([`KeptRowsObserver`]: the
//! span metrics and the channel rollups, which the server's sink calls in turn), and the
//! cluster's alert leader ([`AlertCluster`]: the election and the book in PostgreSQL, which
//! the server wires to the `storage` crate, so `queries` never depends on it), and the other
//! nodes of a cluster as a cluster-wide read asks them ([`Peers`]).

use std::collections::HashSet;

use arrow::array::RecordBatch;
use dyeline_model::release::Timeline;

/// The release state now, as the analysis routes, the live evaluation and the span
/// observers read it.
pub trait Releases: Send + Sync {
    /// The release timeline now (places spans in channels).
    fn timeline(&self) -> Timeline;
    /// Channel `id` exists now.
    fn has_channel(&self, id: &str) -> bool;
    /// App `app`'s effective channel now, none outside a release.
    fn effective_channel(&self, app: &str) -> Option<String>;
}

/// Sees the rows the store kept (a resent span once), after each write.
pub trait KeptRowsObserver: Send + Sync {
    /// Counts the kept rows of one write (rows of the `spans` schema).
    fn observe(&self, kept: &RecordBatch);
}

/// Why the alert cluster refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The lease has passed to a later epoch: this node is no longer the leader and its write
    /// changed nothing.
    #[error("the alert lease is no longer held by epoch {0}")]
    Fenced(i64),
    /// PostgreSQL failed or could not be reached.
    #[error("{0}")]
    Unavailable(String),
}

/// The cluster's alert leader as the live evaluation sees it (issue 27, item 3): whether this
/// node leads, and the alert book and its deliveries, stored where every node reads them.
/// Every write carries the leader's epoch and is refused ([`ClusterError::Fenced`]) once
/// another node has taken the lease.
#[async_trait::async_trait]
pub trait AlertCluster: Send + Sync {
    /// The epoch this node leads with now; `None` when it does not lead, or its lease's
    /// deadline (on its own monotonic clock) has passed.
    fn leading(&self) -> Option<i64>;
    /// How long this node may still act as leader (zero when it does not lead): no delivery
    /// request outlives it.
    fn lease_left(&self) -> std::time::Duration;
    /// Every alert of the stored book.
    async fn load(&self) -> Result<Vec<crate::alerts::Alert>, ClusterError>;
    /// Writes `alerts` (new or changed) into the stored book, fenced by `epoch`.
    async fn save(&self, epoch: i64, alerts: &[crate::alerts::Alert]) -> Result<(), ClusterError>;
    /// Which (idempotency key, target) pairs of `keys` were delivered.
    async fn delivered(&self, keys: &[String]) -> Result<HashSet<(String, String)>, ClusterError>;
    /// Records that `target` accepted the delivery `key`, fenced by `epoch`.
    async fn record(&self, epoch: i64, key: &str, target: &str) -> Result<(), ClusterError>;
    /// This node's id.
    fn node(&self) -> String;
    /// Replaces this node's share of the live evaluation and its presence signals (both as
    /// [`crate::alerts::share`] writes them).
    async fn publish(&self, share: Vec<u8>, signals: Vec<u8>) -> Result<(), ClusterError>;
    /// The other nodes' fresh presence signals.
    async fn other_signals(&self) -> Result<Vec<Vec<u8>>, ClusterError>;
    /// Every fresh share, (node id, share), and the live nodes without one.
    async fn shares(&self) -> Result<(Vec<(String, Vec<u8>)>, Vec<String>), ClusterError>;
}

/// One other node's answer to a cluster-wide read ([`Peers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerAnswer {
    /// Its rows, as an Arrow IPC stream of the `spans` schema.
    Rows {
        /// The node id.
        node: String,
        /// The stream's bytes.
        ipc: Vec<u8>,
    },
    /// It did not answer (down, unreachable, refused, timed out).
    Unreachable {
        /// The node id.
        node: String,
        /// Why, for the log.
        error: String,
    },
}

/// The other live nodes of a cluster (issue 27, item 4): each answers for the rows it holds
/// itself (its memory, local files and the objects it uploaded), so a read on any node can
/// answer for the whole cluster.
#[async_trait::async_trait]
pub trait Peers: Send + Sync {
    /// Every other live node's rows of trace `trace_id` (32 lower-case hex digits).
    async fn trace_rows(&self, trace_id: &str) -> Vec<PeerAnswer>;
}
