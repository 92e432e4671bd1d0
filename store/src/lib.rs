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
//! compactor thread, once a minute: each closed hour's files ─▶ merged into few large ones,
//!     swapped for them in the file list (one lock), journaled against crashes ([`compact`])
//! ```
//!
//! Owns durability, the one-row-per-span rule (domain §1), retention and the table provider.
//! Does not own decoding or analysis. Beside the spans, the `presence` rows of metrics and logs
//! exports (domain §7.1) take a simpler durable path of their own ([`presence`]).
//!
//! One file per thread: the writer (`writer.rs`), the flusher (`flusher.rs`, which also runs
//! `retention.rs`), the compactor ([`compact`]), and at open `recovery.rs` (WAL replay, the
//! background trace indexer); what
//! they share is in `state.rs`, what they send each other in `jobs.rs`. The file format, one
//! concern per file: [`layout`] (where files live, what their names say), [`part`] (the Parquet
//! format of a part), [`seal`] (segments → parts), [`file_write`] and [`file_read`].

mod config;
mod error;
mod flusher;
mod jobs;
mod lock;
mod metrics;
mod recovery;
mod retention;
#[cfg(test)]
mod schema_upgrade_tests;
mod state;
#[cfg(test)]
mod test_support;
mod writer;

pub mod compact;
pub mod dedupe;
pub mod file_read;
pub mod file_write;
pub mod layout;
pub mod object;
pub mod part;
pub mod presence;
pub mod remote;
pub mod seal;
pub mod segment;
pub mod table;
pub mod trace_index;
pub mod wal;

pub use compact::{CompactionReport, HourCompaction};
pub use config::{DUPLICATE_FILTER_QUIET, FsyncPolicy, SEAL_BYTES, SEAL_ROWS, StoreConfig};
pub use dedupe::keys_of;
pub use error::StoreError;
pub use jobs::WriteReport;
pub use lock::LOCK_FILE;
pub use metrics::StoreMetrics;
pub use object::{RemoteFile, RemoteObjects, Rows};
pub use presence::{InstancePresence, PresenceLog, PresenceSnapshot, PresenceWrite};
pub use state::{Snapshot, trim_trace_indexes};

use std::sync::Arc;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Duration;

use arrow::array::RecordBatch;
use dyeline_model::SpanKey;
use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;

use crate::dedupe::Dedupe;
use crate::flusher::flusher_loop;
use crate::jobs::{FlushJob, WriteJob};
use crate::lock::lock_data_dir;
use crate::recovery::{index_files, replay};
use crate::segment::Segment;
use crate::state::{Shared, State, set_file_gauges};
use crate::wal::Wal;
use crate::writer::writer_loop;

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
    /// The `presence` rows of the same data directory.
    presence: Arc<PresenceLog>,
    /// Stops the compactor thread when dropped.
    compactor_stop: Mutex<Option<mpsc::Sender<()>>>,
    config: StoreConfig,
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
            compact::recover(&spans_dir).map_err(io)?;
        }
        let files = if config.persist {
            layout::list_files(&spans_dir, !config.read_only).map_err(io)?
        } else {
            Vec::new()
        };
        let metrics = StoreMetrics::default();
        set_file_gauges(&metrics, &files, 0);
        let local_bytes: u64 = files.iter().map(|f| f.size).sum();
        let shared = Arc::new(Shared {
            state: RwLock::new(State {
                files,
                ..State::default()
            }),
            metrics,
            spans_dir,
            wal_dir: wal_dir.clone(),
            trace_index_max_bytes: config.trace_index_max_bytes,
            compaction: Mutex::new(compact::Compactor::default()),
            local_file_bytes: std::sync::atomic::AtomicU64::new(local_bytes),
            names: Mutex::new(state::WriteNames::default()),
        });
        let presence = PresenceLog::open(&config, shared.metrics.clone(), lock.clone())?;
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
                presence,
                compactor_stop: Mutex::new(None),
                config,
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
        let store_config = config.clone();
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
        let mut compactor_stop = None;
        if config.persist && config.compaction {
            let (stop, stopped) = mpsc::channel::<()>();
            compactor_stop = Some(stop);
            let shared = Arc::clone(&shared);
            let config = config.clone();
            let lock = lock.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("dyeline-compactor".into())
                    .spawn(move || {
                        compact::compactor_loop(&shared, &config, &stopped);
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
            presence,
            compactor_stop: Mutex::new(compactor_stop),
            config: store_config,
        };
        Ok(store)
    }

    /// The store's metrics.
    pub fn metrics(&self) -> &StoreMetrics {
        &self.shared.metrics
    }

    /// The DataFusion table over this store.
    pub fn table(&self) -> Arc<table::SpansTable> {
        Arc::new(table::SpansTable::new(
            Arc::clone(&self.shared),
            Some(Arc::clone(&self.presence)),
        ))
    }

    /// The `presence` rows (write, read, [`PresenceLog::instances_in`]).
    pub fn presence(&self) -> &Arc<PresenceLog> {
        &self.presence
    }

    /// The DataFusion table `presence` over this store.
    pub fn presence_table(&self) -> Arc<presence::table::PresenceTable> {
        Arc::new(presence::table::PresenceTable::new(Arc::clone(
            &self.presence,
        )))
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.config
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
    /// [`StoreError::Saturated`] at once when the queue is full, the rows in memory take
    /// [`StoreConfig::max_memory_bytes`] or more, or the local files not uploaded yet
    /// [`StoreConfig::staging_max_bytes`] or more; [`StoreError::Closed`], [`StoreError::Io`]
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
        if self.memory_full() || self.staging_full() {
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

    /// Why a write would be refused now, or `None` when the store takes writes: `closed` (the
    /// store is shutting down), `memory_full` (the rows in memory take
    /// [`StoreConfig::max_memory_bytes`] or more) or `staging_full` (the local files not
    /// uploaded yet take [`StoreConfig::staging_max_bytes`] or more). A store that is open
    /// has replayed its WAL. The readiness probe reads it.
    pub fn write_refusal(&self) -> Option<&'static str> {
        if self.tx.lock().is_none() {
            Some("closed")
        } else if self.memory_full() {
            Some("memory_full")
        } else if self.staging_full() {
            Some("staging_full")
        } else {
            None
        }
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

    /// Flushes memory (spans and presence) to Parquet now and waits for it.
    ///
    /// # Errors
    /// [`StoreError::Closed`], or the flush's I/O error.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (ack, rx) = oneshot::channel();
        let tx = self.tx.lock().clone().ok_or(StoreError::Closed)?;
        let presence = Arc::clone(&self.presence);
        tokio::task::spawn_blocking(move || {
            tx.send(WriteJob::Flush { ack })
                .map_err(|_| StoreError::Closed)?;
            presence.flush()
        })
        .await
        .map_err(|e| StoreError::Io(e.to_string()))??;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Compacts every hour due now ([`compact`]; with `ignore_lateness`, however recent),
    /// and deletes the files replaced earlier whose grace is over (blocking; a pass of the
    /// compactor thread waits for it, and it for one).
    ///
    /// # Errors
    /// [`StoreError::Closed`] on a store that does not write to disk (read-only, in memory)
    /// or is closed. An hour that fails is in the report, not an error.
    pub fn compact_now(&self, ignore_lateness: bool) -> Result<CompactionReport, StoreError> {
        if self.lock.lock().is_none() {
            return Err(StoreError::Closed);
        }
        Ok(compact::run_pass(
            &self.shared,
            &self.config,
            ignore_lateness,
            &|| false,
        ))
    }

    /// Stops accepting writes, flushes memory to Parquet, joins the threads and releases the
    /// data directory's lock (blocking).
    pub fn close(&self) {
        self.compactor_stop.lock().take();
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
        self.presence.close();
        self.lock.lock().take();
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Without close(), the WAL still holds everything acknowledged; just stop the threads.
        // The lock is released when they have stopped (they hold clones of it).
        self.tx.lock().take();
        self.compactor_stop.lock().take();
        self.presence.stop();
    }
}
