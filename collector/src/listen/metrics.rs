//! The listeners' counters and gauges, labelled by `listener` (`otlp_grpc`, `otlp_http`, `api`)
//! and, for refusals and closes, by `reason` (a closed set: the setting that refused, or what
//! closed the connection).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Label: the listener.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabel {
    /// Listener name.
    pub listener: &'static str,
}

/// Labels: the listener and a reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerReasonLabel {
    /// Listener name.
    pub listener: &'static str,
    /// Reason name.
    pub reason: &'static str,
}

/// Labels: the listener and how a TLS reload ended (`ok`, `failed`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TlsReloadLabel {
    /// Listener name.
    pub listener: &'static str,
    /// `ok` or `failed`.
    pub outcome: &'static str,
}

/// Why a connection was refused at accept.
pub const CONNECTION_REFUSALS: [&str; 1] = ["max_connections"];
/// Why the server closed a connection.
pub const CONNECTION_CLOSES: [&str; 6] = [
    "idle_timeout",
    "write_timeout",
    "evicted",
    "header_read_timeout",
    "http2_enhance_your_calm",
    "tls_handshake",
];
/// Why a request was refused by the listener.
pub const REQUEST_REFUSALS: [&str; 3] = [
    "max_concurrent_requests",
    "max_buffered_request_bytes",
    "request_read_timeout",
];

/// The families, shared by every listener.
#[derive(Debug, Default, Clone)]
pub struct ListenerMetrics {
    /// `dyeline_listener_connections{listener}`: connections open.
    pub connections: Family<ListenerLabel, Gauge>,
    /// `dyeline_listener_connections_accepted_total{listener}`.
    pub accepted: Family<ListenerLabel, Counter>,
    /// `dyeline_listener_connections_refused_total{listener,reason}`: closed at accept.
    pub refused: Family<ListenerReasonLabel, Counter>,
    /// `dyeline_listener_connections_closed_total{listener,reason}`: closed by the server.
    pub closed: Family<ListenerReasonLabel, Counter>,
    /// `dyeline_listener_accept_errors_total{listener}`: accept failures (EMFILE and others).
    pub accept_errors: Family<ListenerLabel, Counter>,
    /// `dyeline_listener_requests_in_flight{listener}`.
    pub in_flight: Family<ListenerLabel, Gauge>,
    /// `dyeline_listener_requests_refused_total{listener,reason}`.
    pub requests_refused: Family<ListenerReasonLabel, Counter>,
    /// `dyeline_listener_buffered_request_bytes{listener}`: request body bytes held.
    pub buffered_bytes: Family<ListenerLabel, Gauge>,
    /// `dyeline_listener_tls_reloads_total{listener,outcome}`: certificate files read again
    /// after a change (listeners with TLS only).
    pub tls_reloads: Family<TlsReloadLabel, Counter>,
}

impl ListenerMetrics {
    /// Registers the families, with every series of `listeners` created at zero.
    pub fn register(&self, registry: &mut Registry, listeners: &[&'static str]) {
        for &listener in listeners {
            let _ = self.handles(listener);
        }
        registry.register(
            "dyeline_listener_connections",
            "Connections open, by listener",
            self.connections.clone(),
        );
        registry.register(
            "dyeline_listener_connections_accepted",
            "Connections accepted, by listener",
            self.accepted.clone(),
        );
        registry.register(
            "dyeline_listener_connections_refused",
            "Connections closed at accept, by listener and the setting that refused them",
            self.refused.clone(),
        );
        registry.register(
            "dyeline_listener_connections_closed",
            "Connections closed by the server, by listener and reason",
            self.closed.clone(),
        );
        registry.register(
            "dyeline_listener_accept_errors",
            "Failed accepts (such as EMFILE), by listener",
            self.accept_errors.clone(),
        );
        registry.register(
            "dyeline_listener_requests_in_flight",
            "Requests in flight, by listener",
            self.in_flight.clone(),
        );
        registry.register(
            "dyeline_listener_requests_refused",
            "Requests refused by a listener limit, by listener and the setting that refused them",
            self.requests_refused.clone(),
        );
        registry.register(
            "dyeline_listener_buffered_request_bytes",
            "Request body bytes held by requests in flight, by listener",
            self.buffered_bytes.clone(),
        );
        registry.register(
            "dyeline_listener_tls_reloads",
            "TLS certificate and key files read again after a change, by listener and outcome",
            self.tls_reloads.clone(),
        );
    }

    /// The series of one listener (created at zero if new).
    pub(crate) fn handles(&self, listener: &'static str) -> Handles {
        let l = ListenerLabel { listener };
        let by = |family: &Family<ListenerReasonLabel, Counter>, reasons: &[&'static str]| {
            reasons
                .iter()
                .map(|&reason| {
                    let c = family
                        .get_or_create(&ListenerReasonLabel { listener, reason })
                        .clone();
                    (reason, c)
                })
                .collect::<Vec<_>>()
        };
        Handles {
            connections: self.connections.get_or_create(&l).clone(),
            accepted: self.accepted.get_or_create(&l).clone(),
            refused: by(&self.refused, &CONNECTION_REFUSALS),
            closed: by(&self.closed, &CONNECTION_CLOSES),
            accept_errors: self.accept_errors.get_or_create(&l).clone(),
            in_flight: self.in_flight.get_or_create(&l).clone(),
            requests_refused: by(&self.requests_refused, &REQUEST_REFUSALS),
            buffered_bytes: self.buffered_bytes.get_or_create(&l).clone(),
        }
    }
}

/// One listener's series, looked up once.
#[derive(Debug, Clone)]
pub(crate) struct Handles {
    pub(crate) connections: Gauge,
    pub(crate) accepted: Counter,
    refused: Vec<(&'static str, Counter)>,
    closed: Vec<(&'static str, Counter)>,
    pub(crate) accept_errors: Counter,
    pub(crate) in_flight: Gauge,
    requests_refused: Vec<(&'static str, Counter)>,
    pub(crate) buffered_bytes: Gauge,
}

fn count(series: &[(&'static str, Counter)], reason: &str) {
    if let Some((_, c)) = series.iter().find(|(r, _)| *r == reason) {
        c.inc();
    } else {
        debug_assert!(false, "unknown reason {reason}");
    }
}

impl Handles {
    /// Counts a connection refused at accept.
    pub(crate) fn connection_refused(&self, reason: &str) {
        count(&self.refused, reason);
    }
    /// Counts a connection the server closed.
    pub(crate) fn connection_closed(&self, reason: &str) {
        count(&self.closed, reason);
    }
    /// Counts a request refused.
    pub(crate) fn request_refused(&self, reason: &str) {
        count(&self.requests_refused, reason);
    }
}
