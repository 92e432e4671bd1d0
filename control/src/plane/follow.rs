//! Following the other nodes' writes (control plane on PostgreSQL): a task that re-reads the
//! operations by sequence and applies them in order ([`ControlPlane::refresh`], which bumps
//! the stream subscribers' watch) after every wake-up of the store's listener (a
//! notification, or a (re)connection after which notifications may have been lost) and every
//! `poll` as a safety net. A wake-up carries no data. The task ends when the plane is closed
//! or dropped.
//!
//! Does not own the listener connection (`crate::store::postgres`) nor how operations are
//! applied ([`ControlPlane::absorb`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use super::ControlPlane;

/// Starts following for `plane`: `wake` is the store's wake-up counter.
pub(super) fn spawn(plane: &Arc<ControlPlane>, mut wake: watch::Receiver<u64>, poll: Duration) {
    let weak = Arc::downgrade(plane);
    let mut closed = plane.closed.subscribe();
    tokio::spawn(async move {
        let mut timer = tokio::time::interval(poll);
        timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                changed = wake.changed() => if changed.is_err() { return },
                _ = timer.tick() => {}
                _ = closed.changed() => return,
            }
            // Seen before the read: a wake-up during the read makes another one.
            wake.borrow_and_update();
            let Some(plane) = weak.upgrade() else { return };
            match plane.refresh().await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(
                    applied = n,
                    latest = plane.latest_seq(),
                    "control plane: applied other nodes' operations"
                ),
                Err(e) => tracing::warn!(
                    error = %e,
                    "control plane: re-reading the operations failed; retrying at the next wake-up"
                ),
            }
        }
    });
}
