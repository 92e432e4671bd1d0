//! A **test-only** stand-in for the OpenTelemetry Collector's `loadbalancing` exporter with
//! `routing_key: traceID` (the Collector cannot be installed on these machines; in production
//! the Collector routes, see deploy/). Never the product's path.
//!
//! Like the exporter: a consistent-hash ring of named backends (100 points each), so every span
//! of a trace goes to one backend; a sending queue per backend that keeps a batch the backend
//! did not acknowledge (connection refused, 429, 502, 503, 504) and sends it again, in order,
//! before newer ones; the backends' addresses may change under their names (a restarted pod
//! keeps its name, not its address). It records every span key a backend acknowledged.

use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// One span to send: trace, span id, parent span id, app.
#[derive(Clone, Copy, Debug)]
pub struct TestSpan {
    pub trace: u128,
    pub span: u64,
    pub parent: Option<u64>,
    pub app: &'static str,
    pub start_unix_nano: i64,
}

/// The driver.
pub struct RoutingDriver {
    addrs: Vec<SocketAddr>,
    ring: Vec<(u64, usize)>,
    queues: Vec<VecDeque<Vec<TestSpan>>>,
    client: reqwest::blocking::Client,
    /// Every (trace, span id) a backend acknowledged.
    pub acked: HashSet<(u128, u64)>,
    /// Sends refused or failed and queued again.
    pub retries: u64,
}

fn hash64(v: impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

impl RoutingDriver {
    /// A ring of the backends `node-0`.. at their OTLP/HTTP addresses `addrs`.
    pub fn new(addrs: Vec<SocketAddr>) -> Self {
        let mut ring: Vec<(u64, usize)> = (0..addrs.len())
            .flat_map(|b| (0..100).map(move |p| (hash64(format!("node-{b}#{p}")), b)))
            .collect();
        ring.sort_unstable();
        let queues = addrs.iter().map(|_| VecDeque::new()).collect();
        Self {
            addrs,
            ring,
            queues,
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
            acked: HashSet::new(),
            retries: 0,
        }
    }

    /// The backend of `trace`: the first ring point at or after the trace id's hash.
    pub fn backend_of(&self, trace: u128) -> usize {
        let h = hash64(trace);
        let i = self.ring.partition_point(|&(p, _)| p < h);
        self.ring[i % self.ring.len()].1
    }

    /// Backend `b` answers at `addr` from now on (restarted).
    pub fn set_addr(&mut self, b: usize, addr: SocketAddr) {
        self.addrs[b] = addr;
    }

    /// Queues `spans` by backend and sends what each backend takes now.
    pub fn send(&mut self, spans: &[TestSpan]) {
        let mut split: Vec<Vec<TestSpan>> = vec![Vec::new(); self.addrs.len()];
        for s in spans {
            split[self.backend_of(s.trace)].push(*s);
        }
        for (b, part) in split.into_iter().enumerate() {
            if !part.is_empty() {
                self.queues[b].push_back(part);
            }
        }
        self.pump();
    }

    /// Sends every queue's batches in order until one is not acknowledged.
    fn pump(&mut self) {
        for b in 0..self.addrs.len() {
            while let Some(batch) = self.queues[b].front() {
                if self.post(self.addrs[b], batch) {
                    for s in batch {
                        self.acked.insert((s.trace, s.span));
                    }
                    self.queues[b].pop_front();
                } else {
                    self.retries += 1;
                    break;
                }
            }
        }
    }

    /// Sends until every queue is empty; panics after `within`.
    pub fn flush(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            self.pump();
            if self.queues.iter().all(VecDeque::is_empty) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "batches still unacknowledged after {within:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// One POST of `batch` as OTLP/JSON: acknowledged or retryable; anything else is a bug of
    /// the test and panics.
    fn post(&self, addr: SocketAddr, batch: &[TestSpan]) -> bool {
        let r = self
            .client
            .post(format!("http://{addr}/v1/traces"))
            .header("content-type", "application/json")
            .body(otlp_json(batch))
            .send();
        match r {
            Ok(r) if r.status().is_success() => true,
            Ok(r) if [429, 502, 503, 504].contains(&r.status().as_u16()) => false,
            Ok(r) => panic!(
                "{addr} refused a batch: {} {}",
                r.status(),
                r.text().unwrap()
            ),
            Err(_) => false, // down: connection refused or reset, or timed out
        }
    }
}

/// `spans` as one OTLP/JSON export request, one resource per span (its app and an instance
/// of it).
pub fn otlp_json(spans: &[TestSpan]) -> String {
    let resources: Vec<String> = spans
        .iter()
        .map(|s| {
            let parent = s
                .parent
                .map_or(String::new(), |p| format!(r#""parentSpanId":"{p:016x}","#));
            format!(
                r#"{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"{app}"}}}},{{"key":"service.instance.id","value":{{"stringValue":"{app}-blue-1"}}}}]}},"scopeSpans":[{{"spans":[{{"traceId":"{:032x}","spanId":"{:016x}",{parent}"name":"op","kind":2,"startTimeUnixNano":"{}","endTimeUnixNano":"{}"}}]}}]}}"#,
                s.trace,
                s.span,
                s.start_unix_nano,
                s.start_unix_nano + 1_000_000,
                app = s.app,
            )
        })
        .collect();
    format!(r#"{{"resourceSpans":[{}]}}"#, resources.join(","))
}
