//! The transport-independent part of an export: convert, count, write to the sink.
//! Both receivers ([`crate::http`], [`crate::grpc`]) call [`Receiver::export`].

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

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
    options: ConvertOptions,
    metrics: ReceiverMetrics,
    limits: Limits,
}

impl Receiver {
    /// A receiver writing to `sink`.
    pub fn new(
        sink: Arc<dyn SpanSink>,
        options: ConvertOptions,
        metrics: ReceiverMetrics,
        limits: Limits,
    ) -> Self {
        Self {
            sink,
            options,
            metrics,
            limits,
        }
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
    /// rest written to the sink; resolves when they are durable.
    ///
    /// # Errors
    /// [`IngestError::Saturated`] / [`IngestError::Unavailable`] from the sink (nothing of the
    /// request is acknowledged then).
    pub async fn export(
        &self,
        request: ExportTraceServiceRequest,
        transport: &'static str,
    ) -> Result<Accepted, IngestError> {
        let converted = convert_request(&request, &self.options);
        drop(request);
        self.export_rows(converted, transport).await
    }

    /// Converts a protobuf `ExportTraceServiceRequest` body and stores its rows, as
    /// [`Receiver::export`] does. The body is read by the wire reader of [`crate::view`]
    /// (prost decides when the wire reader refuses it).
    ///
    /// # Errors
    /// [`IngestError::BadData`] when the body is not a valid message (not counted here: the
    /// transport counts what it refuses, [`Receiver::refused`]); else as [`Receiver::export`].
    pub async fn export_protobuf(
        &self,
        body: &[u8],
        transport: &'static str,
    ) -> Result<Accepted, IngestError> {
        let converted = match crate::view::decode_request(body) {
            Ok(crate::view::Decoded::View(view)) => convert_view(&view, &self.options),
            Ok(crate::view::Decoded::Prost(request)) => convert_request(&request, &self.options),
            Err(e) => {
                return Err(IngestError::BadData(format!(
                    "invalid protobuf ExportTraceServiceRequest: {e}"
                )));
            }
        };
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
        match self.sink.write(rows).await {
            Ok(report) => {
                self.metrics
                    .spans_accepted
                    .get_or_create(&TransportLabel { transport })
                    .inc_by(report.stored);
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
