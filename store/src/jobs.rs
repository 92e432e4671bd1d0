//! What passes between the store's threads: a write or flush asked of the writer
//! ([`WriteJob`]), a seal or flush asked of the flusher ([`FlushJob`]), their acknowledgements
//! ([`Ack`], [`PendingAck`]), and what a write did ([`WriteReport`]).

use arrow::array::RecordBatch;
use dyeline_model::SpanKey;
use tokio::sync::oneshot;

use crate::dedupe;
use crate::error::StoreError;
use crate::segment::Segment;

/// What a write did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteReport {
    /// Rows stored.
    pub stored: u64,
    /// Rows dropped as already stored.
    pub duplicates: u64,
    /// The rows stored (duplicates removed), for metrics derived from spans; `None` when
    /// none was.
    pub kept: Option<RecordBatch>,
}

pub(crate) type Ack<T> = oneshot::Sender<Result<T, StoreError>>;

/// A write waiting for its group's commit: its ack, its report, the keys it inserted.
pub(crate) type PendingAck = (
    Ack<WriteReport>,
    WriteReport,
    Vec<(i64, dedupe::Fingerprint)>,
);

pub(crate) enum WriteJob {
    Write {
        batch: RecordBatch,
        /// The WAL record ([`segment::encode_record`]); `None` when there is no WAL.
        record: Option<Vec<u8>>,
        /// The rows as memory will hold them (their trace index and time range computed on
        /// the caller's thread).
        segment: Box<Segment>,
        keys: Vec<SpanKey>,
        ack: Ack<WriteReport>,
    },
    Flush {
        ack: Ack<()>,
    },
}

pub(crate) enum FlushJob {
    /// Seal the plain rows ([`SEAL_ROWS`]).
    Seal,
    /// Write the frozen memory to files, then ack.
    Flush { acks: Vec<Ack<()>> },
}
