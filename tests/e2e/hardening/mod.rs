//! Hardening (issue 23): hostile but plausible input against a real `dyeline serve`, one module
//! per front. Every attack is bounded in count and time, and each test asserts that the server
//! stays up, answers `/healthz` within a second during and after the attack
//! ([`HealthWatch`]), and keeps its resident memory under a stated bound ([`rss_bytes`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::Server;

/// The server's resident set size in bytes (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_bytes(server: &Server) -> u64 {
    proc_status_kib(server, "VmRSS:") * 1024
}

/// The server's peak resident set size so far in bytes (`VmHWM`).
pub fn peak_rss_bytes(server: &Server) -> u64 {
    proc_status_kib(server, "VmHWM:") * 1024
}

fn proc_status_kib(server: &Server, key: &str) -> u64 {
    let pid = server.pid().expect("server running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// Polls `GET /healthz` every 100 ms on a thread of its own (a fresh connection each time, with
/// a 1 s timeout) while an attack runs.
pub struct HealthWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Result<Duration, String>>>>,
    /// No cluster test loads the machine while this one times answers.
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// What a [`HealthWatch`] saw.
#[derive(Debug)]
pub struct Health {
    /// Probes made.
    pub probes: usize,
    /// Slowest successful answer.
    pub slowest: Duration,
    /// Probes that failed or took a second or more, with why.
    pub failures: Vec<String>,
}

impl HealthWatch {
    /// Starts polling `server`'s API port.
    pub fn start(server: &Server) -> Self {
        let turn = crate::support::heavy_turn();
        let url = format!("http://{}/healthz", server.api);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                seen.push(probe(&url));
                std::thread::sleep(Duration::from_millis(100));
            }
            seen
        });
        Self {
            stop,
            thread: Some(thread),
            _turn: turn,
        }
    }

    /// Stops polling and returns what was seen.
    pub fn finish(mut self) -> Health {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self
            .thread
            .take()
            .expect("not finished twice")
            .join()
            .expect("watch thread");
        let mut health = Health {
            probes: seen.len(),
            slowest: Duration::ZERO,
            failures: Vec::new(),
        };
        for s in seen {
            match s {
                Ok(d) if d < Duration::from_secs(1) => health.slowest = health.slowest.max(d),
                Ok(d) => health.failures.push(format!("answered after {d:?}")),
                Err(e) => health.failures.push(e),
            }
        }
        health
    }

    /// Stops polling and panics unless every probe was answered 200 within a second.
    pub fn assert_healthy(self, what: &str) -> Health {
        let h = self.finish();
        assert!(h.probes > 0, "{what}: no /healthz probe was made");
        assert!(
            h.failures.is_empty(),
            "{what}: /healthz failed {} of {} probes during the attack: {:?}",
            h.failures.len(),
            h.probes,
            &h.failures[..h.failures.len().min(5)]
        );
        h
    }
}

impl Drop for HealthWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One `/healthz` probe on a fresh connection: its time, or why it failed.
pub fn probe(url: &str) -> Result<Duration, String> {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(1))
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    match client.get(url).send() {
        Ok(r) if r.status().is_success() => Ok(t.elapsed()),
        Ok(r) => Err(format!("status {}", r.status())),
        Err(e) => Err(format!("{e}")),
    }
}

/// Panics unless `server` is still running and answers `/healthz` within a second.
pub fn assert_up(server: &mut Server, what: &str) {
    assert!(server.is_running(), "{what}: the server process exited");
    let url = format!("http://{}/healthz", server.api);
    if let Err(e) = probe(&url) {
        panic!("{what}: /healthz after the attack: {e}");
    }
}

mod auth;
mod ingest;
mod listen;
mod sql;
mod trace;
