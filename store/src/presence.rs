//! The `presence` rows (domain §7.1; [`dyeline_model::presence`]): durable like spans, by a
//! simpler path than theirs ([`PresenceLog`]).
//!
//! ```text
//! write(batch) ─▶ recent-key filter ─▶ presence WAL append + commit (fsync by policy) ─▶ memory ─▶ ack
//! dyeline-presence thread: every flush interval ─▶ rotate the WAL, freeze memory ─▶ one file
//!     per hour (presence/files.rs) ─▶ register the files, drop frozen memory ─▶ delete the WAL
//!     up to the segment closed; once a minute, retention (the spans' rule, retention.rs)
//! open: files listed; WAL segments the files already hold skipped (their names say up to
//!     which), the others replayed into memory
//! ```
//!
//! Presence is tiny next to spans (one row per instance and export, an export every 30–60 s),
//! so it takes none of the span path's machinery for volume (the writer thread's group
//! commit and queue, sealing, trace indexes, the per-hour span-key filter): a write appends
//! its one WAL record under a lock on the caller's blocking thread, at most
//! [`StoreConfig::queue_capacity`] at once (more are refused as saturated, as spans are).
//! It reuses what does not depend on volume: the WAL format and segments ([`crate::wal`]),
//! the Arrow IPC record codec, the file layout and its atomic writes ([`crate::layout`],
//! [`crate::file_write`]), retention, and the Parquet scan of the table provider
//! ([`table::PresenceTable`]). Files live under `DATA_DIR/presence/` (the WAL in its `wal/`).
//!
//! A row is identified by (instance_id, signal, time_unix_nano): one sent again within
//! [`RECENT`] of the first (an exporter's retry, a file imported twice in one run) is
//! dropped and counted as a duplicate. Older repeats are kept; presence (a set of signal
//! times per instance) reads the same with them, and [`PresenceLog::instances_in`] gives each
//! time once.

mod files;
pub mod table;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use dyeline_model::PresenceSignal;
use dyeline_model::presence::col;
use parking_lot::{Mutex, RwLock};
use tokio::sync::Semaphore;

use crate::config::{FsyncPolicy, StoreConfig};
use crate::error::StoreError;
use crate::layout::FileMeta;
use crate::metrics::StoreMetrics;
use crate::retention::{delete_files, take_expired};
use crate::wal::{self, Wal};

/// How long a presence row's key is remembered to drop the same row sent again.
pub const RECENT: Duration = Duration::from_secs(600);

/// What a presence write did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PresenceWrite {
    /// Rows stored.
    pub stored: u64,
    /// Rows dropped as sent already ([`RECENT`]).
    pub duplicates: u64,
}

/// One instance's presence over a range ([`PresenceLog::instances_in`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstancePresence {
    /// The instance id.
    pub instance_id: String,
    /// Its app, from its latest row.
    pub service_name: String,
    /// Its colour, from its latest row.
    pub color: String,
    /// Its lane, from its latest row (`None` when not resolved).
    pub lane: Option<String>,
    /// The rule that decided `lane`.
    pub lane_rule: Option<String>,
    /// The signals it was seen by.
    pub signals: BTreeSet<PresenceSignal>,
    /// Its signal times, ascending, each once.
    pub times: Vec<i64>,
}

/// Memory and files of the presence table, as a scan sees them.
#[derive(Debug, Clone, Default)]
pub struct PresenceSnapshot {
    /// Rows not yet in files (written, or being flushed).
    pub memory: Vec<RecordBatch>,
    /// The Parquet files.
    pub files: Vec<FileMeta>,
}

#[derive(Default)]
struct State {
    memory: Vec<RecordBatch>,
    memory_rows: usize,
    /// Rows being written to files (still visible).
    frozen: Vec<RecordBatch>,
    files: Vec<FileMeta>,
}

/// A row's identity: (instance_id, signal, time_unix_nano).
type RowKey = (String, String, i64);

/// The write side: the WAL and the keys of recent rows, under one lock.
#[derive(Default)]
struct Writer {
    wal: Option<Wal>,
    recent: HashMap<RowKey, Instant>,
    swept: Option<Instant>,
}

/// The durable presence rows of a data directory (see the module doc).
pub struct PresenceLog {
    dir: PathBuf,
    wal_dir: PathBuf,
    config: StoreConfig,
    writer: Mutex<Writer>,
    state: RwLock<State>,
    /// One flush at a time.
    flushing: Mutex<()>,
    slots: Arc<Semaphore>,
    metrics: StoreMetrics,
    /// How the flush names files, for safe upload cuts ([`crate::remote`]).
    names: Mutex<crate::state::WriteNames>,
    /// Stops the flush thread when dropped.
    stop: Mutex<Option<mpsc::Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(e.to_string())
}

impl PresenceLog {
    /// Opens the presence rows of `config.data_dir` (a canonical path; the caller holds the
    /// directory's lock when writable): lists the files, replays the WAL segments they do not
    /// hold, and, when writable and persisting, starts the flush thread (`dyeline-presence`),
    /// which holds `lock` while it runs.
    ///
    /// # Errors
    /// [`StoreError::Io`] when the directory or the WAL cannot be read or created.
    pub fn open(
        config: &StoreConfig,
        metrics: StoreMetrics,
        lock: Option<Arc<std::fs::File>>,
    ) -> Result<Arc<Self>, StoreError> {
        let dir = config.data_dir.join("presence");
        let wal_dir = dir.join("wal");
        let writable = config.persist && !config.read_only;
        if writable {
            std::fs::create_dir_all(&dir).map_err(io)?;
        }
        let files = if config.persist {
            crate::layout::list_files(&dir, writable).map_err(io)?
        } else {
            Vec::new()
        };
        let covered = files.iter().map(files::wal_through).max().unwrap_or(0);
        let log = Arc::new(Self {
            dir,
            wal_dir,
            config: config.clone(),
            writer: Mutex::new(Writer::default()),
            state: RwLock::new(State {
                files,
                ..State::default()
            }),
            flushing: Mutex::new(()),
            slots: Arc::new(Semaphore::new(config.queue_capacity.max(1))),
            metrics,
            names: Mutex::new(crate::state::WriteNames::default()),
            stop: Mutex::new(None),
            thread: Mutex::new(None),
        });
        if config.persist {
            log.replay(covered, writable)?;
        }
        if writable {
            log.writer.lock().wal = Some(Wal::open_after(&log.wal_dir, covered).map_err(io)?);
            let (tx, rx) = mpsc::channel::<()>();
            let weak = Arc::downgrade(&log);
            let tick = config.flush_interval.min(Duration::from_secs(60));
            let thread = std::thread::Builder::new()
                .name("dyeline-presence".into())
                .spawn(move || {
                    flush_loop(&weak, &rx, tick);
                    drop(lock);
                })
                .map_err(io)?;
            *log.stop.lock() = Some(tx);
            *log.thread.lock() = Some(thread);
        }
        Ok(log)
    }

    /// Replays the WAL segments after `covered` into memory; with `clean`, deletes those up
    /// to it (their rows are in files).
    fn replay(&self, covered: u64, clean: bool) -> Result<(), StoreError> {
        if !self.wal_dir.exists() {
            return Ok(());
        }
        let mut rows = 0u64;
        for id in wal::list_segments(&self.wal_dir).map_err(io)? {
            if id <= covered {
                if clean {
                    Wal::delete_through(&self.wal_dir, id).map_err(io)?;
                }
                continue;
            }
            let r = wal::replay_segment(&self.wal_dir, id).map_err(io)?;
            if r.torn_tail {
                self.metrics.wal_torn_tails.inc();
                tracing::warn!(segment = id, "presence WAL segment ends in a torn record");
            }
            for (_, batch) in r.records {
                let batch = files::conform(&batch).map_err(io)?;
                let (kept, _) = self.writer.lock().filter(&batch)?;
                if let Some(kept) = kept {
                    rows += kept.num_rows() as u64;
                    self.remember(kept);
                }
            }
        }
        self.metrics.presence_replayed_rows.inc_by(rows);
        Ok(())
    }

    fn remember(&self, batch: RecordBatch) {
        let mut s = self.state.write();
        s.memory_rows += batch.num_rows();
        s.memory.push(batch);
        self.metrics.presence_memory_rows.set(s.memory_rows as i64);
    }

    /// Writes `batch` (rows in the `presence` schema) and resolves once it is durable by the
    /// fsync policy and visible to queries. The write runs on the blocking pool.
    ///
    /// # Errors
    /// [`StoreError::Saturated`] at once when [`StoreConfig::queue_capacity`] writes are
    /// running or the rows waiting for a failing flush pass twice
    /// [`StoreConfig::flush_max_rows`]; [`StoreError::Closed`] on a read-only or closed
    /// store; [`StoreError::Io`] when the WAL write failed (nothing is kept then).
    pub async fn write(self: &Arc<Self>, batch: RecordBatch) -> Result<PresenceWrite, StoreError> {
        let permit = Arc::clone(&self.slots)
            .try_acquire_owned()
            .map_err(|_| StoreError::Saturated)?;
        if self.config.persist && self.state.read().memory_rows >= 2 * self.config.flush_max_rows {
            return Err(StoreError::Saturated);
        }
        self.write_holding(permit, batch).await
    }

    /// Writes as [`PresenceLog::write`] does, waiting for a slot instead of being refused (for
    /// offline import).
    ///
    /// # Errors
    /// [`StoreError::Closed`], [`StoreError::Io`].
    pub async fn write_waiting(
        self: &Arc<Self>,
        batch: RecordBatch,
    ) -> Result<PresenceWrite, StoreError> {
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Closed)?;
        self.write_holding(permit, batch).await
    }

    /// Writes `batch` on the blocking pool, holding its write slot `permit` until done.
    async fn write_holding(
        self: &Arc<Self>,
        permit: tokio::sync::OwnedSemaphorePermit,
        batch: RecordBatch,
    ) -> Result<PresenceWrite, StoreError> {
        let log = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let r = log.write_blocking(batch);
            drop(permit);
            r
        })
        .await
        .map_err(io)?
    }

    fn write_blocking(&self, batch: RecordBatch) -> Result<PresenceWrite, StoreError> {
        if self.config.read_only || self.stop.lock().is_none() && self.config.persist {
            return Err(StoreError::Closed);
        }
        let batch = files::conform(&batch).map_err(io)?;
        let n = batch.num_rows() as u64;
        let mut w = self.writer.lock();
        let (kept, inserted) = w.filter(&batch)?;
        let Some(kept) = kept else {
            return Ok(PresenceWrite {
                stored: 0,
                duplicates: n,
            });
        };
        if let Some(wal) = w.wal.as_mut() {
            let appended = crate::segment::encode_record(&kept)
                .map_err(std::io::Error::other)
                .and_then(|r| wal.append(&r))
                .and_then(|bytes| {
                    wal.commit(self.config.fsync == FsyncPolicy::Always)
                        .map(|()| bytes)
                });
            match appended {
                Ok(bytes) => {
                    self.metrics.wal_bytes.inc_by(bytes);
                }
                Err(e) => {
                    for k in inserted {
                        w.recent.remove(&k);
                    }
                    tracing::error!(error = %e, "presence WAL write failed; refusing the write");
                    return Err(io(e));
                }
            }
        }
        let stored = kept.num_rows() as u64;
        self.remember(kept);
        drop(w);
        self.metrics.presence_rows_written.inc_by(stored);
        self.metrics.presence_duplicate_rows.inc_by(n - stored);
        let rows = self.state.read().memory_rows;
        if rows >= self.config.flush_max_rows {
            if self.config.persist {
                if let Err(e) = self.flush() {
                    tracing::error!(error = %e, "presence flush failed; the rows stay in memory and the WAL");
                }
            } else {
                let mut s = self.state.write();
                s.memory.clear();
                s.memory_rows = 0;
            }
        }
        Ok(PresenceWrite {
            stored,
            duplicates: n - stored,
        })
    }

    /// Writes the rows in memory to files (one per hour) and deletes the WAL that held them.
    /// On failure the rows stay in memory and the WAL, and the next flush writes them.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn flush(&self) -> Result<(), StoreError> {
        if !self.config.persist || self.config.read_only {
            return Ok(());
        }
        let _one = self.flushing.lock();
        let (closed, rows) = {
            let mut w = self.writer.lock();
            let mut s = self.state.write();
            if s.memory.is_empty() {
                return Ok(());
            }
            let closed = match w.wal.as_mut() {
                Some(wal) => wal.rotate().map_err(io)?,
                None => 0,
            };
            let rows = std::mem::take(&mut s.memory);
            s.memory_rows = 0;
            s.frozen = rows.clone();
            (closed, rows)
        };
        let started = Instant::now();
        let written = files::write_hours(
            &self.dir,
            &rows,
            crate::state::WriteNames::begin_write(&self.names),
            closed,
            self.config.zstd_level,
        );
        let mut s = self.state.write();
        s.frozen.clear();
        if let Ok(new_files) = &written {
            s.files.extend(new_files.iter().cloned());
        }
        crate::state::WriteNames::end_write(&self.names);
        match written {
            Ok(_) => {
                self.metrics.presence_memory_rows.set(s.memory_rows as i64);
                drop(s);
                Wal::delete_through(&self.wal_dir, closed).map_err(io)?;
                tracing::debug!(elapsed = ?started.elapsed(), "flushed presence to Parquet");
                Ok(())
            }
            Err(e) => {
                // Back in front of what came meanwhile; the WAL still holds them.
                let later = std::mem::take(&mut s.memory);
                s.memory = rows;
                s.memory.extend(later);
                s.memory_rows = s.memory.iter().map(RecordBatch::num_rows).sum();
                self.metrics.flush_errors.inc();
                Err(io(e))
            }
        }
    }

    /// The write-name fence of the presence files ([`crate::remote`]).
    pub(crate) fn names(&self) -> &Mutex<crate::state::WriteNames> {
        &self.names
    }

    /// Runs `f` on the file list under its lock.
    pub(crate) fn with_files<T>(&self, f: impl FnOnce(&mut Vec<FileMeta>) -> T) -> T {
        f(&mut self.state.write().files)
    }

    /// Deletes the files written more than the retention ago (the spans' rule).
    pub fn apply_retention(&self) {
        let expired = take_expired(&mut self.state.write().files, self.config.retention);
        delete_files(expired);
    }

    /// Stops the flush thread and flushes (blocking).
    pub fn close(&self) {
        self.stop.lock().take();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
        if let Err(e) = self.flush_closing() {
            tracing::error!(error = %e, "presence flush at close failed; the WAL keeps the rows");
        }
    }

    fn flush_closing(&self) -> Result<(), StoreError> {
        if self.writer.lock().wal.is_some() {
            self.flush()?;
            self.writer.lock().wal = None;
        }
        Ok(())
    }

    /// Stops the flush thread without flushing (the store was dropped unclosed: the WAL holds
    /// every acknowledged row).
    pub(crate) fn stop(&self) {
        self.stop.lock().take();
    }

    /// Memory and files as a scan sees them now.
    pub fn snapshot(&self) -> PresenceSnapshot {
        let s = self.state.read();
        let mut memory = s.frozen.clone();
        memory.extend(s.memory.iter().cloned());
        PresenceSnapshot {
            memory,
            files: s.files.clone(),
        }
    }

    /// The rows with `lo <= time_unix_nano <= hi`, from memory and files (files pruned by
    /// hour), in the current `presence` schema.
    ///
    /// # Errors
    /// I/O and Parquet errors reading a file.
    pub fn rows_in(&self, lo: i64, hi: i64) -> Result<Vec<RecordBatch>, StoreError> {
        let snap = self.snapshot();
        let mut out = Vec::new();
        for b in &snap.memory {
            let b = files::in_range(b, lo, hi).map_err(io)?;
            if b.num_rows() > 0 {
                out.push(b);
            }
        }
        for f in snap.files.iter().filter(|f| f.overlaps(lo, hi)) {
            f.ensure_local().map_err(io)?;
            out.extend(files::read_file(&f.path, lo, hi).map_err(io)?);
        }
        Ok(out)
    }

    /// Each instance's presence in `lo..=hi`: its distinct signal times and signals, and its
    /// app, colour and lane from its latest row; by instance id.
    ///
    /// # Errors
    /// As [`PresenceLog::rows_in`].
    pub fn instances_in(&self, lo: i64, hi: i64) -> Result<Vec<InstancePresence>, StoreError> {
        let mut by: BTreeMap<String, (i64, InstancePresence)> = BTreeMap::new();
        for b in self.rows_in(lo, hi)? {
            let s = |name| b.column_by_name(name).map(|c| c.as_string::<i32>());
            let (Some(inst), Some(app), Some(color), Some(lane), Some(rule), Some(signal)) = (
                s(col::INSTANCE_ID),
                s(col::SERVICE_NAME),
                s(col::COLOR),
                s(col::LANE),
                s(col::LANE_RULE),
                s(col::SIGNAL),
            ) else {
                return Err(StoreError::Io("presence rows of another schema".into()));
            };
            let Some(time) = b
                .column_by_name(col::TIME_UNIX_NANO)
                .and_then(|c| c.as_primitive_opt::<Int64Type>())
            else {
                return Err(StoreError::Io("presence rows of another schema".into()));
            };
            let opt =
                |a: &arrow::array::StringArray, i| a.is_valid(i).then(|| a.value(i).to_owned());
            for i in 0..b.num_rows() {
                let t = time.value(i);
                let (latest, p) = by.entry(inst.value(i).to_owned()).or_insert_with(|| {
                    (
                        i64::MIN,
                        InstancePresence {
                            instance_id: inst.value(i).to_owned(),
                            service_name: String::new(),
                            color: String::new(),
                            lane: None,
                            lane_rule: None,
                            signals: BTreeSet::new(),
                            times: Vec::new(),
                        },
                    )
                });
                if t >= *latest {
                    *latest = t;
                    p.service_name = app.value(i).to_owned();
                    p.color = color.value(i).to_owned();
                    p.lane = opt(lane, i);
                    p.lane_rule = opt(rule, i);
                }
                p.signals.extend(PresenceSignal::parse(signal.value(i)));
                p.times.push(t);
            }
        }
        Ok(by
            .into_values()
            .map(|(_, mut p)| {
                p.times.sort_unstable();
                p.times.dedup();
                p
            })
            .collect())
    }
}

impl Writer {
    /// The rows of `batch` not sent within [`RECENT`], and the keys this call remembered (to
    /// forget if the write fails).
    fn filter(
        &mut self,
        batch: &RecordBatch,
    ) -> Result<(Option<RecordBatch>, Vec<RowKey>), StoreError> {
        let now = Instant::now();
        if self
            .swept
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(60))
        {
            self.recent.retain(|_, at| now.duration_since(*at) < RECENT);
            self.swept = Some(now);
        }
        let s = |name| batch.column_by_name(name).map(|c| c.as_string::<i32>());
        let (Some(inst), Some(signal), Some(time)) = (
            s(col::INSTANCE_ID),
            s(col::SIGNAL),
            batch
                .column_by_name(col::TIME_UNIX_NANO)
                .and_then(|c| c.as_primitive_opt::<Int64Type>()),
        ) else {
            return Err(StoreError::Io("presence rows of another schema".into()));
        };
        let mut keep = Vec::with_capacity(batch.num_rows());
        let mut inserted = Vec::new();
        for i in 0..batch.num_rows() {
            let key = (
                inst.value(i).to_owned(),
                signal.value(i).to_owned(),
                time.value(i),
            );
            let fresh = self
                .recent
                .get(&key)
                .is_none_or(|at| now.duration_since(*at) >= RECENT);
            keep.push(fresh);
            if fresh {
                self.recent.insert(key.clone(), now);
                inserted.push(key);
            }
        }
        let kept = if inserted.is_empty() {
            None
        } else if inserted.len() == batch.num_rows() {
            Some(batch.clone())
        } else {
            let mask = arrow::array::BooleanArray::from(keep);
            Some(arrow::compute::filter_record_batch(batch, &mask).map_err(io)?)
        };
        Ok((kept, inserted))
    }
}

/// The flush thread: flushes every `tick` (at most the flush interval) and applies retention
/// once a minute, until the log is dropped or its stop sender is.
fn flush_loop(log: &Weak<PresenceLog>, stop: &mpsc::Receiver<()>, tick: Duration) {
    let mut last_retention: Option<Instant> = None;
    loop {
        match stop.recv_timeout(tick) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let Some(log) = log.upgrade() else { return };
        if let Err(e) = log.flush() {
            tracing::error!(error = %e, "presence flush failed; the rows stay in memory and the WAL");
        }
        if last_retention.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            last_retention = Some(Instant::now());
            log.apply_retention();
        }
    }
}

#[cfg(test)]
mod tests;
