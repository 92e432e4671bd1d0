//! The receivers' own counters, registered in a Prometheus registry (`/metrics` on the API
//! port): spans accepted per transport, spans discarded per reason (a closed set), requests
//! refused per reason, spans whose decision value passed the baggage limits, and lane carriers
//! that gave no lane id; for metrics and logs exports, presence rows stored, data points and
//! log records not recorded, and requests refused, each per signal.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::convert::RejectReason;
use crate::error::IngestError;
use crate::signal::Signal;

/// Label: the transport (`grpc`, `http_protobuf`, `http_json`, `import`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransportLabel {
    /// Transport name.
    pub transport: &'static str,
}

/// Label: a discard or refusal reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// Reason name.
    pub reason: &'static str,
}

/// Labels: a presence signal (`metrics`, `logs`) and the transport.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignalTransportLabel {
    /// Signal name.
    pub signal: &'static str,
    /// Transport name.
    pub transport: &'static str,
}

/// Labels: a presence signal and a discard or refusal reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignalReasonLabel {
    /// Signal name.
    pub signal: &'static str,
    /// Reason name.
    pub reason: &'static str,
}

/// Why a data point or log record was not recorded, besides a refusal of its request
/// ([`IngestError::REASONS`]): no usable time (0, or past the year 2262).
pub const PRESENCE_INVALID_TIME: &str = "invalid_time";

/// Counters of the receive path.
#[derive(Debug, Default, Clone)]
pub struct ReceiverMetrics {
    /// `dyeline_receiver_spans_accepted_total{transport}`: spans stored.
    pub spans_accepted: Family<TransportLabel, Counter>,
    /// `dyeline_receiver_spans_discarded_total{reason}`: spans not stored, by reason —
    /// the span reasons of [`RejectReason`], `duplicate`, and the refusal reasons of
    /// [`IngestError`] when the span count of a refused request is known.
    pub spans_discarded: Family<ReasonLabel, Counter>,
    /// `dyeline_receiver_requests_refused_total{reason}`: whole requests refused.
    pub requests_refused: Family<ReasonLabel, Counter>,
    /// `dyeline_receiver_decisions_truncated_total`: spans stored with the decisions read up to
    /// the W3C baggage limits of their value (180 pairs, 8,192 bytes), the rest skipped.
    pub decisions_truncated: Counter,
    /// `dyeline_receiver_malformed_lane_tags_total`: lane carriers on stored spans whose value
    /// gave no lane id (domain §7.1; the span is kept, the next carrier tried).
    pub malformed_lane_tags: Counter,
    /// `dyeline_receiver_presence_signals_accepted_total{signal,transport}`: presence rows
    /// stored from metrics and logs exports (one per instance and signal time).
    pub presence_accepted: Family<SignalTransportLabel, Counter>,
    /// `dyeline_receiver_presence_items_discarded_total{signal,reason}`: data points and log
    /// records not recorded: [`PRESENCE_INVALID_TIME`] (rejected through partial success), and
    /// the refusal reasons of [`IngestError`] for the rows of a request the store refused.
    pub presence_discarded: Family<SignalReasonLabel, Counter>,
    /// `dyeline_receiver_presence_requests_refused_total{signal,reason}`: metrics and logs
    /// export requests refused whole.
    pub presence_refused: Family<SignalReasonLabel, Counter>,
}

impl ReceiverMetrics {
    /// Registers the counters (and every label value, so each series exists from the start).
    pub fn register(&self, registry: &mut Registry) {
        for r in RejectReason::ALL {
            let _ = self
                .spans_discarded
                .get_or_create(&ReasonLabel { reason: r.as_str() });
        }
        let _ = self.spans_discarded.get_or_create(&ReasonLabel {
            reason: "duplicate",
        });
        for r in IngestError::REASONS {
            let _ = self
                .requests_refused
                .get_or_create(&ReasonLabel { reason: r });
            let _ = self
                .spans_discarded
                .get_or_create(&ReasonLabel { reason: r });
        }
        for signal in Signal::ALL.iter().filter_map(|s| s.presence()) {
            let signal = signal.as_str();
            for r in IngestError::REASONS {
                let label = SignalReasonLabel { signal, reason: r };
                let _ = self.presence_refused.get_or_create(&label);
                let _ = self.presence_discarded.get_or_create(&label);
            }
            let _ = self.presence_discarded.get_or_create(&SignalReasonLabel {
                signal,
                reason: PRESENCE_INVALID_TIME,
            });
        }
        registry.register(
            "dyeline_receiver_presence_signals_accepted",
            "Presence rows stored from OTLP metrics and logs exports, by signal and transport",
            self.presence_accepted.clone(),
        );
        registry.register(
            "dyeline_receiver_presence_items_discarded",
            "Metric data points and log records not recorded as presence, by signal and reason",
            self.presence_discarded.clone(),
        );
        registry.register(
            "dyeline_receiver_presence_requests_refused",
            "Metrics and logs export requests refused whole, by signal and reason",
            self.presence_refused.clone(),
        );
        registry.register(
            "dyeline_receiver_spans_accepted",
            "Spans stored, by transport",
            self.spans_accepted.clone(),
        );
        registry.register(
            "dyeline_receiver_spans_discarded",
            "Spans not stored, by reason",
            self.spans_discarded.clone(),
        );
        registry.register(
            "dyeline_receiver_requests_refused",
            "Export requests refused whole, by reason",
            self.requests_refused.clone(),
        );
        registry.register(
            "dyeline_receiver_decisions_truncated",
            "Spans whose decision value passed the W3C baggage limits (180 pairs, 8192 bytes): \
             decisions read up to them, the rest skipped",
            self.decisions_truncated.clone(),
        );
        registry.register(
            "dyeline_receiver_malformed_lane_tags",
            "Lane carriers on stored spans whose value gave no lane id (counted, the span kept)",
            self.malformed_lane_tags.clone(),
        );
    }

    /// Counts a discard of `n` items of `signal` (spans, data points, log records).
    pub fn discard(&self, signal: Signal, reason: &'static str, n: u64) {
        match signal.presence() {
            None => self
                .spans_discarded
                .get_or_create(&ReasonLabel { reason })
                .inc_by(n),
            Some(p) => self
                .presence_discarded
                .get_or_create(&SignalReasonLabel {
                    signal: p.as_str(),
                    reason,
                })
                .inc_by(n),
        };
    }

    /// Counts a request of `signal` refused whole.
    pub fn refuse(&self, signal: Signal, reason: &'static str) {
        match signal.presence() {
            None => self
                .requests_refused
                .get_or_create(&ReasonLabel { reason })
                .inc(),
            Some(p) => self
                .presence_refused
                .get_or_create(&SignalReasonLabel {
                    signal: p.as_str(),
                    reason,
                })
                .inc(),
        };
    }
}
