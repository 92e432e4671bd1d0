//! The receivers' own counters, registered in a Prometheus registry (`/metrics` on the API
//! port): spans accepted per transport, spans discarded per reason (a closed set), requests
//! refused per reason, spans whose decision value passed the baggage limits, and lane carriers
//! that gave no lane id.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::convert::RejectReason;
use crate::error::IngestError;

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

    /// Counts a discard.
    pub fn discard(&self, reason: &'static str, n: u64) {
        self.spans_discarded
            .get_or_create(&ReasonLabel { reason })
            .inc_by(n);
    }
}
