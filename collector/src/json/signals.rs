//! OTLP/JSON decoding of metrics and logs export requests (`/v1/metrics`, `/v1/logs`), and of
//! a request of any signal told apart by its top-level key ([`decode_any_export`], for
//! `dyeline import`'s lines), with the tolerances of the parent module.
//!
//! Metrics and logs only record presence ([`crate::presence`]), so only the fields presence
//! reads are decoded into the prost messages: the resource (its attributes), each metric's
//! name and kind, each data point's `timeUnixNano`, and each log record's `timeUnixNano` and
//! `observedTimeUnixNano`. Every other field is checked as JSON and skipped, its value
//! never read: a data point with a value of the wrong type is not refused for it, as the value
//! is not kept.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::{
    ExponentialHistogram, ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint,
    Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint,
};
use serde::de::{IgnoredAny, MapAccess};

use super::{JsonDecodeError, Message, StrV, decode, int, list, msg, one_of, val};

/// Decodes an OTLP/JSON `ExportMetricsServiceRequest` body (the fields presence reads).
///
/// # Errors
/// As [`super::decode_export_request`]: empty body, invalid UTF-8, a syntax error, or a field
/// presence reads of the wrong form (a time that is not an exact unsigned integer, a list that
/// is not an array), with its JSON path.
pub fn decode_metrics_request(body: &[u8]) -> Result<ExportMetricsServiceRequest, JsonDecodeError> {
    decode::<MetricsRequest>(body).map(|r| r.0)
}

/// Decodes an OTLP/JSON `ExportLogsServiceRequest` body (the fields presence reads).
///
/// # Errors
/// As [`decode_metrics_request`].
pub fn decode_logs_request(body: &[u8]) -> Result<ExportLogsServiceRequest, JsonDecodeError> {
    decode::<LogsRequest>(body).map(|r| r.0)
}

/// An export request of any signal, told apart by its top-level key: `resourceSpans`,
/// `resourceMetrics` or `resourceLogs` (a body holding several keys fills each; none gives an
/// empty request).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct AnyExport {
    /// `resourceSpans`, decoded whole.
    pub traces: ExportTraceServiceRequest,
    /// `resourceMetrics`, the fields presence reads.
    pub metrics: ExportMetricsServiceRequest,
    /// `resourceLogs`, the fields presence reads.
    pub logs: ExportLogsServiceRequest,
}

/// Decodes one OTLP/JSON export request of any signal in one pass ([`AnyExport`]).
///
/// # Errors
/// As [`super::decode_export_request`] for its spans and [`decode_metrics_request`] for the
/// rest.
pub fn decode_any_export(body: &[u8]) -> Result<AnyExport, JsonDecodeError> {
    decode::<AnyExport>(body)
}

#[derive(Default)]
struct MetricsRequest(ExportMetricsServiceRequest);

#[derive(Default)]
struct LogsRequest(ExportLogsServiceRequest);

message!(AnyExport, "an OTLP export request JSON object", |m, map| {
    "resourceSpans" | "resource_spans" => m.traces.resource_spans = list(map)?,
    "resourceMetrics" | "resource_metrics" => m.metrics.resource_metrics = list(map)?,
    "resourceLogs" | "resource_logs" => m.logs.resource_logs = list(map)?,
});

message!(MetricsRequest, "an ExportMetricsServiceRequest JSON object", |m, map| {
    "resourceMetrics" | "resource_metrics" => m.0.resource_metrics = list(map)?,
});

message!(LogsRequest, "an ExportLogsServiceRequest JSON object", |m, map| {
    "resourceLogs" | "resource_logs" => m.0.resource_logs = list(map)?,
});

message!(ResourceMetrics, "a ResourceMetrics object", |m, map| {
    "resource" => m.resource = msg(map)?,
    "scopeMetrics" | "scope_metrics" => m.scope_metrics = list(map)?,
    "schemaUrl" | "schema_url" => m.schema_url = val(map, StrV)?,
});

message!(ScopeMetrics, "a ScopeMetrics object", |m, map| {
    "scope" => m.scope = msg(map)?,
    "metrics" => m.metrics = list(map)?,
    "schemaUrl" | "schema_url" => m.schema_url = val(map, StrV)?,
});

message!(Metric, "a Metric object", |m, map| {
    "name" => m.name = val(map, StrV)?,
    "gauge" => one_of(&mut m.data, msg(map)?, Data::Gauge),
    "sum" => one_of(&mut m.data, msg(map)?, Data::Sum),
    "histogram" => one_of(&mut m.data, msg(map)?, Data::Histogram),
    "exponentialHistogram" | "exponential_histogram" => one_of(&mut m.data, msg(map)?, Data::ExponentialHistogram),
    "summary" => one_of(&mut m.data, msg(map)?, Data::Summary),
});

message!(Gauge, "a Gauge object", |m, map| {
    "dataPoints" | "data_points" => m.data_points = list(map)?,
});

message!(Sum, "a Sum object", |m, map| {
    "dataPoints" | "data_points" => m.data_points = list(map)?,
});

message!(Histogram, "a Histogram object", |m, map| {
    "dataPoints" | "data_points" => m.data_points = list(map)?,
});

message!(ExponentialHistogram, "an ExponentialHistogram object", |m, map| {
    "dataPoints" | "data_points" => m.data_points = list(map)?,
});

message!(Summary, "a Summary object", |m, map| {
    "dataPoints" | "data_points" => m.data_points = list(map)?,
});

message!(NumberDataPoint, "a NumberDataPoint object", |m, map| {
    "timeUnixNano" | "time_unix_nano" => m.time_unix_nano = int(map)?,
});

message!(HistogramDataPoint, "a HistogramDataPoint object", |m, map| {
    "timeUnixNano" | "time_unix_nano" => m.time_unix_nano = int(map)?,
});

message!(ExponentialHistogramDataPoint, "an ExponentialHistogramDataPoint object", |m, map| {
    "timeUnixNano" | "time_unix_nano" => m.time_unix_nano = int(map)?,
});

message!(SummaryDataPoint, "a SummaryDataPoint object", |m, map| {
    "timeUnixNano" | "time_unix_nano" => m.time_unix_nano = int(map)?,
});

message!(ResourceLogs, "a ResourceLogs object", |m, map| {
    "resource" => m.resource = msg(map)?,
    "scopeLogs" | "scope_logs" => m.scope_logs = list(map)?,
    "schemaUrl" | "schema_url" => m.schema_url = val(map, StrV)?,
});

message!(ScopeLogs, "a ScopeLogs object", |m, map| {
    "scope" => m.scope = msg(map)?,
    "logRecords" | "log_records" => m.log_records = list(map)?,
    "schemaUrl" | "schema_url" => m.schema_url = val(map, StrV)?,
});

message!(LogRecord, "a LogRecord object", |m, map| {
    "timeUnixNano" | "time_unix_nano" => m.time_unix_nano = int(map)?,
    "observedTimeUnixNano" | "observed_time_unix_nano" => m.observed_time_unix_nano = int(map)?,
});

#[cfg(test)]
mod tests {
    use super::*;

    fn times(r: &ExportMetricsServiceRequest) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for rm in &r.resource_metrics {
            for sm in &rm.scope_metrics {
                for m in &sm.metrics {
                    let points: Vec<u64> = match &m.data {
                        Some(Data::Gauge(g)) => {
                            g.data_points.iter().map(|p| p.time_unix_nano).collect()
                        }
                        Some(Data::Sum(g)) => {
                            g.data_points.iter().map(|p| p.time_unix_nano).collect()
                        }
                        Some(Data::Histogram(g)) => {
                            g.data_points.iter().map(|p| p.time_unix_nano).collect()
                        }
                        Some(Data::ExponentialHistogram(g)) => {
                            g.data_points.iter().map(|p| p.time_unix_nano).collect()
                        }
                        Some(Data::Summary(g)) => {
                            g.data_points.iter().map(|p| p.time_unix_nano).collect()
                        }
                        None => Vec::new(),
                    };
                    out.extend(points.into_iter().map(|t| (m.name.clone(), t)));
                }
            }
        }
        out
    }

    #[test]
    fn every_metric_kind_gives_its_data_point_times_in_either_spelling() {
        let body = br#"{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"order"}}]},
          "scopeMetrics":[{"scope":{"name":"s"},"metrics":[
            {"name":"g","gauge":{"dataPoints":[{"timeUnixNano":"10","asDouble":"NaN"},{"time_unix_nano":11}]}},
            {"name":"s","sum":{"dataPoints":[{"startTimeUnixNano":"1","timeUnixNano":"20","asInt":"5"}],"aggregationTemporality":2,"isMonotonic":true}},
            {"name":"h","histogram":{"data_points":[{"timeUnixNano":"30","bucketCounts":["1","2"],"explicitBounds":[1.5]}]}},
            {"name":"e","exponential_histogram":{"dataPoints":[{"timeUnixNano":"40","positive":{"offset":1,"bucketCounts":["3"]}}]}},
            {"name":"q","summary":{"dataPoints":[{"timeUnixNano":"50","quantileValues":[{"quantile":0.5,"value":1}]}]}},
            {"name":"none","unit":"1"}
          ]}]}]}"#;
        let r = decode_metrics_request(body).unwrap();
        let attrs = &r.resource_metrics[0].resource.as_ref().unwrap().attributes;
        assert_eq!(attrs[0].key, "service.name");
        assert_eq!(
            times(&r),
            [
                ("g", 10),
                ("g", 11),
                ("s", 20),
                ("h", 30),
                ("e", 40),
                ("q", 50)
            ]
            .map(|(n, t)| (n.to_owned(), t))
        );
        // Data presence does not read is not refused for its form.
        assert!(decode_metrics_request(br#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asInt":"x"}]}}]}]}]}"#).is_ok());
    }

    #[test]
    fn a_bad_time_is_refused_with_its_path() {
        let e = decode_metrics_request(
            br#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"sum":{"dataPoints":[{"timeUnixNano":"2024-06-10T06:13:20Z"}]}}]}]}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(
                "resourceMetrics[0].scopeMetrics[0].metrics[0].sum.dataPoints[0].timeUnixNano: "
            ),
            "{e}"
        );
        assert!(e.contains("not RFC 3339"), "{e}");
        let e = decode_logs_request(br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":{}}]}]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("resourceLogs[0].scopeLogs[0].logRecords: "),
            "{e}"
        );
        assert_eq!(
            decode_logs_request(b"").unwrap_err(),
            JsonDecodeError::EmptyBody
        );
        assert!(decode_metrics_request(b"{\"resourceMetrics\": [").is_err());
    }

    #[test]
    fn log_records_keep_both_times() {
        let r = decode_logs_request(
            br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[
              {"timeUnixNano":"7","observedTimeUnixNano":"8","body":{"stringValue":"hi"},"severityNumber":9},
              {"observed_time_unix_nano":"9"}]}]}]}"#,
        )
        .unwrap();
        let records = &r.resource_logs[0].scope_logs[0].log_records;
        let got: Vec<(u64, u64)> = records
            .iter()
            .map(|l| (l.time_unix_nano, l.observed_time_unix_nano))
            .collect();
        assert_eq!(got, [(7, 8), (0, 9)]);
    }

    #[test]
    fn any_export_is_told_apart_by_its_top_level_key() {
        let spans = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"x"}]}]}]}"#;
        let a = decode_any_export(spans).unwrap();
        assert_eq!(a.traces.resource_spans.len(), 1);
        assert!(a.metrics.resource_metrics.is_empty() && a.logs.resource_logs.is_empty());
        let a = decode_any_export(br#"{"resourceMetrics":[{}]}"#).unwrap();
        assert_eq!(a.metrics.resource_metrics.len(), 1);
        assert!(a.traces.resource_spans.is_empty());
        let a = decode_any_export(br#"{"resource_logs":[{},{}]}"#).unwrap();
        assert_eq!(a.logs.resource_logs.len(), 2);
        assert_eq!(decode_any_export(b"{}").unwrap(), AnyExport::default());
        // Spans are decoded whole: a bad id is refused as on /v1/traces.
        let e = decode_any_export(
            br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"abc"}]}]}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("traceId"), "{e}");
    }
}
