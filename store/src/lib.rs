//! The span store: write-ahead log → Arrow rows in memory, sealed as Parquet in memory →
//! hourly zstd Parquet files, and the DataFusion table `spans` over memory ∪ Parquet
//! ([`table::SpansTable`]).
//!
//! ```text
//! write(batch, keys) ─▶ (caller's thread: the WAL record, LZ4 Arrow IPC)
//!     ─▶ queue (bounded: full → Saturated) ─▶ writer thread:
//!     duplicate filter ─▶ WAL append ─▶ group commit (fsync by policy) ─▶ memory, plain ─▶ ack
//! writer: once SEAL_ROWS plain rows have gathered ─▶ flusher thread: seal them, one in-memory
//!     Parquet file per hour (seal::encode_parts: rows sorted by trace), swapped in for
//!     the plain rows (one lock)
//! writer: every flush interval or row cap ─▶ rotate WAL, freeze memory ─▶ flusher thread:
//!     a file per hour, the sealed row groups copied as encoded and the plain rest encoded
//!     (file_write::write_segments) ─▶ register files, drop frozen memory (one lock)
//!     ─▶ delete old WAL
//! open: replay WAL segments through the duplicate filter ─▶ memory, sealed every SEAL_ROWS
//!     (then flushed)
//! ```
//!
//! Owns durability, the one-row-per-span rule (domain §1), retention and the table provider.
//! Does not own decoding or analysis.

mod config;
mod error;
mod jobs;
mod lock;
mod metrics;
mod state;
#[cfg(test)]
mod test_support;

pub mod dedupe;
pub mod file_read;
pub mod file_write;
pub mod layout;
pub mod part;
pub mod seal;
pub mod segment;
pub mod table;
pub mod trace_index;
pub mod wal;

pub use config::{DUPLICATE_FILTER_QUIET, FsyncPolicy, SEAL_BYTES, SEAL_ROWS, StoreConfig};
pub use error::StoreError;
pub use jobs::WriteReport;
pub use lock::LOCK_FILE;
pub use metrics::StoreMetrics;
pub use state::{Snapshot, trim_trace_indexes};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use dyeline_model::SpanKey;
use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;

use crate::dedupe::Dedupe;
use crate::jobs::{FlushJob, PendingAck, WriteJob};
use crate::layout::{FileMeta, now_unix_ms};
use crate::lock::lock_data_dir;
use crate::segment::Segment;
use crate::state::{
    Frozen, Shared, State, files_of_hour, seal_due, set_file_gauges, set_memory_gauges,
};
use crate::wal::Wal;

/// The span store. Cheap to share behind an `Arc`; [`Store::close`] flushes and stops it.
pub struct Store {
    shared: Arc<Shared>,
    /// Writes carry a WAL record (the store persists and is writable).
    wal_records: bool,
    tx: Mutex<Option<SyncSender<WriteJob>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// [`StoreConfig::max_memory_bytes`].
    max_memory_bytes: usize,
    /// The data directory's lock ([`LOCK_FILE`]) when the store writes to disk; the writer
    /// and flusher threads hold clones, so it is released once the store and both are gone.
    lock: Mutex<Option<Arc<std::fs::File>>>,
}

impl Store {
    /// Opens (or creates) the store in `config.data_dir`, replaying its WAL. A writable store
    /// that persists first takes the directory's lock ([`LOCK_FILE`]); a read-only one does not.
    ///
    /// # Errors
    /// [`StoreError::InUse`] when another process holds the lock; [`StoreError::Io`] when the
    /// directories cannot be created or read.
    pub fn open(config: StoreConfig) -> Result<Self, StoreError> {
        let io = |e: std::io::Error| StoreError::Io(e.to_string());
        let mut config = config;
        if config.persist {
            if !config.read_only {
                std::fs::create_dir_all(&config.data_dir).map_err(io)?;
            }
            // Absolute paths: the Parquet reader addresses files from the filesystem root.
            config.data_dir = std::fs::canonicalize(&config.data_dir).map_err(|e| {
                StoreError::Io(format!("data directory {}: {e}", config.data_dir.display()))
            })?;
        }
        // Before anything is read: another writer's WAL must not be replayed.
        let lock = (config.persist && !config.read_only)
            .then(|| lock_data_dir(&config.data_dir))
            .transpose()?
            .map(Arc::new);
        let spans_dir = config.data_dir.join("spans");
        let wal_dir = config.data_dir.join("wal");
        if config.persist && !config.read_only {
            std::fs::create_dir_all(&spans_dir).map_err(io)?;
        }
        let files = if config.persist {
            layout::list_files(&spans_dir, !config.read_only).map_err(io)?
        } else {
            Vec::new()
        };
        let metrics = StoreMetrics::default();
        set_file_gauges(&metrics, &files, 0);
        let shared = Arc::new(Shared {
            state: RwLock::new(State {
                files,
                ..State::default()
            }),
            metrics,
            spans_dir,
            wal_dir: wal_dir.clone(),
            trace_index_max_bytes: config.trace_index_max_bytes,
        });
        let mut dedupe = Dedupe::new(DUPLICATE_FILTER_QUIET.max(config.flush_interval * 4));
        if config.read_only {
            replay(&shared, &wal_dir, &mut dedupe, config.zstd_level).map_err(io)?;
            return Ok(Self {
                shared,
                wal_records: false,
                tx: Mutex::new(None),
                threads: Mutex::new(Vec::new()),
                max_memory_bytes: config.max_memory_bytes,
                lock: Mutex::new(None),
            });
        }
        let wal_records = config.persist;
        let wal = if config.persist {
            replay(&shared, &wal_dir, &mut dedupe, config.zstd_level).map_err(io)?;
            Some(Wal::open(&wal_dir).map_err(io)?)
        } else {
            None
        };
        if config.persist {
            let weak = Arc::downgrade(&shared);
            std::thread::Builder::new()
                .name("dyeline-indexer".into())
                .spawn(move || index_files(&weak))
                .map_err(io)?;
        }
        let max_memory_bytes = config.max_memory_bytes;
        let (tx, rx) = mpsc::sync_channel(config.queue_capacity.max(1));
        let (flush_tx, flush_rx) = mpsc::channel::<FlushJob>();
        let mut threads = Vec::new();
        {
            let shared = Arc::clone(&shared);
            let config = config.clone();
            let lock = lock.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("dyeline-flusher".into())
                    .spawn(move || {
                        flusher_loop(&shared, &config, &flush_rx);
                        drop(lock);
                    })
                    .map_err(io)?,
            );
        }
        {
            let shared = Arc::clone(&shared);
            let lock = lock.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("dyeline-writer".into())
                    .spawn(move || {
                        writer_loop(&shared, &config, &rx, wal, dedupe, &flush_tx);
                        drop(lock);
                    })
                    .map_err(io)?,
            );
        }
        let store = Self {
            shared,
            wal_records,
            tx: Mutex::new(Some(tx)),
            threads: Mutex::new(threads),
            max_memory_bytes,
            lock: Mutex::new(lock),
        };
        Ok(store)
    }

    /// The store's metrics.
    pub fn metrics(&self) -> &StoreMetrics {
        &self.shared.metrics
    }

    /// The DataFusion table over this store.
    pub fn table(&self) -> Arc<table::SpansTable> {
        Arc::new(table::SpansTable::new(Arc::clone(&self.shared)))
    }

    /// A consistent view of memory and files.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.snapshot()
    }

    /// Queues a write of `batch` (rows in the `spans` schema; `keys[i]` is row i's key) and
    /// returns a receiver that resolves once it is durable by the fsync policy and visible to
    /// queries. The WAL record is encoded and the rows' trace index built here, on the
    /// caller's thread, not on the writer's.
    ///
    /// # Errors
    /// [`StoreError::Saturated`] at once when the queue is full or the rows in memory take
    /// [`StoreConfig::max_memory_bytes`] or more, [`StoreError::Closed`], [`StoreError::Io`]
    /// when the batch cannot be encoded.
    pub fn try_write(
        &self,
        batch: RecordBatch,
        keys: Vec<SpanKey>,
    ) -> Result<oneshot::Receiver<Result<WriteReport, StoreError>>, StoreError> {
        let (ack, rx) = oneshot::channel();
        if self.tx.lock().is_none() {
            return Err(StoreError::Closed);
        }
        if self.memory_full() {
            return Err(StoreError::Saturated);
        }
        let record = self.record(&batch)?;
        let segment = Box::new(Segment::plain(batch.clone()));
        let guard = self.tx.lock();
        let tx = guard.as_ref().ok_or(StoreError::Closed)?;
        match tx.try_send(WriteJob::Write {
            batch,
            record,
            segment,
            keys,
            ack,
        }) {
            Ok(()) => Ok(rx),
            Err(TrySendError::Full(_)) => Err(StoreError::Saturated),
            Err(TrySendError::Disconnected(_)) => Err(StoreError::Closed),
        }
    }

    /// Writes and waits, blocking while the queue is full or the rows in memory take
    /// [`StoreConfig::max_memory_bytes`] or more (for offline import).
    ///
    /// # Errors
    /// [`StoreError::Closed`] or the write's own error.
    pub async fn write_waiting(
        &self,
        batch: RecordBatch,
        keys: Vec<SpanKey>,
    ) -> Result<WriteReport, StoreError> {
        while self.memory_full() {
            if self.tx.lock().is_none() {
                return Err(StoreError::Closed);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (ack, rx) = oneshot::channel();
        let tx = self.tx.lock().clone().ok_or(StoreError::Closed)?;
        let record = self.record(&batch)?;
        let segment = Box::new(Segment::plain(batch.clone()));
        tokio::task::spawn_blocking(move || {
            tx.send(WriteJob::Write {
                batch,
                record,
                segment,
                keys,
                ack,
            })
            // The message comes back only on a closed channel; drop it, keep the fact.
            .map_err(|_| ())
        })
        .await
        .map_err(|e| StoreError::Io(e.to_string()))?
        .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// True while the rows in memory take [`StoreConfig::max_memory_bytes`] or more.
    fn memory_full(&self) -> bool {
        self.shared.memory_full(self.max_memory_bytes)
    }

    /// The WAL record of `batch`, when the store keeps a WAL.
    fn record(&self, batch: &RecordBatch) -> Result<Option<Vec<u8>>, StoreError> {
        self.wal_records
            .then(|| segment::encode_record(batch))
            .transpose()
            .map_err(|e| StoreError::Io(e.to_string()))
    }

    /// Flushes memory to Parquet now and waits for it.
    ///
    /// # Errors
    /// [`StoreError::Closed`], or the flush's I/O error.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (ack, rx) = oneshot::channel();
        let tx = self.tx.lock().clone().ok_or(StoreError::Closed)?;
        tokio::task::spawn_blocking(move || tx.send(WriteJob::Flush { ack }).map_err(|_| ()))
            .await
            .map_err(|e| StoreError::Io(e.to_string()))?
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Stops accepting writes, flushes memory to Parquet, joins the threads and releases the
    /// data directory's lock (blocking).
    pub fn close(&self) {
        let tx = self.tx.lock().take();
        if let Some(tx) = tx {
            let (ack, rx) = oneshot::channel();
            if tx.send(WriteJob::Flush { ack }).is_ok() {
                let _ = rx.blocking_recv();
            }
            drop(tx);
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        self.lock.lock().take();
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Without close(), the WAL still holds everything acknowledged; just stop the threads.
        // The lock is released when they have stopped (they hold clones of it).
        self.tx.lock().take();
    }
}

/// Builds the [`trace_index::TraceIndex`] of every file found at open (files the store writes
/// get theirs when written), one file at a time, the newest first (recent traces are the ones
/// looked up most); a lookup meanwhile reads the files not indexed yet as before. Stops when
/// the store is gone, or when an index does not fit the budget
/// ([`StoreConfig::trace_index_max_bytes`]; the files left are older). A file that cannot be
/// read (removed by retention meanwhile, corrupt) stays unindexed, so it is never skipped.
fn index_files(shared: &std::sync::Weak<Shared>) {
    let todo: Vec<PathBuf> = match shared.upgrade() {
        Some(s) => {
            let state = s.state.read();
            let mut todo: Vec<&FileMeta> =
                state.files.iter().filter(|f| f.traces.is_none()).collect();
            todo.sort_by_key(|f| std::cmp::Reverse((f.hour_start_unix_nano, f.written_unix_ms)));
            todo.into_iter().map(|f| f.path.clone()).collect()
        }
        None => return,
    };
    let started = Instant::now();
    let mut indexed = 0usize;
    for path in todo {
        if shared.strong_count() == 0 {
            return;
        }
        match file_read::read_trace_index(&path) {
            Ok(ix) => {
                let Some(s) = shared.upgrade() else { return };
                let ix = Arc::new(ix);
                let mut state = s.state.write();
                // Files go newest first, and every file indexed so far is newer (or written
                // since open, and trimmed then): the first that does not fit ends the pass.
                if state.trace_index_bytes + ix.bytes() > s.trace_index_max_bytes {
                    drop(state);
                    tracing::info!(
                        budget_bytes = s.trace_index_max_bytes,
                        "trace index budget reached; older files stay unindexed"
                    );
                    break;
                }
                if let Some(f) = state
                    .files
                    .iter_mut()
                    .find(|f| f.path == path && f.traces.is_none())
                {
                    f.traces = Some(Arc::clone(&ix));
                    state.trace_index_bytes += ix.bytes();
                    s.metrics
                        .trace_index_bytes
                        .set(state.trace_index_bytes as i64);
                }
                drop(state);
                indexed += 1;
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot index the file's trace ids; lookups will read it");
            }
        }
    }
    tracing::info!(
        files = indexed,
        elapsed = ?started.elapsed(),
        "indexed the trace ids of the stored files"
    );
}

/// Replays WAL segments into memory (through the duplicate filter, so rows already flushed
/// before a crash are not doubled) and freezes them for the flusher.
fn replay(
    shared: &Shared,
    wal_dir: &Path,
    dedupe: &mut Dedupe,
    zstd_level: i32,
) -> std::io::Result<()> {
    if !wal_dir.exists() {
        return Ok(());
    }
    let segments = wal::list_segments(wal_dir)?;
    let Some(&last) = segments.last() else {
        return Ok(());
    };
    let files = files_of_hour(shared);
    let mut kept = Vec::new();
    let mut plain: Vec<Segment> = Vec::new();
    let mut rows = 0usize;
    for id in segments {
        let r = wal::replay_segment(wal_dir, id)?;
        if r.torn_tail {
            shared.metrics.wal_torn_tails.inc();
            tracing::warn!(
                segment = id,
                "WAL segment ends in a torn record; replayed up to it"
            );
        }
        for (_, batch) in r.records {
            let keys = keys_of(&batch);
            let f = dedupe
                .filter(batch, &keys, &files)
                .map_err(std::io::Error::other)?;
            if let Some(b) = f.batch {
                rows += b.num_rows();
                plain.push(Segment::plain(b));
            }
            // Sealed as the writer would, so replay holds no more plain rows than it does.
            if seal_due(&plain) {
                let refs: Vec<&Segment> = plain.iter().collect();
                let parts = seal::encode_parts(&refs, zstd_level)?;
                kept.extend(parts.into_iter().map(Segment::from_part));
                plain.clear();
            }
        }
    }
    kept.append(&mut plain);
    shared.metrics.wal_replayed_rows.inc_by(rows as u64);
    tracing::info!(rows, last_segment = last, "replayed the WAL");
    let mut s = shared.state.write();
    s.frozen.push(Frozen {
        wal_segment: last,
        segments: kept,
    });
    set_memory_gauges(&shared.metrics, &s);
    Ok(())
}

/// Reads the keys of a stored batch back from its id columns.
pub fn keys_of(batch: &RecordBatch) -> Vec<SpanKey> {
    use arrow::array::AsArray;
    use dyeline_model::schema::col;
    use dyeline_model::{SpanId, TraceId};
    let (Some(t), Some(s)) = (
        batch.column_by_name(col::TRACE_ID),
        batch.column_by_name(col::SPAN_ID),
    ) else {
        return Vec::new();
    };
    let (t, s) = (t.as_string::<i32>(), s.as_string::<i32>());
    (0..batch.num_rows())
        .filter_map(|i| {
            Some(SpanKey {
                trace_id: TraceId::from_hex(t.value(i)).ok()?,
                span_id: SpanId::from_hex(s.value(i)).ok()?,
            })
        })
        .collect()
}

fn writer_loop(
    shared: &Shared,
    config: &StoreConfig,
    rx: &Receiver<WriteJob>,
    mut wal: Option<Wal>,
    mut dedupe: Dedupe,
    flush_tx: &mpsc::Sender<FlushJob>,
) {
    let fsync = config.fsync == FsyncPolicy::Always;
    let mut last_flush = Instant::now();
    let mut closing = false;
    while !closing {
        let mut group = Vec::new();
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(m) => group.push(m),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => closing = true,
        }
        while group.len() < 512 {
            match rx.try_recv() {
                Ok(m) => group.push(m),
                Err(_) => break,
            }
        }
        let mut acks: Vec<PendingAck> = Vec::new();
        let mut fresh = Vec::new();
        let mut flush_acks = Vec::new();
        let files = files_of_hour(shared);
        let mut wal_failed: Option<String> = None;
        for msg in group {
            match msg {
                WriteJob::Write {
                    batch,
                    record,
                    segment,
                    keys,
                    ack,
                } => {
                    let n = batch.num_rows();
                    let f = match dedupe.filter(batch, &keys, &files) {
                        Ok(f) => f,
                        Err(e) => {
                            let _ = ack.send(Err(StoreError::Io(e.to_string())));
                            continue;
                        }
                    };
                    let report = WriteReport {
                        stored: f.batch.as_ref().map_or(0, |b| b.num_rows() as u64),
                        duplicates: f.duplicates,
                        kept: f.batch.clone(),
                    };
                    if let Some(kept) = f.batch {
                        if let Some(w) = wal.as_mut().filter(|_| wal_failed.is_none()) {
                            // Re-encode only when duplicates were dropped (rare).
                            let appended = match record {
                                Some(r) if kept.num_rows() == n => w.append(&r),
                                _ => segment::encode_record(&kept)
                                    .map_err(std::io::Error::other)
                                    .and_then(|r| w.append(&r)),
                            };
                            match appended {
                                Ok(n) => {
                                    shared.metrics.wal_bytes.inc_by(n);
                                }
                                Err(e) => wal_failed = Some(e.to_string()),
                            }
                        }
                        fresh.push(if kept.num_rows() == n {
                            *segment
                        } else {
                            Segment::plain(kept)
                        });
                    }
                    acks.push((ack, report, f.inserted));
                }
                WriteJob::Flush { ack } => flush_acks.push(ack),
            }
        }
        if let (Some(w), None, false) = (wal.as_mut(), &wal_failed, acks.is_empty())
            && let Err(e) = w.commit(fsync)
        {
            wal_failed = Some(e.to_string());
        }
        if wal_failed.is_some() {
            for (_, _, inserted) in &acks {
                dedupe.roll_back(inserted);
            }
        }
        // Set once per loop, before any ack goes out: WAL replay's keys, this group's, the
        // last sweep's drops.
        shared
            .metrics
            .duplicate_filter_keys
            .set(dedupe.len() as i64);
        if let Some(err) = wal_failed {
            tracing::error!(error = %err, "WAL write failed; refusing the group");
            for (ack, _, _) in acks {
                let _ = ack.send(Err(StoreError::Io(err.clone())));
            }
        } else if !acks.is_empty() {
            let rows: usize = fresh.iter().map(Segment::rows).sum();
            {
                let mut s = shared.state.write();
                s.plain.extend(fresh);
                s.active_rows += rows;
                set_memory_gauges(&shared.metrics, &s);
                if !s.seal_pending && seal_due(&s.plain) {
                    s.seal_pending = true;
                    let _ = flush_tx.send(FlushJob::Seal);
                }
            }
            for (ack, report, _) in acks {
                shared.metrics.rows_written.inc_by(report.stored);
                shared.metrics.duplicate_rows.inc_by(report.duplicates);
                let _ = ack.send(Ok(report));
            }
        }
        dedupe.sweep();
        // Writes are refused meanwhile, so `active` does not grow and this freezes once.
        let memory_full = shared.memory_full(config.max_memory_bytes);
        let due = {
            let s = shared.state.read();
            s.active_rows >= config.flush_max_rows
                || (s.active_rows > 0 && memory_full)
                || (s.active_rows > 0 && last_flush.elapsed() >= config.flush_interval)
                || !s.frozen.is_empty() && last_flush.elapsed() >= config.flush_interval
        };
        if due || !flush_acks.is_empty() || closing {
            last_flush = Instant::now();
            if !config.persist {
                // Nothing to write: memory is simply dropped at the row cap or the memory bound.
                let mut s = shared.state.write();
                if s.active_rows >= config.flush_max_rows || memory_full {
                    s.active.clear();
                    s.plain.clear();
                    s.plain_generation += 1;
                    s.active_rows = 0;
                    set_memory_gauges(&shared.metrics, &s);
                }
                for a in flush_acks {
                    let _ = a.send(Ok(()));
                }
                continue;
            }
            let segment = match wal.as_mut().map(Wal::rotate) {
                Some(Ok(id)) => id,
                Some(Err(e)) => {
                    tracing::error!(error = %e, "WAL rotation failed; flush postponed");
                    for a in flush_acks {
                        let _ = a.send(Err(StoreError::Io(e.to_string())));
                    }
                    continue;
                }
                None => 0,
            };
            {
                let mut s = shared.state.write();
                let mut segments = std::mem::take(&mut s.active);
                segments.append(&mut s.plain);
                s.plain_generation += 1;
                s.active_rows = 0;
                if !segments.is_empty() {
                    s.frozen.push(Frozen {
                        wal_segment: segment,
                        segments,
                    });
                }
            }
            let _ = flush_tx.send(FlushJob::Flush { acks: flush_acks });
        }
    }
}

/// Seals the plain rows into `active` (a [`FlushJob::Seal`], on the flusher thread). The
/// encoding runs outside the lock and the plain rows stay visible until the sealed parts
/// replace them. Only the writer adds to `plain` (at its end) or takes it whole for a flush
/// (bumping `plain_generation`), so if the generation is unchanged the rows sealed are still
/// the first of `plain`; otherwise they were frozen meanwhile and the flush writes them. On an
/// encoding error (a bug) the rows stay plain and visible, and the next flush writes them.
fn seal_plain(shared: &Shared, zstd_level: i32) {
    let (plain, generation): (Vec<Segment>, u64) = {
        let s = shared.state.read();
        (s.plain.clone(), s.plain_generation)
    };
    let refs: Vec<&Segment> = plain.iter().collect();
    let sealed = seal::encode_parts(&refs, zstd_level);
    let mut s = shared.state.write();
    s.seal_pending = false;
    match sealed {
        Ok(parts) if s.plain_generation == generation => {
            s.plain.drain(..plain.len());
            s.active.extend(parts.into_iter().map(Segment::from_part));
            set_memory_gauges(&shared.metrics, &s);
        }
        Ok(_) => {}
        Err(e) => tracing::error!(error = %e, "cannot seal the plain rows; they stay plain"),
    }
}

fn flusher_loop(shared: &Shared, config: &StoreConfig, rx: &Receiver<FlushJob>) {
    let mut seq = 0u64;
    let mut last_retention = Instant::now() - Duration::from_secs(3600);
    loop {
        let job = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(j) => Some(j),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if config.persist && last_retention.elapsed() >= Duration::from_secs(60) {
            last_retention = Instant::now();
            apply_retention(shared, config.retention);
        }
        let acks = match job {
            None => continue,
            Some(FlushJob::Seal) => {
                seal_plain(shared, config.zstd_level);
                continue;
            }
            Some(FlushJob::Flush { acks }) => acks,
        };
        let result = if config.persist {
            flush_frozen(shared, config, &mut seq)
        } else {
            Ok(())
        };
        if let Err(e) = &result {
            shared.metrics.flush_errors.inc();
            tracing::error!(error = %e, "flush to Parquet failed; the rows stay in memory and the WAL");
        }
        for a in acks {
            let _ = a.send(result.clone().map_err(|e| StoreError::Io(e.clone())));
        }
    }
}

fn flush_frozen(shared: &Shared, config: &StoreConfig, seq: &mut u64) -> Result<(), String> {
    let frozen: Vec<Frozen> = shared.state.read().frozen.clone();
    let Some(upto) = frozen.iter().map(|f| f.wal_segment).max() else {
        return Ok(());
    };
    let started = Instant::now();
    let segments: Vec<&Segment> = frozen.iter().flat_map(|f| &f.segments).collect();
    let rows: usize = segments.iter().map(|s| s.rows()).sum();
    let new_files = file_write::write_segments(
        &shared.spans_dir,
        &segments,
        now_unix_ms(),
        seq,
        config.zstd_level,
    )
    .map_err(|e| e.to_string())?;
    let n = frozen.len();
    {
        let mut s = shared.state.write();
        s.files.extend(new_files);
        s.frozen.drain(..n);
        shared.files_changed(&mut s);
        set_memory_gauges(&shared.metrics, &s);
    }
    if upto > 0 {
        Wal::delete_through(&shared.wal_dir, upto).map_err(|e| e.to_string())?;
    }
    shared
        .metrics
        .flush_seconds
        .observe(started.elapsed().as_secs_f64());
    tracing::info!(
        rows,
        elapsed = ?started.elapsed(),
        "flushed to Parquet"
    );
    Ok(())
}

fn apply_retention(shared: &Shared, retention: Duration) {
    let cutoff = now_unix_ms() - retention.as_millis() as i64;
    let expired: Vec<FileMeta> = {
        let mut s = shared.state.write();
        let (old, keep): (Vec<_>, Vec<_>) =
            s.files.drain(..).partition(|f| f.written_unix_ms < cutoff);
        s.files = keep;
        shared.files_changed(&mut s);
        old
    };
    for f in expired {
        tracing::info!(path = %f.path.display(), "retention: deleting partition file");
        if let Err(e) = std::fs::remove_file(&f.path) {
            tracing::warn!(path = %f.path.display(), error = %e, "retention: cannot delete");
        }
        if let Some(dir) = f.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{
        close, expected_span_ids, open_unsynced, rows, rows_held, span_ids, wait_for_a_seal, write,
    };

    #[tokio::test]
    async fn file_trace_indexes_stay_within_the_budget_when_written_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::new(dir.path());
        config.fsync = FsyncPolicy::Never;
        // Each write below is 100 rows of 20 traces: 160 bytes of index. Room for two files.
        config.trace_index_max_bytes = 2 * 160 + 100;
        let store = Store::open(config.clone()).unwrap();
        for w in 0..4 {
            assert_eq!(write(&store, w * 100, 100).await.stored, 100);
            store.flush().await.unwrap();
            // Write times in ms order the files.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Files by write time: the two newest hold their indexes, 320 bytes.
        let assert_two_newest_indexed = |store: &Store| {
            let mut files: Vec<(i64, bool)> = store
                .snapshot()
                .files
                .iter()
                .map(|f| (f.written_unix_ms, f.traces.is_some()))
                .collect();
            files.sort();
            let held: Vec<bool> = files.iter().map(|f| f.1).collect();
            assert_eq!(held, [false, false, true, true]);
            assert_eq!(store.metrics().trace_index_bytes.get(), 320);
        };
        assert_two_newest_indexed(&store);
        close(store).await;

        // Reopened: the background pass indexes the newest files first and stops at the
        // budget.
        let store = Store::open(config).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while store.metrics().trace_index_bytes.get() < 320 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_two_newest_indexed(&store);
        close(store).await;
    }

    #[tokio::test]
    async fn writes_past_the_memory_bound_are_refused_until_a_flush_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::new(dir.path());
        config.fsync = FsyncPolicy::Never;
        // Any row held fills it; the interval alone would not flush for an hour.
        config.max_memory_bytes = 1;
        config.flush_interval = Duration::from_secs(3600);
        let store = Store::open(config).unwrap();
        assert_eq!(write(&store, 0, 100).await.stored, 100);
        assert!(store.metrics().memory_bytes.get() > 0);
        let (batch, keys) = rows(100, 100);
        let refused = store.try_write(batch.clone(), keys.clone());
        assert!(matches!(refused, Err(StoreError::Saturated)), "{refused:?}");

        // The writer flushes at once when the bound is reached; then writes are taken again,
        // and an import's write waits for that instead of failing.
        let deadline = Instant::now() + Duration::from_secs(20);
        while store.metrics().memory_bytes.get() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(store.metrics().memory_bytes.get(), 0);
        assert_eq!(
            store.snapshot().files.len(),
            1,
            "flushed by the bound, not the interval"
        );
        assert_eq!(store.write_waiting(batch, keys).await.unwrap().stored, 100);
        let (batch, keys) = rows(200, 100);
        let waited =
            tokio::time::timeout(Duration::from_secs(20), store.write_waiting(batch, keys))
                .await
                .expect("the waiting write went through after the next flush")
                .unwrap();
        assert_eq!(waited.stored, 100);
        close(store).await;
    }

    #[tokio::test]
    async fn plain_rows_are_sealed_once_enough_gather_and_all_stay_visible_and_durable() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unsynced(dir.path());
        let (writes, n) = (70u64, 1000u64);
        for w in 0..writes {
            assert_eq!(write(&store, w * n, n).await.stored, n);
        }
        let total = (writes * n) as usize;
        // The seal runs on the flusher thread: wait for it.
        wait_for_a_seal(&store).await;
        // A resent write is still a duplicate, its rows sealed or not.
        let r = write(&store, 0, n).await;
        assert_eq!((r.stored, r.duplicates), (0, n));
        assert_eq!(store.metrics().duplicate_filter_keys.get(), total as i64);

        let snap = store.snapshot();
        let sealed: Vec<&Segment> = snap.segments.iter().filter(|s| !s.is_plain()).collect();
        let sealed_rows = rows_held(&snap.segments, true);
        let plain_rows = rows_held(&snap.segments, false);
        // One hour of rows: one part, holding every write up to the one that reached
        // SEAL_ROWS (or a few more, written before the seal ran).
        assert_eq!(sealed.len(), 1);
        assert!(sealed_rows >= SEAL_ROWS, "{sealed_rows} rows sealed");
        assert_eq!(sealed_rows % n as usize, 0, "whole writes are sealed");
        assert_eq!(sealed_rows + plain_rows, total);
        let expected = expected_span_ids(writes * n);
        assert_eq!(span_ids(&snap.segments), expected);
        // Sealed, a row costs a fraction of its plain Arrow bytes.
        let sealed_bytes = sealed[0].part().unwrap().bytes.len();
        let plain_bytes: usize = snap
            .segments
            .iter()
            .map(|s| s.decode().unwrap().get_array_memory_size())
            .sum();
        assert!(
            sealed_bytes * 4 < plain_bytes * sealed_rows / total,
            "{sealed_bytes} B sealed of {sealed_rows} rows; {plain_bytes} B plain of {total}"
        );

        // Every row reaches Parquet once: the sealed part copied, the plain rows encoded, a
        // row group each.
        store.flush().await.unwrap();
        let snap = store.snapshot();
        assert!(snap.segments.is_empty());
        assert_eq!(snap.files.len(), 1);
        let groups = parquet::file::reader::FileReader::metadata(
            &parquet::file::serialized_reader::SerializedFileReader::new(
                std::fs::File::open(&snap.files[0].path).unwrap(),
            )
            .unwrap(),
        )
        .num_row_groups();
        assert_eq!(groups, if plain_rows > 0 { 2 } else { 1 });
        let mut stored: Vec<String> = snap
            .files
            .iter()
            .flat_map(|f| file_read::read_keys(&f.path).unwrap())
            .map(|(_, span)| span)
            .collect();
        stored.sort();
        assert_eq!(stored, expected);
        close(store).await;
    }

    #[tokio::test]
    async fn replay_seals_the_wal_rows_as_they_gather() {
        let dir = tempfile::tempdir().unwrap();
        let (writes, n) = (70u64, 1000u64);
        {
            let mut wal = Wal::open(&dir.path().join("wal")).unwrap();
            for w in 0..writes {
                wal.append(&segment::encode_record(&rows(w * n, n).0).unwrap())
                    .unwrap();
            }
            // One write sent twice: replay keeps it once.
            wal.append(&segment::encode_record(&rows(0, n).0).unwrap())
                .unwrap();
            wal.commit(true).unwrap();
        }
        let mut config = StoreConfig::new(dir.path());
        config.read_only = true;
        let store = Store::open(config).unwrap();
        assert_eq!(store.metrics().wal_replayed_rows.get(), writes * n);
        let snap = store.snapshot();
        let sealed = rows_held(&snap.segments, true);
        let plain = rows_held(&snap.segments, false);
        // Sealed at the first write that reached SEAL_ROWS (66 of 1,000 rows); the rest plain.
        assert_eq!(sealed, SEAL_ROWS.div_ceil(n as usize) * n as usize);
        assert_eq!(sealed + plain, (writes * n) as usize);
        assert_eq!(span_ids(&snap.segments), expected_span_ids(writes * n));
    }

    #[tokio::test]
    async fn plain_rows_are_sealed_once_their_bytes_reach_seal_bytes() {
        use arrow::datatypes::{DataType, Field, Schema};
        let dir = tempfile::tempdir().unwrap();
        let store = open_unsynced(dir.path());
        // 100-row writes of 10 KB attribute strings: about 1 MB each, so SEAL_BYTES is
        // reached after about 33 writes, long before SEAL_ROWS rows.
        let (writes, n) = (40u64, 100u64);
        for w in 0..writes {
            let (keys_only, keys) = rows(w * n, n);
            let mut fields = keys_only.schema().fields().to_vec();
            fields.push(Arc::new(Field::new("attributes", DataType::Utf8, false)));
            let mut columns = keys_only.columns().to_vec();
            columns.push(Arc::new(arrow::array::StringArray::from_iter_values(
                (0..n).map(|i| format!("{i:0>10000}")),
            )));
            let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
            let r = store
                .try_write(batch, keys)
                .unwrap()
                .await
                .unwrap()
                .unwrap();
            assert_eq!(r.stored, n);
        }
        wait_for_a_seal(&store).await;
        let snap = store.snapshot();
        let sealed = rows_held(&snap.segments, true);
        let per_write = snap
            .segments
            .iter()
            .find(|s| s.is_plain())
            .map_or(1_000_000, Segment::memory_bytes);
        let first = SEAL_BYTES.div_ceil(per_write) * n as usize;
        assert!(
            (first..(writes * n) as usize).contains(&sealed),
            "{sealed} rows sealed; SEAL_BYTES is reached at {first}"
        );
        // The gauge counts the sealed bytes and the plain ones.
        let bytes: usize = snap.segments.iter().map(Segment::memory_bytes).sum();
        assert_eq!(store.metrics().memory_bytes.get(), bytes as i64);
        assert!(bytes < SEAL_BYTES, "{bytes} B held after the seal");
        close(store).await;
    }
}
