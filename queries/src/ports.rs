//! The ports through which queries read the running server's release state: implemented by
//! the server's wiring over the control plane, so `queries` depends on `model` and `store`
//! only (GreptimeDB's "through the trait, not engine internals").

use dyeline_model::release::Timeline;

/// The release state now, as the analysis routes, the live evaluation and the span
/// observers read it.
pub trait Releases: Send + Sync {
    /// The release timeline now (places spans in channels).
    fn timeline(&self) -> Timeline;
    /// Channel `id` exists now.
    fn has_channel(&self, id: &str) -> bool;
}
