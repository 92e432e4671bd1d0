//! The ports the receivers write to: [`SpanSink`] for spans, [`PresenceSink`] for the presence
//! rows of metrics and logs exports. The store implements both (wired in `server`).
//!
//! A write resolves only when the rows are durable by the sink's policy (for the store: in its
//! write-ahead log), so a receiver acknowledges a request only after that.

use std::time::Duration;

use arrow::array::RecordBatch;
use futures::future::BoxFuture;

use crate::convert::SpanRows;

/// What a sink did with one write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Rows stored.
    pub stored: u64,
    /// Rows dropped as already stored: a span with the same (trace_id, span_id), a presence
    /// row with the same (instance, signal, time).
    pub duplicates: u64,
}

/// Why a sink could not take a write. Both are retryable by the client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SinkError {
    /// The write path is full; retry after the given delay (HTTP 429, gRPC UNAVAILABLE).
    #[error("write path saturated, retry after {}s", retry_after.as_secs().max(1))]
    Saturated {
        /// Suggested delay before retrying.
        retry_after: Duration,
    },
    /// The sink cannot write now (shutting down, disk failure) (HTTP 503, gRPC UNAVAILABLE).
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// Destination of converted spans.
pub trait SpanSink: Send + Sync + 'static {
    /// Writes `rows` (whose `batch` is `Some`); resolves once they are durable.
    ///
    /// # Errors
    /// [`SinkError::Saturated`] at once when the write queue is full (never waits unboundedly);
    /// [`SinkError::Unavailable`] when the write failed or the sink is closing.
    fn write(&self, rows: SpanRows) -> BoxFuture<'static, Result<WriteReport, SinkError>>;
}

/// Destination of presence rows (the `presence` schema, [`dyeline_model::presence`]).
pub trait PresenceSink: Send + Sync + 'static {
    /// Writes `batch`; resolves once its rows are durable.
    ///
    /// # Errors
    /// As [`SpanSink::write`].
    fn write_presence(
        &self,
        batch: RecordBatch,
    ) -> BoxFuture<'static, Result<WriteReport, SinkError>>;
}

/// A sink that keeps nothing: every write is acknowledged at once as stored, its rows dropped.
/// For measuring the receivers alone (`store.discard`, as a collector exporting to a blackhole
/// does), and for tests of the receive path.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiscardSink;

impl DiscardSink {
    fn stored(n: u64) -> BoxFuture<'static, Result<WriteReport, SinkError>> {
        Box::pin(async move {
            Ok(WriteReport {
                stored: n,
                duplicates: 0,
            })
        })
    }
}

impl SpanSink for DiscardSink {
    fn write(&self, rows: SpanRows) -> BoxFuture<'static, Result<WriteReport, SinkError>> {
        Self::stored(rows.keys.len() as u64)
    }
}

impl PresenceSink for DiscardSink {
    fn write_presence(
        &self,
        batch: RecordBatch,
    ) -> BoxFuture<'static, Result<WriteReport, SinkError>> {
        Self::stored(batch.num_rows() as u64)
    }
}
