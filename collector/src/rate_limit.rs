//! Per-source rate limits of the receivers (`[otlp.rate_limit]`): export requests per second
//! from each client address (the connection's peer; behind a proxy or a Collector every
//! request shares its address), a token bucket per address (governor's GCRA) with a burst.
//! A request past its source's rate is refused before its body is read, retryable: HTTP 429
//! with `Retry-After`, gRPC UNAVAILABLE with `RetryInfo` (OTLP's throttling answers), counted
//! as `reason="rate_limited"`. Other sources are not slowed. Buckets of addresses silent for a
//! while are dropped ([`SourceLimiter::forget_idle`]), so the map stays bounded by the
//! addresses seen recently.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};

use crate::error::IngestError;

type Keyed =
    RateLimiter<IpAddr, governor::state::keyed::DefaultKeyedStateStore<IpAddr>, DefaultClock>;

/// The buckets, one per source address.
pub struct SourceLimiter {
    limiter: Keyed,
    clock: DefaultClock,
    per_second: u32,
}

impl std::fmt::Debug for SourceLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceLimiter")
            .field("per_second", &self.per_second)
            .finish()
    }
}

impl SourceLimiter {
    /// `per_second` requests a second from each source, up to `burst` at once; `None` when
    /// `per_second` is 0 (no limit).
    pub fn new(per_second: u32, burst: u32) -> Option<Self> {
        let rate = NonZeroU32::new(per_second)?;
        let burst = NonZeroU32::new(burst.max(1)).unwrap_or(rate);
        Some(Self {
            limiter: RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst)),
            clock: DefaultClock::default(),
            per_second,
        })
    }

    /// `Ok` when `source` may send one more request now.
    ///
    /// # Errors
    /// [`IngestError::RateLimited`] with the wait until it may.
    pub fn check(&self, source: IpAddr) -> Result<(), IngestError> {
        self.limiter.check_key(&source).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now());
            IngestError::RateLimited {
                retry_after: wait.max(Duration::from_secs(1)),
                message: format!(
                    "{source} sends more than {} export requests per second (raise \
                     [otlp.rate_limit] requests_per_second_per_source)",
                    self.per_second
                ),
            }
        })
    }

    /// Drops the buckets of sources that are full again (silent long enough).
    pub fn forget_idle(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }

    /// How many sources have a bucket.
    pub fn sources(&self) -> usize {
        self.limiter.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_past_its_burst_waits_and_others_do_not() {
        let l = SourceLimiter::new(2, 3).unwrap();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..3 {
            assert!(l.check(a).is_ok());
        }
        let e = l.check(a).unwrap_err();
        assert_eq!(e.reason(), "rate_limited");
        assert_eq!(e.http_status().as_u16(), 429);
        assert!(e.retry_after().is_some());
        assert!(e.to_string().contains("10.0.0.1"), "{e}");
        assert!(l.check(b).is_ok(), "another source is not slowed");
        assert_eq!(l.sources(), 2);
        assert!(SourceLimiter::new(0, 10).is_none());
    }
}
