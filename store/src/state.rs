//! What the store's threads and queries share: the rows in memory (plain, sealed, frozen for a
//! flush) and the files, behind one lock ([`State`] in [`Shared`]); the consistent view a query
//! takes ([`Snapshot`]); the trace-index budget ([`trim_trace_indexes`]); when plain rows are
//! due to be sealed; the names the flusher may give files ([`WriteNames`]); and the memory and
//! file gauges.

use std::path::PathBuf;

use parking_lot::RwLock;

use crate::config::{SEAL_BYTES, SEAL_ROWS};
use crate::file_read::FileSource;
use crate::layout::FileMeta;
use crate::metrics::StoreMetrics;
use crate::segment::Segment;

/// Memory frozen for a flush, with the last WAL segment holding its rows.
#[derive(Clone)]
pub(crate) struct Frozen {
    pub(crate) wal_segment: u64,
    pub(crate) segments: Vec<Segment>,
}

/// True when the plain rows `plain` are due to be sealed ([`SEAL_ROWS`] or [`SEAL_BYTES`]);
/// the writer and WAL replay seal by the same rule.
pub(crate) fn seal_due(plain: &[Segment]) -> bool {
    plain.iter().map(Segment::rows).sum::<usize>() >= SEAL_ROWS
        || plain.iter().map(Segment::memory_bytes).sum::<usize>() >= SEAL_BYTES
}

/// What queries see; one lock so a flush swaps memory for files atomically.
#[derive(Default)]
pub(crate) struct State {
    /// Sealed rows not yet frozen for a flush.
    pub(crate) active: Vec<Segment>,
    /// Writes held plain, oldest first, until [`SEAL_ROWS`] of them (or [`SEAL_BYTES`]) are
    /// sealed into `active`.
    pub(crate) plain: Vec<Segment>,
    /// Bumped each time the writer freezes `plain` for a flush, so a seal that read `plain`
    /// before knows its rows went elsewhere.
    pub(crate) plain_generation: u64,
    /// A seal job is queued or running.
    pub(crate) seal_pending: bool,
    /// Rows of `active` and `plain`.
    pub(crate) active_rows: usize,
    pub(crate) frozen: Vec<Frozen>,
    pub(crate) files: Vec<FileMeta>,
    /// Bytes of the trace indexes `files` hold (set by [`Shared::files_changed`], grown by
    /// the background indexer), so the indexer checks the budget without a pass over the files.
    pub(crate) trace_index_bytes: usize,
}

/// A consistent view for one query.
pub struct Snapshot {
    /// In-memory segments.
    pub segments: Vec<Segment>,
    /// Parquet files.
    pub files: Vec<FileMeta>,
}

impl Snapshot {
    /// The files that may hold span starts in `lo..=hi` (Unix ns, inclusive): those whose
    /// hour partition overlaps it, in the snapshot's order, to be read one by one
    /// ([`FileSource::open`]). With [`Snapshot::segments_in`] of the same snapshot, every
    /// stored span of the range once: a flush between two snapshots moves rows from memory
    /// to a file.
    pub fn files_in(&self, lo: i64, hi: i64) -> Vec<FileSource> {
        self.files
            .iter()
            .filter(|f| f.overlaps(lo, hi))
            .cloned()
            .map(FileSource::new)
            .collect()
    }

    /// The memory segments holding span starts in `lo..=hi` (Unix ns, inclusive), in the
    /// snapshot's order (a clone shares the rows).
    pub fn segments_in(&self, lo: i64, hi: i64) -> Vec<Segment> {
        self.segments
            .iter()
            .filter(|s| s.start_range().is_some_and(|(a, b)| a <= hi && b >= lo))
            .cloned()
            .collect()
    }
}

pub(crate) struct Shared {
    pub(crate) state: RwLock<State>,
    pub(crate) metrics: StoreMetrics,
    pub(crate) spans_dir: PathBuf,
    pub(crate) wal_dir: PathBuf,
    /// [`StoreConfig::trace_index_max_bytes`].
    ///
    /// [`StoreConfig::trace_index_max_bytes`]: crate::StoreConfig::trace_index_max_bytes
    pub(crate) trace_index_max_bytes: usize,
    /// The compactions whose replaced files wait for their grace; held by a compaction pass.
    pub(crate) compaction: parking_lot::Mutex<crate::compact::Compactor>,
    /// Bytes of the local files in `state.files` (set by [`Shared::files_changed`]), for the
    /// staging bound ([`StoreConfig::staging_max_bytes`]).
    ///
    /// [`StoreConfig::staging_max_bytes`]: crate::StoreConfig::staging_max_bytes
    pub(crate) local_file_bytes: std::sync::atomic::AtomicU64,
    /// How the flusher names files, for safe upload cuts ([`crate::remote`]).
    pub(crate) names: parking_lot::Mutex<WriteNames>,
}

/// Keeps the trace indexes of the newest files within `budget` bytes
/// ([`StoreConfig::trace_index_max_bytes`]): files ordered by hour, then write time, then
/// place in `files` (later is newer), newest first, keep theirs while the running total fits;
/// from the first that does not fit on, every older file's index is dropped (a strict prefix,
/// so the indexes held are always those of the most recent data). Files without an index are
/// passed over. Returns the bytes kept.
///
/// [`StoreConfig::trace_index_max_bytes`]: crate::StoreConfig::trace_index_max_bytes
pub fn trim_trace_indexes(files: &mut [FileMeta], budget: usize) -> usize {
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| {
        std::cmp::Reverse((files[i].hour_start_unix_nano, files[i].written_unix_ms, i))
    });
    let mut kept = 0usize;
    let mut full = false;
    for i in order {
        let Some(bytes) = files[i].traces.as_ref().map(|t| t.bytes()) else {
            continue;
        };
        if !full && kept + bytes <= budget {
            kept += bytes;
        } else {
            full = true;
            files[i].traces = None;
        }
    }
    kept
}

pub(crate) fn set_file_gauges(
    metrics: &StoreMetrics,
    files: &[FileMeta],
    trace_index_bytes: usize,
) {
    metrics.parquet_files.set(files.len() as i64);
    metrics
        .parquet_bytes
        .set(files.iter().map(|f| f.size as i64).sum());
    metrics.trace_index_bytes.set(trace_index_bytes as i64);
}

impl Shared {
    /// True while the rows in memory take `limit` bytes or more (the `memory_bytes` gauge,
    /// which the writer and flusher set under the state lock; read without it).
    pub(crate) fn memory_full(&self, limit: usize) -> bool {
        usize::try_from(self.metrics.memory_bytes.get()).unwrap_or(0) >= limit
    }

    /// Applies the trace-index budget to the files of `state` and sets the file gauges (files,
    /// bytes, trace-index bytes); called with the write lock after every change of the files.
    pub(crate) fn files_changed(&self, state: &mut State) {
        state.trace_index_bytes = trim_trace_indexes(&mut state.files, self.trace_index_max_bytes);
        let local: u64 = state
            .files
            .iter()
            .filter(|f| f.is_local())
            .map(|f| f.size)
            .sum();
        self.local_file_bytes
            .store(local, std::sync::atomic::Ordering::Relaxed);
        set_file_gauges(&self.metrics, &state.files, state.trace_index_bytes);
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let s = self.state.read();
        let mut segments = s.active.clone();
        segments.extend(s.plain.iter().cloned());
        for f in &s.frozen {
            segments.extend(f.segments.iter().cloned());
        }
        Snapshot {
            segments,
            files: s.files.clone(),
        }
    }
}

/// The local files of an hour, for the duplicate filter (which reads keys from them) and WAL
/// replay. Objects of shared storage are left out: a key is looked up in what this node still
/// stages, and shared compaction drops a span key stored twice.
pub(crate) fn files_of_hour(shared: &Shared) -> impl Fn(i64) -> Vec<FileMeta> + '_ {
    move |hour| {
        shared
            .state
            .read()
            .files
            .iter()
            .filter(|f| f.hour_start_unix_nano == hour && f.is_local())
            .cloned()
            .collect()
    }
}

/// Sets `dyeline_store_memory_rows` and `dyeline_store_memory_bytes` from `s`.
pub(crate) fn set_memory_gauges(metrics: &StoreMetrics, s: &State) {
    let segments = || {
        s.active
            .iter()
            .chain(&s.plain)
            .chain(s.frozen.iter().flat_map(|f| &f.segments))
    };
    metrics
        .memory_rows
        .set(segments().map(Segment::rows).sum::<usize>() as i64);
    metrics
        .memory_bytes
        .set(segments().map(Segment::memory_bytes).sum::<usize>() as i64);
}

/// The names the flusher gives its files, kept so that an upload cut is safe: a file is named
/// by its write time (Unix ms), never at or below a cut already taken
/// ([`crate::Store::upload_cut`]), and a file being written is never left out of a cut at or above
/// its name.
#[derive(Debug, Default)]
pub(crate) struct WriteNames {
    /// The lowest write time the next file may be named.
    pub(crate) floor_ms: i64,
    /// The write time of the file being written, if any.
    pub(crate) in_flight: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace_index;
    use std::sync::Arc;

    fn file(hour: i64, written: i64, traces: Option<usize>) -> FileMeta {
        FileMeta {
            path: PathBuf::from(format!("/h{hour}/w{written}")),
            hour_start_unix_nano: hour,
            written_unix_ms: written,
            size: 1,
            traces: traces.map(|n| {
                Arc::new(trace_index::TraceIndex::from_hashes(
                    (0..n as u64).collect(),
                ))
            }),
            remote: None,
        }
    }

    #[test]
    fn trace_indexes_of_the_newest_files_are_kept_within_the_budget() {
        // 8 bytes per trace. Newest first: (3, 1) 10 traces, (2, 9) none, (2, 5) 10,
        // (1, 7) 5, (1, 1) 1.
        let mut files = vec![
            file(1, 1, Some(1)),
            file(2, 5, Some(10)),
            file(3, 1, Some(10)),
            file(1, 7, Some(5)),
            file(2, 9, None),
        ];
        let held = |f: &[FileMeta]| -> Vec<bool> { f.iter().map(|f| f.traces.is_some()).collect() };
        // Everything fits.
        assert_eq!(trim_trace_indexes(&mut files, 1000), 26 * 8);
        assert_eq!(held(&files), [true, true, true, true, false]);
        // 20 traces fit: the two newest indexed files. The older (1, 7) and (1, 1) lose
        // theirs, the small (1, 1) too although it alone would fit: a strict prefix.
        assert_eq!(trim_trace_indexes(&mut files, 20 * 8 + 7), 20 * 8);
        assert_eq!(held(&files), [false, true, true, false, false]);
        // Budget below the newest file: no index at all.
        assert_eq!(trim_trace_indexes(&mut files, 79), 0);
        assert_eq!(held(&files), [false; 5]);
        // Same hour and write time: the later in the list is the newer.
        let mut files = vec![file(1, 1, Some(1)), file(1, 1, Some(1))];
        assert_eq!(trim_trace_indexes(&mut files, 8), 8);
        assert_eq!(held(&files), [false, true]);
    }
}
