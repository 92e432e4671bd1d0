//! Helpers of the store's tests: rows with known keys, a store that does not fsync, a write
//! waited for, a close off the async thread, and what memory holds.

use std::path::Path;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, RecordBatch};
use dyeline_model::{SpanId, SpanKey, TraceId};

use crate::file_read;
use crate::segment::Segment;
use crate::{FsyncPolicy, Store, StoreConfig, WriteReport};

/// `n` rows from row `first` on: trace i / 5, span i, start time i (ns after an hour).
pub(crate) fn rows(first: u64, n: u64) -> (RecordBatch, Vec<SpanKey>) {
    let ids: Vec<u64> = (first..first + n).collect();
    let keys: Vec<SpanKey> = ids
        .iter()
        .map(|&i| SpanKey {
            trace_id: TraceId::from_bytes(&u128::from(i / 5 + 1).to_be_bytes()).unwrap(),
            span_id: SpanId::from_bytes(&(i + 1).to_be_bytes()).unwrap(),
            server: false,
        })
        .collect();
    let batch = file_read::key_batch(
        keys.iter().map(|k| k.trace_id.to_string()),
        keys.iter().map(|k| k.span_id.to_string()),
        ids.iter().map(|&i| 3_600_000_000_000 + i as i64),
    )
    .unwrap();
    (batch, keys)
}

/// Writes `rows(first, n)` and waits for its report.
pub(crate) async fn write(store: &Store, first: u64, n: u64) -> WriteReport {
    let (batch, keys) = rows(first, n);
    store
        .try_write(batch, keys)
        .unwrap()
        .await
        .unwrap()
        .unwrap()
}

pub(crate) fn span_ids(segments: &[Segment]) -> Vec<String> {
    let mut ids: Vec<String> = segments
        .iter()
        .flat_map(|s| {
            let b = s.decode().unwrap();
            let ids = b.column(1).as_string::<i32>().clone();
            (0..ids.len()).map(move |i| ids.value(i).to_owned())
        })
        .collect();
    ids.sort();
    ids
}

/// Closes `store` (flush, join its threads, release its lock) off the async thread.
pub(crate) async fn close(store: Store) {
    tokio::task::spawn_blocking(move || store.close())
        .await
        .unwrap();
}

/// A store in `dir` that does not fsync (the seal tests write tens of thousands of rows).
pub(crate) fn open_unsynced(dir: &Path) -> Store {
    let mut config = StoreConfig::new(dir);
    config.fsync = FsyncPolicy::Never;
    Store::open(config).unwrap()
}

/// Waits (up to 20 s) until the flusher thread has sealed some rows.
pub(crate) async fn wait_for_a_seal(store: &Store) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.snapshot().segments.iter().all(Segment::is_plain) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Rows held in `segments`, sealed or plain.
pub(crate) fn rows_held(segments: &[Segment], sealed: bool) -> usize {
    segments
        .iter()
        .filter(|s| s.is_plain() != sealed)
        .map(Segment::rows)
        .sum()
}

/// The span ids of `rows(0, n)`, sorted.
pub(crate) fn expected_span_ids(n: u64) -> Vec<String> {
    let mut v: Vec<String> = rows(0, n).1.iter().map(|k| k.span_id.to_string()).collect();
    v.sort();
    v
}
