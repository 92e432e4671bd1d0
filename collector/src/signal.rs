//! The three OTLP signals the receivers take ([`Signal`]) and the two body encodings
//! ([`Format`]): each signal's gRPC method, HTTP path, the name of its items, and its export
//! response with OTLP partial success (`rejected_spans`, `rejected_data_points`,
//! `rejected_log_records`) in protobuf and JSON. Traces become `spans` rows; metrics and logs
//! only record presence ([`crate::presence`]).
//!
//! Everything else about an export (limits, decompression, refusals and their statuses, the
//! retry delays) is the same for every signal and lives once in [`crate::http`],
//! [`crate::grpc`] and [`crate::error`].

use dyeline_model::PresenceSignal;
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message;

/// The outcome of an accepted export (OTLP `Export*PartialSuccess`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    /// Items rejected as invalid (spans, data points or log records, by the request's
    /// signal); 0 for full success.
    pub rejected: u64,
    /// Why (the first rejected item), empty when none.
    pub error_message: String,
}

/// An OTLP signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// `TraceService/Export`, `/v1/traces`: spans, stored in `spans`.
    Traces,
    /// `MetricsService/Export`, `/v1/metrics`: presence only.
    Metrics,
    /// `LogsService/Export`, `/v1/logs`: presence only.
    Logs,
}

/// Body encodings of OTLP/HTTP (and of `dyeline import`'s files, always JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/x-protobuf` (also `application/protobuf`).
    Protobuf,
    /// `application/json`.
    Json,
}

impl Format {
    /// The `Content-Type` of a response in this encoding.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Protobuf => "application/x-protobuf",
            Self::Json => "application/json",
        }
    }

    /// The `transport` metric label of OTLP/HTTP in this encoding.
    pub fn transport(self) -> &'static str {
        match self {
            Self::Protobuf => "http_protobuf",
            Self::Json => "http_json",
        }
    }
}

impl Signal {
    /// Every signal.
    pub const ALL: [Self; 3] = [Self::Traces, Self::Metrics, Self::Logs];

    /// The gRPC service name.
    pub const fn grpc_service(self) -> &'static str {
        match self {
            Self::Traces => "opentelemetry.proto.collector.trace.v1.TraceService",
            Self::Metrics => "opentelemetry.proto.collector.metrics.v1.MetricsService",
            Self::Logs => "opentelemetry.proto.collector.logs.v1.LogsService",
        }
    }

    /// The full gRPC method path.
    pub const fn grpc_path(self) -> &'static str {
        match self {
            Self::Traces => "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            Self::Metrics => "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
            Self::Logs => "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
        }
    }

    /// The OTLP/HTTP path.
    pub const fn http_path(self) -> &'static str {
        match self {
            Self::Traces => "/v1/traces",
            Self::Metrics => "/v1/metrics",
            Self::Logs => "/v1/logs",
        }
    }

    /// The signal of a gRPC method path.
    pub fn of_grpc_path(path: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.grpc_path() == path)
    }

    /// What one item of the signal is called, in messages (`spans`, `data points`,
    /// `log records`).
    pub const fn items(self) -> &'static str {
        match self {
            Self::Traces => "spans",
            Self::Metrics => "data points",
            Self::Logs => "log records",
        }
    }

    /// The name of the request message, in messages.
    pub const fn request_message(self) -> &'static str {
        match self {
            Self::Traces => "ExportTraceServiceRequest",
            Self::Metrics => "ExportMetricsServiceRequest",
            Self::Logs => "ExportLogsServiceRequest",
        }
    }

    /// The presence signal this one records; `None` for traces (spans are stored whole).
    pub const fn presence(self) -> Option<PresenceSignal> {
        match self {
            Self::Traces => None,
            Self::Metrics => Some(PresenceSignal::Metrics),
            Self::Logs => Some(PresenceSignal::Logs),
        }
    }

    /// The metric label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Traces => "traces",
            Self::Metrics => "metrics",
            Self::Logs => "logs",
        }
    }

    /// The export response in protobuf: `partial_success` set when items were rejected
    /// (empty for full success).
    pub fn response_protobuf(self, accepted: &Accepted) -> Vec<u8> {
        let partial = accepted.rejected > 0;
        let rejected = i64::try_from(accepted.rejected).unwrap_or(i64::MAX);
        let error_message = accepted.error_message.clone();
        match self {
            Self::Traces => ExportTraceServiceResponse {
                partial_success: partial.then_some(ExportTracePartialSuccess {
                    rejected_spans: rejected,
                    error_message,
                }),
            }
            .encode_to_vec(),
            Self::Metrics => ExportMetricsServiceResponse {
                partial_success: partial.then_some(ExportMetricsPartialSuccess {
                    rejected_data_points: rejected,
                    error_message,
                }),
            }
            .encode_to_vec(),
            Self::Logs => ExportLogsServiceResponse {
                partial_success: partial.then_some(ExportLogsPartialSuccess {
                    rejected_log_records: rejected,
                    error_message,
                }),
            }
            .encode_to_vec(),
        }
    }

    /// The export response in OTLP/JSON: `{}` for full success, else `partialSuccess` with the
    /// signal's `rejected*` count (an int64, so a decimal string) and `errorMessage`.
    pub fn response_json(self, accepted: &Accepted) -> Vec<u8> {
        if accepted.rejected == 0 {
            return b"{}".to_vec();
        }
        let key = match self {
            Self::Traces => "rejectedSpans",
            Self::Metrics => "rejectedDataPoints",
            Self::Logs => "rejectedLogRecords",
        };
        let mut partial = serde_json::Map::new();
        partial.insert(key.into(), accepted.rejected.to_string().into());
        partial.insert("errorMessage".into(), accepted.error_message.clone().into());
        serde_json::json!({ "partialSuccess": partial })
            .to_string()
            .into_bytes()
    }

    /// The export response in `format`.
    pub fn response(self, format: Format, accepted: &Accepted) -> Vec<u8> {
        match format {
            Format::Protobuf => self.response_protobuf(accepted),
            Format::Json => self.response_json(accepted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_signal_answers_partial_success_with_its_own_count() {
        let a = Accepted {
            rejected: 3,
            error_message: "why".into(),
        };
        let json = |s: Signal| -> serde_json::Value {
            serde_json::from_slice(&s.response(Format::Json, &a)).unwrap()
        };
        assert_eq!(json(Signal::Traces)["partialSuccess"]["rejectedSpans"], "3");
        assert_eq!(
            json(Signal::Metrics)["partialSuccess"]["rejectedDataPoints"],
            "3"
        );
        assert_eq!(
            json(Signal::Logs)["partialSuccess"]["rejectedLogRecords"],
            "3"
        );
        assert_eq!(json(Signal::Logs)["partialSuccess"]["errorMessage"], "why");
        let pb = |s: Signal| s.response(Format::Protobuf, &a);
        let t = ExportTraceServiceResponse::decode(&pb(Signal::Traces)[..]).unwrap();
        assert_eq!(t.partial_success.unwrap().rejected_spans, 3);
        let m = ExportMetricsServiceResponse::decode(&pb(Signal::Metrics)[..]).unwrap();
        assert_eq!(m.partial_success.unwrap().rejected_data_points, 3);
        let l = ExportLogsServiceResponse::decode(&pb(Signal::Logs)[..]).unwrap();
        let l = l.partial_success.unwrap();
        assert_eq!(
            (l.rejected_log_records, l.error_message.as_str()),
            (3, "why")
        );
        // Full success: an empty message, `{}` in JSON.
        for s in Signal::ALL {
            assert!(
                s.response(Format::Protobuf, &Accepted::default())
                    .is_empty()
            );
            assert_eq!(s.response(Format::Json, &Accepted::default()), b"{}");
        }
    }

    #[test]
    fn grpc_paths_name_their_signal() {
        for s in Signal::ALL {
            assert_eq!(Signal::of_grpc_path(s.grpc_path()), Some(s));
            assert!(
                s.grpc_path()
                    .starts_with(&format!("/{}/", s.grpc_service()))
            );
        }
        assert_eq!(
            Signal::of_grpc_path(
                "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
            ),
            None
        );
    }
}
