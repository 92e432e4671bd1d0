//! The transport-independent part of an export: convert, count, write to the sink.
//! Both receivers ([`crate::http`], [`crate::grpc`]) call [`Receiver::export`] or
//! [`Receiver::export_protobuf`].
//!
//! Decoding and conversion are CPU-bound and take time in proportion to the request (up to the
//! body limit): they run on tokio's blocking pool ([`Receiver::blocking`]), never on the async
//! workers that answer other requests and `/healthz`, and at most one per core at a time, so a
//! flood of large requests queues for a slot (the bodies waiting are already read and bounded)
//! instead of filling the blocking pool's 512 threads.

use std::sync::Arc;

use bytes::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::sync::Semaphore;

use crate::convert::{ConvertOptions, convert_request, convert_view};
use crate::error::IngestError;
use crate::metrics::{ReceiverMetrics, TransportLabel};
use crate::sink::SpanSink;

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

/// The outcome of an accepted export (OTLP `ExportTracePartialSuccess`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    /// Spans rejected as invalid; 0 for full success.
    pub rejected_spans: u64,
    /// Why (the first rejected span), empty when none.
    pub error_message: String,
}

/// Shared state of both receivers.
pub struct Receiver {
    sink: Arc<dyn SpanSink>,
    options: Arc<ConvertOptions>,
    metrics: ReceiverMetrics,
    limits: Limits,
    /// One permit per decode or conversion running on the blocking pool.
    cpu_slots: Arc<Semaphore>,
}

impl Receiver {
    /// A receiver writing to `sink`, with one decode/conversion slot per core
    /// ([`std::thread::available_parallelism`]).
    pub fn new(
        sink: Arc<dyn SpanSink>,
        options: ConvertOptions,
        metrics: ReceiverMetrics,
        limits: Limits,
    ) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            sink,
            options: Arc::new(options),
            metrics,
            limits,
            cpu_slots: Arc::new(Semaphore::new(cores)),
        }
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

    /// The counters.
    pub fn metrics(&self) -> &ReceiverMetrics {
        &self.metrics
    }

    /// Counts a request refused before it reached [`Receiver::export`].
    pub fn refused(&self, err: &IngestError) {
        self.metrics
            .requests_refused
            .get_or_create(&crate::metrics::ReasonLabel {
                reason: err.reason(),
            })
            .inc();
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

    /// Converts a protobuf `ExportTraceServiceRequest` body and stores its rows, as
    /// [`Receiver::export`] does. The body is read by the wire reader of [`crate::wire`]
    /// (prost decides when the wire reader refuses it), on the blocking pool, borrowing from
    /// `body` (no copy).
    ///
    /// # Errors
    /// [`IngestError::BadData`] when the body is not a valid message (not counted here: the
    /// transport counts what it refuses, [`Receiver::refused`]); else as [`Receiver::export`].
    pub async fn export_protobuf(
        &self,
        body: Bytes,
        transport: &'static str,
    ) -> Result<Accepted, IngestError> {
        let options = Arc::clone(&self.options);
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
            self.metrics.discard(reason.as_str(), *n);
        }
        let accepted = Accepted {
            rejected_spans: rows.rejected_count(),
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
                    self.metrics.discard("duplicate", report.duplicates);
                }
                Ok(accepted)
            }
            Err(e) => {
                let err = IngestError::from(e);
                self.metrics.discard(err.reason(), n);
                self.refused(&err);
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
    use crate::sink::{SinkError, WriteReport};

    struct Stored;

    impl SpanSink for Stored {
        fn write(
            &self,
            rows: crate::SpanRows,
        ) -> futures::future::BoxFuture<'static, Result<WriteReport, SinkError>> {
            let stored = rows.keys.len() as u64;
            Box::pin(async move {
                Ok(WriteReport {
                    stored,
                    duplicates: 0,
                })
            })
        }
    }

    fn receiver() -> Arc<Receiver> {
        Arc::new(Receiver::new(
            Arc::new(Stored),
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
            .export_protobuf(Bytes::from(body), "http_protobuf")
            .await
            .unwrap();
        assert_eq!(accepted, Accepted::default());
        assert_eq!(r.metrics().decisions_truncated.get(), 2);
        let e = r
            .export_protobuf(Bytes::from_static(&[0x0a, 0x05]), "grpc")
            .await
            .unwrap_err();
        assert!(matches!(e, IngestError::BadData(_)), "{e:?}");
    }
}
