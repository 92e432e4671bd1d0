//! The ports between queries and the running server: the release state queries read
//! ([`Releases`], implemented by the server's wiring over the control plane, so `queries`
//! depends on `model` and `store` only: GreptimeDB's "through the trait, not engine
//! internals"), and the observers of the rows the store keeps ([`KeptRowsObserver`]: the
//! span metrics and the channel rollups, which the server's sink calls in turn).

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
