//! One connection's state, shared by the connection's task ([`super::conn`]), its requests
//! ([`super::request`]) and the admission of other connections: requests in flight, since when
//! it has been idle, since when its writes have been blocked, and whether it is closing.
//!
//! Owns the meaning of idle (no request in flight) and of a blocked write. Does not own the
//! policies that read them (eviction, the idle and write timeouts: [`super::conn`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// One connection's state, seen by its task, its requests and the admission of others.
pub(crate) struct ConnState {
    pub(super) id: u64,
    /// Requests in flight.
    in_flight: AtomicUsize,
    /// When the connection was accepted or its last request ended (ms since the epoch).
    pub(super) idle_since_ms: AtomicU64,
    /// Since when writes have been refused by a full socket (ms since the epoch), or
    /// [`NOT_BLOCKED`].
    pub(super) write_blocked_since_ms: AtomicU64,
    /// Set once the server has decided to close it (idle, evicted, shutting down).
    pub(super) closing: AtomicBool,
    /// Wakes the task to close the connection (eviction).
    pub(super) evict: Notify,
}

impl ConnState {
    /// A connection accepted at `now_ms` (ms since the listener's epoch): idle, not closing,
    /// its writes not blocked.
    pub(super) fn new(id: u64, now_ms: u64) -> Self {
        Self {
            id,
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(now_ms),
            write_blocked_since_ms: AtomicU64::new(NOT_BLOCKED),
            closing: AtomicBool::new(false),
            evict: Notify::new(),
        }
    }

    pub(crate) fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn request_ended(&self, now_ms: u64) {
        self.idle_since_ms.store(now_ms, Ordering::Release);
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    pub(super) fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// How long writes have been blocked, if they are.
    pub(super) fn write_blocked_for(&self, now_ms: u64) -> Option<Duration> {
        let since = self.write_blocked_since_ms.load(Ordering::Acquire);
        (since != NOT_BLOCKED).then(|| Duration::from_millis(now_ms.saturating_sub(since)))
    }
}

/// [`ConnState::write_blocked_since_ms`] when writes are not blocked.
pub(super) const NOT_BLOCKED: u64 = u64::MAX;
