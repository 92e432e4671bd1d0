//! The transport-independent part of an export: decode, convert, count, write to a sink.
//! Both receivers ([`crate::http`], [`crate::grpc`]) call [`Receiver::export`] or
//! [`Receiver::export_protobuf`] for spans and [`Receiver::store_presence`] (after
//! [`presence_rows`]) for metrics and logs, which record presence only.
//!
//! Decoding and conversion are CPU-bound and take time in proportion to the request (up to the
//! body limit): they run on tokio's blocking pool ([`Receiver::blocking`]), never on the async
//! workers that answer other requests and `/healthz`, and at most one per core at a time, so a
//! flood of large requests queues for a slot (the bodies waiting are already read and bounded)
//! instead of filling the blocking pool's 512 threads.

use std::sync::Arc;

use bytes::Bytes;
use dyeline_model::PresenceSignal;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use tokio::sync::Semaphore;

use crate::auth::OtlpAuth;
use crate::convert::presence::{PresenceRows, logs_presence, metrics_presence};
use crate::convert::{ConvertOptions, convert_request, convert_view};
use crate::error::IngestError;
use crate::metrics::{
    PRESENCE_INVALID_TIME, ReceiverMetrics, SignalTransportLabel, TransportLabel,
};
use crate::rate_limit::SourceLimiter;
pub use crate::signal::Accepted;
use crate::signal::{Format, Signal};
use crate::sink::{PresenceSink, SpanSink};

/// Limits at the edge.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest accepted request body in bytes, after decompression (default 16 MiB). A gzip body
    /// is inflated only up to this size, so a gzip bomb is cut off early.
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 16 * 1024 * 1024,
        }
    }
}

/// Shared state of both receivers.
pub struct Receiver {
    sink: Arc<dyn SpanSink>,
    presence: Arc<dyn PresenceSink>,
    options: Arc<ConvertOptions>,
    metrics: ReceiverMetrics,
    limits: Limits,
    /// One permit per decode or conversion running on the blocking pool.
    cpu_slots: Arc<Semaphore>,
    /// Who may export.
    auth: OtlpAuth,
    /// How often each source may (`[otlp.rate_limit]`); none: unlimited.
    rate: Option<Arc<SourceLimiter>>,
}

/// Decodes a metrics or logs export body in `format` and converts it to presence rows
/// (CPU-bound: run it on the blocking pool, [`Receiver::blocking`]).
///
/// # Errors
/// [`IngestError::BadData`] when the body is not a valid request, naming the problem;
/// [`IngestError::Unavailable`] for an internal conversion error (a bug).
pub fn presence_rows(
    signal: PresenceSignal,
    format: Format,
    body: &[u8],
    options: &ConvertOptions,
) -> Result<PresenceRows, IngestError> {
    let bad = |e: &dyn std::fmt::Display| {
        let what = match format {
            Format::Protobuf => match signal {
                PresenceSignal::Metrics => "invalid protobuf ExportMetricsServiceRequest",
                PresenceSignal::Logs => "invalid protobuf ExportLogsServiceRequest",
            },
            Format::Json => "invalid OTLP/JSON",
        };
        IngestError::BadData(format!("{what}: {e}"))
    };
    let rows = match (signal, format) {
        (PresenceSignal::Metrics, Format::Protobuf) => {
            let r = ExportMetricsServiceRequest::decode(body).map_err(|e| bad(&e))?;
            metrics_presence(&r, options)
        }
        (PresenceSignal::Metrics, Format::Json) => {
            let r = crate::json::decode_metrics_request(body).map_err(|e| bad(&e))?;
            metrics_presence(&r, options)
        }
        (PresenceSignal::Logs, Format::Protobuf) => {
            let r = ExportLogsServiceRequest::decode(body).map_err(|e| bad(&e))?;
            logs_presence(&r, options)
        }
        (PresenceSignal::Logs, Format::Json) => {
            let r = crate::json::decode_logs_request(body).map_err(|e| bad(&e))?;
            logs_presence(&r, options)
        }
    };
    rows.map_err(|e| IngestError::Unavailable(format!("internal conversion error: {e}")))
}

impl Receiver {
    /// A receiver writing spans to `sink` and presence rows to `presence`, with one
    /// decode/conversion slot per core ([`std::thread::available_parallelism`]).
    pub fn new(
        sink: Arc<dyn SpanSink>,
        presence: Arc<dyn PresenceSink>,
        options: ConvertOptions,
        metrics: ReceiverMetrics,
        limits: Limits,
    ) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            sink,
            presence,
            options: Arc::new(options),
            metrics,
            limits,
            cpu_slots: Arc::new(Semaphore::new(cores)),
            auth: OtlpAuth::default(),
            rate: None,
        }
    }

    /// This receiver, refusing a source's requests past `limiter` (none: no limit).
    #[must_use]
    pub fn with_rate_limit(mut self, limiter: Option<Arc<SourceLimiter>>) -> Self {
        self.rate = limiter;
        self
    }

    /// This receiver, taking exports only with a token of `auth`.
    #[must_use]
    pub fn with_auth(mut self, auth: OtlpAuth) -> Self {
        self.auth = auth;
        self
    }

    /// Whether exports need a token.
    pub fn auth_required(&self) -> bool {
        self.auth.required()
    }

    /// `Ok` when an export of `signal` with the request head `headers` from `source` may go
    /// on: its token, then its source's rate; a refusal is counted. Called before the body is
    /// read.
    ///
    /// # Errors
    /// [`IngestError::Unauthenticated`] ([`OtlpAuth::check`]), [`IngestError::RateLimited`]
    /// ([`SourceLimiter::check`]).
    pub fn admit(
        &self,
        signal: Signal,
        headers: &http::HeaderMap,
        source: Option<std::net::IpAddr>,
    ) -> Result<(), IngestError> {
        self.auth
            .check(headers)
            .and_then(|()| match (&self.rate, source) {
                (Some(rate), Some(ip)) => rate.check(ip),
                _ => Ok(()),
            })
            .inspect_err(|e| self.refused(signal, e))
    }

    /// Runs `f`, CPU-bound work on one request (decompression, decoding, conversion), on
    /// tokio's blocking pool once one of the receiver's slots is free (one per core; waiting
    /// for a slot costs no thread). The slot is held until `f` returns, even when the request
    /// is abandoned meanwhile, so the bound holds for work that cannot be cancelled.
    ///
    /// # Errors
    /// [`IngestError::Unavailable`] when `f` panicked (a bug; the server carries on).
    pub async fn blocking<T, F>(&self, f: F) -> Result<T, IngestError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let slot = Arc::clone(&self.cpu_slots)
            .acquire_owned()
            .await
            .map_err(|_| IngestError::Unavailable("the receiver is shutting down".into()))?;
        tokio::task::spawn_blocking(move || {
            let out = f();
            drop(slot);
            out
        })
        .await
        .map_err(|e| IngestError::Unavailable(format!("internal error converting spans: {e}")))
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The conversion settings (colour rules, decision sources).
    pub fn options(&self) -> Arc<ConvertOptions> {
        Arc::clone(&self.options)
    }

    /// The counters.
    pub fn metrics(&self) -> &ReceiverMetrics {
        &self.metrics
    }

    /// Counts a request of `signal` refused before it reached the sink.
    pub fn refused(&self, signal: Signal, err: &IngestError) {
        self.metrics.refuse(signal, err.reason());
    }

    /// Exports one decoded request: invalid spans are rejected one by one (partial success), the
    /// rest written to the sink; resolves when they are durable. The conversion runs on the
    /// blocking pool ([`Receiver::blocking`]).
    ///
    /// # Errors
    /// [`IngestError::Saturated`] / [`IngestError::Unavailable`] from the sink (nothing of the
    /// request is acknowledged then).
    pub async fn export(
        &self,
        request: ExportTraceServiceRequest,
        transport: &'static str,
    ) -> Result<Accepted, IngestError> {
        let options = Arc::clone(&self.options);
        let converted = self
            .blocking(move || convert_request(&request, &options))
            .await?;
        self.export_rows(converted, transport).await
    }

    /// Converts a protobuf export body of `signal` and stores what it gives, as
    /// [`Receiver::export`] (spans) or [`Receiver::store_presence`] (metrics, logs) do. A trace
    /// body is read by the wire reader of [`crate::wire`] (prost decides when the wire reader
    /// refuses it), borrowing from `body` (no copy); metrics and logs bodies by prost. Either
    /// on the blocking pool.
    ///
    /// # Errors
    /// [`IngestError::BadData`] when the body is not a valid message (not counted here: the
    /// transport counts what it refuses, [`Receiver::refused`]); else as [`Receiver::export`].
    pub async fn export_protobuf(
        &self,
        signal: Signal,
        body: Bytes,
        transport: &'static str,
    ) -> Result<Accepted, IngestError> {
        let options = Arc::clone(&self.options);
        if let Some(p) = signal.presence() {
            let rows = self
                .blocking(move || presence_rows(p, Format::Protobuf, &body, &options))
                .await??;
            return self.store_presence(p, rows, transport).await;
        }
        let converted = self
            .blocking(move || match crate::wire::decode_request(&body) {
                Ok(crate::wire::Decoded::View(view)) => Ok(convert_view(&view, &options)),
                Ok(crate::wire::Decoded::Prost(request)) => Ok(convert_request(&request, &options)),
                Err(e) => Err(IngestError::BadData(format!(
                    "invalid protobuf ExportTraceServiceRequest: {e}"
                ))),
            })
            .await??;
        self.export_rows(converted, transport).await
    }

    /// Stores the presence rows of one metrics or logs export: counts the items rejected for
    /// their time, writes the rows to the presence sink and resolves once they are durable.
    ///
    /// # Errors
    /// [`IngestError::Saturated`] / [`IngestError::Unavailable`] from the sink (nothing of the
    /// request is acknowledged then; counted here).
    pub async fn store_presence(
        &self,
        signal: PresenceSignal,
        rows: PresenceRows,
        transport: &'static str,
    ) -> Result<Accepted, IngestError> {
        let as_signal = match signal {
            PresenceSignal::Metrics => Signal::Metrics,
            PresenceSignal::Logs => Signal::Logs,
        };
        self.metrics
            .discard(as_signal, PRESENCE_INVALID_TIME, rows.rejected);
        let accepted = Accepted {
            rejected: rows.rejected,
            error_message: rows.first_error.unwrap_or_default(),
        };
        let Some(batch) = rows.batch else {
            return Ok(accepted);
        };
        let n = batch.num_rows() as u64;
        match self.presence.write_presence(batch).await {
            Ok(report) => {
                self.metrics
                    .presence_accepted
                    .get_or_create(&SignalTransportLabel {
                        signal: signal.as_str(),
                        transport,
                    })
                    .inc_by(report.stored);
                Ok(accepted)
            }
            Err(e) => {
                let err = IngestError::from(e);
                self.metrics.discard(as_signal, err.reason(), n);
                self.refused(as_signal, &err);
                Err(err)
            }
        }
    }

    /// Stores converted rows: counts the rejected spans, writes the rest to the sink and
    /// resolves once they are durable. A conversion error (a bug) answers unavailable.
    async fn export_rows(
        &self,
        converted: Result<crate::convert::SpanRows, arrow::error::ArrowError>,
        transport: &'static str,
    ) -> Result<Accepted, IngestError> {
        let rows = converted
            .map_err(|e| IngestError::Unavailable(format!("internal conversion error: {e}")))?;
        for (reason, n) in &rows.rejected {
            self.metrics.discard(Signal::Traces, reason.as_str(), *n);
        }
        let accepted = Accepted {
            rejected: rows.rejected_count(),
            error_message: rows.first_error.clone().unwrap_or_default(),
        };
        if rows.batch.is_none() {
            return Ok(accepted);
        }
        let n = rows.keys.len() as u64;
        let truncated = rows.decisions_truncated;
        let malformed_lane_tags = rows.malformed_lane_tags;
        match self.sink.write(rows).await {
            Ok(report) => {
                self.metrics
                    .spans_accepted
                    .get_or_create(&TransportLabel { transport })
                    .inc_by(report.stored);
                if truncated > 0 {
                    self.metrics.decisions_truncated.inc_by(truncated);
                    tracing::debug!(
                        spans = truncated,
                        "decision values past the W3C baggage limits were read up to them"
                    );
                }
                self.metrics.malformed_lane_tags.inc_by(malformed_lane_tags);
                if report.duplicates > 0 {
                    self.metrics
                        .discard(Signal::Traces, "duplicate", report.duplicates);
                }
                Ok(accepted)
            }
            Err(e) => {
                let err = IngestError::from(e);
                self.metrics.discard(Signal::Traces, err.reason(), n);
                self.refused(Signal::Traces, &err);
                Err(err)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message;

    use super::*;
    use crate::sink::{DiscardSink, SinkError, WriteReport};

    /// A presence sink whose write path is full.
    struct Full;

    impl PresenceSink for Full {
        fn write_presence(
            &self,
            _: arrow::array::RecordBatch,
        ) -> futures::future::BoxFuture<'static, Result<WriteReport, SinkError>> {
            Box::pin(async {
                Err(SinkError::Saturated {
                    retry_after: Duration::from_secs(3),
                })
            })
        }
    }

    fn receiver() -> Arc<Receiver> {
        receiver_with(Arc::new(DiscardSink))
    }

    fn receiver_with(presence: Arc<dyn PresenceSink>) -> Arc<Receiver> {
        Arc::new(Receiver::new(
            Arc::new(DiscardSink),
            presence,
            ConvertOptions::default(),
            ReceiverMetrics::default(),
            Limits::default(),
        ))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_work_runs_at_most_one_per_core() {
        let r = receiver();
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..cores * 4)
            .map(|_| {
                let (r, running, most) = (Arc::clone(&r), Arc::clone(&running), Arc::clone(&most));
                tokio::spawn(async move {
                    r.blocking(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(30));
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        // Without the slots all 4 × cores would overlap (each sleeps 30 ms).
        let most = most.load(Ordering::SeqCst);
        assert!(
            (1..=cores).contains(&most),
            "{most} at once on {cores} cores"
        );
        // A panic in the work is an answer, not a lost worker.
        let e = r.blocking(|| panic!("a bug")).await.unwrap_err();
        assert!(matches!(e, IngestError::Unavailable(_)), "{e:?}");
        assert!(
            r.blocking(|| 7).await.is_ok_and(|v| v == 7),
            "the slot was freed"
        );
    }

    #[tokio::test]
    async fn spans_with_truncated_decisions_are_counted_once_stored() {
        let r = receiver();
        let pairs = (0..100_000)
            .map(|i| format!("c{i}=blue"))
            .collect::<Vec<_>>()
            .join("&");
        let span = |id: u8| Span {
            trace_id: vec![1; 16],
            span_id: vec![id; 8],
            start_time_unix_nano: 1_700_000_000_000_000_000,
            attributes: vec![KeyValue {
                key: "baggage.x-deploy-channel-type".into(),
                value: Some(AnyValue {
                    value: Some(Value::StringValue(pairs.clone())),
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let body = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span(1), span(2)],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
        .encode_to_vec();
        let accepted = r
            .export_protobuf(Signal::Traces, Bytes::from(body), "http_protobuf")
            .await
            .unwrap();
        assert_eq!(accepted, Accepted::default());
        assert_eq!(r.metrics().decisions_truncated.get(), 2);
        let e = r
            .export_protobuf(Signal::Traces, Bytes::from_static(&[0x0a, 0x05]), "grpc")
            .await
            .unwrap_err();
        assert!(matches!(e, IngestError::BadData(_)), "{e:?}");
    }

    fn metrics_body(times: &[u64]) -> Bytes {
        use opentelemetry_proto::tonic::metrics::v1::{
            Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, metric::Data,
        };
        use opentelemetry_proto::tonic::resource::v1::Resource;
        let points = times
            .iter()
            .map(|&t| NumberDataPoint {
                time_unix_nano: t,
                ..Default::default()
            })
            .collect();
        Bytes::from(
            ExportMetricsServiceRequest {
                resource_metrics: vec![ResourceMetrics {
                    resource: Some(Resource {
                        attributes: vec![KeyValue {
                            key: "host.name".into(),
                            value: Some(AnyValue {
                                value: Some(Value::StringValue("pay-gray-1".into())),
                            }),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    scope_metrics: vec![ScopeMetrics {
                        metrics: vec![Metric {
                            name: "up".into(),
                            data: Some(Data::Gauge(Gauge {
                                data_points: points,
                            })),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
            }
            .encode_to_vec(),
        )
    }

    fn discarded(r: &Receiver, signal: &'static str, reason: &'static str) -> u64 {
        r.metrics()
            .presence_discarded
            .get_or_create(&crate::metrics::SignalReasonLabel { signal, reason })
            .get()
    }

    #[tokio::test]
    async fn metrics_exports_store_presence_with_exact_partial_success() {
        let r = receiver();
        let accepted = r
            .export_protobuf(Signal::Metrics, metrics_body(&[10, 0, 10, 20, 0]), "grpc")
            .await
            .unwrap();
        assert_eq!(accepted.rejected, 2);
        assert!(
            accepted.error_message.contains("data_points[1]"),
            "{}",
            accepted.error_message
        );
        let stored = r
            .metrics()
            .presence_accepted
            .get_or_create(&SignalTransportLabel {
                signal: "metrics",
                transport: "grpc",
            })
            .get();
        assert_eq!(stored, 2, "10 and 20, the repeated 10 once");
        assert_eq!(discarded(&r, "metrics", PRESENCE_INVALID_TIME), 2);
        // Spans are not touched by a metrics export.
        let spans = r
            .metrics()
            .spans_accepted
            .get_or_create(&TransportLabel { transport: "grpc" })
            .get();
        assert_eq!(spans, 0);
        // A body that is not a metrics request is bad data naming the message.
        let e = r
            .export_protobuf(Signal::Logs, Bytes::from_static(&[0x0a, 0x05]), "grpc")
            .await
            .unwrap_err();
        assert!(
            matches!(&e, IngestError::BadData(m) if m.contains("ExportLogsServiceRequest")),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn a_full_presence_store_refuses_the_export_as_retryable_and_counts_it() {
        let r = receiver_with(Arc::new(Full));
        let e = r
            .export_protobuf(Signal::Metrics, metrics_body(&[5, 6, 7]), "http_protobuf")
            .await
            .unwrap_err();
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(discarded(&r, "metrics", "saturated"), 3);
        let refused = r
            .metrics()
            .presence_refused
            .get_or_create(&crate::metrics::SignalReasonLabel {
                signal: "metrics",
                reason: "saturated",
            })
            .get();
        assert_eq!(refused, 1);
        assert_eq!(
            r.metrics()
                .requests_refused
                .get_or_create(&crate::metrics::ReasonLabel {
                    reason: "saturated"
                })
                .get(),
            0,
            "not a trace refusal"
        );
    }
}
