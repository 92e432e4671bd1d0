//! Throttling of failed authentications (issue 23): wrong bearer tokens, wrong sign-in cookies
//! and failed sign-ins are counted per client address and in total over a fixed window; once
//! either count reaches its limit, credentials from that client (or from everyone) are refused
//! with 429 and `Retry-After` until the window ends, without being checked, so a guess made
//! then tells nothing. Successful checks are not counted and cost one uncontended lock.
//!
//! Owns the counting only; the server's gate decides what is a failure and answers. Memory is
//! bounded: a client is remembered only when it fails, failures in one window are capped by the
//! total limit, and every window starts empty. IPv6 clients are counted per /64 (one host
//! commonly holds a whole /64), IPv4-mapped IPv6 as IPv4.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The limits of a [`Throttle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThrottleLimits {
    /// Failures one client may make in a window.
    pub per_client: u32,
    /// Failures all clients together may make in a window.
    pub total: u32,
    /// The window.
    pub window: Duration,
}

/// Why credentials are refused unchecked, and until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// Whole seconds until the window ends (at least 1), for `Retry-After`.
    pub retry_after_secs: u64,
    /// True when the total limit was reached, false when this client's was.
    pub total: bool,
}

/// Counts failed authentications per client and in total over a fixed window.
#[derive(Debug)]
pub struct Throttle {
    limits: ThrottleLimits,
    state: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    total: u32,
    clients: HashMap<IpAddr, u32>,
}

/// The key a client is counted under: IPv4 as is, IPv6 by its /64.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl Throttle {
    /// A throttle with `limits`.
    pub fn new(limits: ThrottleLimits) -> Self {
        Self {
            limits,
            state: Mutex::new(Window {
                started: Instant::now(),
                total: 0,
                clients: HashMap::new(),
            }),
        }
    }

    /// Its limits.
    pub fn limits(&self) -> ThrottleLimits {
        self.limits
    }

    /// `Some` when a credential from `client` must be refused unchecked now.
    pub fn blocked(&self, client: IpAddr) -> Option<Blocked> {
        self.blocked_at(client, Instant::now())
    }

    /// Counts one failure of `client`; true when this one reached the client's or the total
    /// limit (credentials are refused unchecked from now until the window ends).
    pub fn failed(&self, client: IpAddr) -> bool {
        self.failed_at(client, Instant::now())
    }

    fn window<'a>(&self, w: &'a mut Window, now: Instant) -> &'a mut Window {
        if now.saturating_duration_since(w.started) >= self.limits.window {
            w.started = now;
            w.total = 0;
            w.clients.clear();
            // Give back the memory of a window that an attack filled.
            w.clients.shrink_to(64);
        }
        w
    }

    fn blocked_at(&self, client: IpAddr, now: Instant) -> Option<Blocked> {
        let mut guard = self.state.lock();
        let w = self.window(&mut guard, now);
        let total = w.total >= self.limits.total;
        let mine = w.clients.get(&client_key(client)).copied().unwrap_or(0);
        if !total && mine < self.limits.per_client {
            return None;
        }
        let left = self
            .limits
            .window
            .saturating_sub(now.saturating_duration_since(w.started));
        Some(Blocked {
            retry_after_secs: left.as_secs_f64().ceil().max(1.0) as u64,
            total,
        })
    }

    fn failed_at(&self, client: IpAddr, now: Instant) -> bool {
        let mut guard = self.state.lock();
        let w = self.window(&mut guard, now);
        w.total = w.total.saturating_add(1);
        let key = client_key(client);
        // At most `total` clients fail in a window before everyone is refused unchecked; past
        // that, only known clients are counted (the total limit holds the rest).
        let mine = if let Some(n) = w.clients.get_mut(&key) {
            *n = n.saturating_add(1);
            *n
        } else if w.clients.len() < self.limits.total as usize {
            w.clients.insert(key, 1);
            1
        } else {
            0
        };
        w.total == self.limits.total || mine == self.limits.per_client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ThrottleLimits {
        ThrottleLimits {
            per_client: 3,
            total: 5,
            window: Duration::from_secs(10),
        }
    }

    #[test]
    fn a_client_is_refused_after_its_failures_until_the_window_ends() {
        let t = Throttle::new(limits());
        let t0 = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for i in 0..3 {
            assert_eq!(t.blocked_at(a, t0), None);
            assert_eq!(
                t.failed_at(a, t0),
                i == 2,
                "the third failure reaches the limit"
            );
        }
        let blocked = t.blocked_at(a, t0 + Duration::from_millis(2500)).unwrap();
        assert_eq!(
            blocked,
            Blocked {
                retry_after_secs: 8,
                total: false
            }
        );
        assert_eq!(t.blocked_at(b, t0), None, "another client is not refused");
        assert_eq!(t.blocked_at(a, t0 + Duration::from_secs(10)), None);
    }

    #[test]
    fn the_total_limit_refuses_everyone() {
        let t = Throttle::new(limits());
        let t0 = Instant::now();
        for i in 0..5u8 {
            t.failed_at(IpAddr::from([10, 0, 1, i]), t0);
        }
        let fresh: IpAddr = "192.0.2.9".parse().unwrap();
        assert!(t.blocked_at(fresh, t0).unwrap().total);
        assert_eq!(
            t.blocked_at(
                fresh,
                t0 + Duration::from_secs(9) + Duration::from_millis(1)
            )
            .unwrap()
            .retry_after_secs,
            1
        );
        assert_eq!(t.blocked_at(fresh, t0 + Duration::from_secs(11)), None);
    }

    #[test]
    fn ipv6_clients_count_per_64_and_mapped_v4_as_v4() {
        let t = Throttle::new(limits());
        let t0 = Instant::now();
        for host in 1..=3u16 {
            t.failed_at(
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, host)),
                t0,
            );
        }
        let same_64 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 9, 9, 9, 9));
        let other_64 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 3, 0, 0, 0, 1));
        assert!(t.blocked_at(same_64, t0).is_some());
        assert_eq!(t.blocked_at(other_64, t0), None);
        let t = Throttle::new(limits());
        for _ in 0..3 {
            t.failed_at("::ffff:10.0.0.7".parse().unwrap(), t0);
        }
        assert!(t.blocked_at("10.0.0.7".parse().unwrap(), t0).is_some());
    }

    #[test]
    fn memory_is_bounded_by_the_total_limit() {
        let t = Throttle::new(limits());
        let t0 = Instant::now();
        for i in 0..1000u32 {
            t.failed_at(IpAddr::from(i.to_be_bytes()), t0);
        }
        assert_eq!(t.state.lock().clients.len(), 5);
    }
}
