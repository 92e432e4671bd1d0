//! The adapter that makes the store the collector's [`SpanSink`] and [`PresenceSink`]
//! ([`StoreSink`]); with `store.discard` (benchmarks) the collector's own
//! [`dyeline_collector::DiscardSink`] takes its place.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use dyeline_collector::{PresenceSink, SinkError, SpanRows, SpanSink, WriteReport};
use dyeline_store::{Store, StoreError};
use futures::future::BoxFuture;

use dyeline_queries::ports::KeptRowsObserver;

/// The store as a span sink; the rows it keeps also feed its observers (the span metrics
/// and the per-minute channel rollups), in turn.
pub struct StoreSink {
    /// The store.
    pub store: Arc<Store>,
    /// Called with the kept rows of each write, in this order.
    pub observers: Arc<[Arc<dyn KeptRowsObserver>]>,
}

fn map(e: StoreError) -> SinkError {
    match e {
        StoreError::Saturated => SinkError::Saturated {
            retry_after: Duration::from_secs(1),
        },
        other => SinkError::Unavailable(other.to_string()),
    }
}

impl SpanSink for StoreSink {
    fn write(&self, rows: SpanRows) -> BoxFuture<'static, Result<WriteReport, SinkError>> {
        let Some(batch) = rows.batch else {
            return Box::pin(async { Ok(WriteReport::default()) });
        };
        let observers = Arc::clone(&self.observers);
        match self.store.try_write(batch, rows.keys) {
            Ok(rx) => Box::pin(async move {
                match rx.await {
                    Ok(Ok(r)) => {
                        if let Some(kept) = &r.kept {
                            for o in observers.iter() {
                                o.observe(kept);
                            }
                        }
                        Ok(WriteReport {
                            stored: r.stored,
                            duplicates: r.duplicates,
                        })
                    }
                    Ok(Err(e)) => Err(map(e)),
                    Err(_) => Err(SinkError::Unavailable("store stopped".into())),
                }
            }),
            Err(e) => Box::pin(async move { Err(map(e)) }),
        }
    }
}

impl PresenceSink for StoreSink {
    fn write_presence(
        &self,
        batch: RecordBatch,
    ) -> BoxFuture<'static, Result<WriteReport, SinkError>> {
        let presence = Arc::clone(self.store.presence());
        Box::pin(async move {
            presence
                .write(batch)
                .await
                .map(|w| WriteReport {
                    stored: w.stored,
                    duplicates: w.duplicates,
                })
                .map_err(map)
        })
    }
}
