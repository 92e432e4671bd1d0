//! Loading the analyzer's spans with a cache per Parquet file.
//!
//! The store's Parquet files never change once written (a new flush writes a new file;
//! retention deletes whole files), so the analyzer's records of a file ([`Loader`] state) can
//! be kept and reused by every later load whose range overlaps it. A load then reads only
//! the files it has not seen and the memory segments (the last flush interval of data), and
//! merges the parts: the same [`Spans`] as [`super::load::load`] over the same range, without
//! scanning and converting the hour again. The dashboard's analyses use it: a range asked for
//! the first time costs a merge and the detections, not a scan.
//!
//! The second load of the same list of files also keeps their merge order (the sorted keys of
//! all their spans, 40 bytes per span, for the last two lists): a later range over those files
//! filters it instead of sorting again, and only the memory segments' keys are merged in.
//!
//! Memory: at most the records [`SpanCache::new`] is given (one [`super::load::SpanRec`] each)
//! are kept; the least recently used files go first, and each load drops the files no longer
//! in the store.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use dyeline_control::Timeline;
use dyeline_store::files::{FileMeta, HOUR_NS};
use dyeline_store::table::SpansTable;

use futures::{StreamExt, TryStreamExt};

use super::load::{LOAD_COLUMN_NAMES, Loader, MergeKey, PARALLEL_COPY_MIN, Spans, in_load_order};
use crate::sql::SqlError;

/// Records kept by default: about an hour at 3,000 spans/s would not fit; an hour of
/// `dyeline demo` (about 330,000) does several times over.
pub const DEFAULT_MAX_SPANS: usize = 2_000_000;

/// Merge orders kept (the most recently used): the files of a live range and of one older
/// range. At most 40 bytes per record the cache may hold, each.
const ORDERS_KEPT: usize = 2;

struct Entry {
    part: Arc<Loader>,
    used: u64,
}

/// The merge order of a list of files: the sorted [`MergeKey`]s of all their spans (part `i`
/// is the list's file `i`), made the second time a load reads that list, so a range never
/// asked before filters it instead of sorting its spans again (a one-off load, like
/// `dyeline analyze`, never pays for it).
struct Order {
    files: Vec<PathBuf>,
    keys: Option<Arc<Vec<MergeKey>>>,
}

#[derive(Default)]
struct Inner {
    files: HashMap<PathBuf, Entry>,
    tick: u64,
    /// Least recently used first.
    orders: Vec<Order>,
}

impl Inner {
    /// Records held (summed, not kept: a few dozen files per hour).
    fn spans(&self) -> usize {
        self.files.values().map(|e| e.part.len()).sum()
    }
}

/// The analyzer's records of recently read Parquet files, keyed by path.
pub struct SpanCache {
    max_spans: usize,
    inner: Mutex<Inner>,
}

impl Default for SpanCache {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_SPANS)
    }
}

impl SpanCache {
    /// A cache keeping at most `max_spans` records (a single file larger than that is still
    /// kept, alone).
    pub fn new(max_spans: usize) -> Self {
        Self {
            max_spans,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The state stays consistent whatever panicked while holding the lock.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// (files, records) held now.
    pub fn held(&self) -> (usize, usize) {
        let g = self.lock();
        (g.files.len(), g.spans())
    }

    /// Merge orders held (made for a list of files read twice).
    pub fn orders(&self) -> usize {
        self.lock()
            .orders
            .iter()
            .filter(|o| o.keys.is_some())
            .count()
    }

    fn get(&self, path: &PathBuf) -> Option<Arc<Loader>> {
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        g.files.get_mut(path).map(|e| {
            e.used = tick;
            Arc::clone(&e.part)
        })
    }

    /// Keeps `part` for `path`, then drops the least recently used files until at most
    /// `max_spans` records are held.
    fn put(&self, path: PathBuf, part: Arc<Loader>) {
        let mut g = self.lock();
        g.tick += 1;
        let used = g.tick;
        g.files.insert(path, Entry { part, used });
        let mut spans = g.spans();
        while spans > self.max_spans && g.files.len() > 1 {
            let Some(oldest) = g
                .files
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(p, _)| p.clone())
            else {
                break;
            };
            if let Some(e) = g.files.remove(&oldest) {
                spans -= e.part.len();
            }
        }
    }

    /// Drops the files that are no longer in the store (`live`: its files now), and the
    /// merge orders of lists holding one.
    fn keep_only(&self, live: &[FileMeta]) {
        let live: std::collections::HashSet<&PathBuf> = live.iter().map(|f| &f.path).collect();
        let mut g = self.lock();
        g.files.retain(|p, _| live.contains(p));
        g.orders
            .retain(|o| o.files.iter().all(|f| live.contains(f)));
    }

    /// The merge order of `files` (whose parts are `parts`, same order), when a load read
    /// the same list before and the list holds at most the cache's `max_spans`; `None`
    /// otherwise (the first time, the list is noted).
    fn order(&self, files: &[PathBuf], parts: &[&Loader]) -> Option<Arc<Vec<MergeKey>>> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        {
            let mut g = self.lock();
            match g.orders.iter().position(|o| o.files == files) {
                Some(i) => {
                    let o = g.orders.remove(i);
                    let keys = o.keys.clone();
                    g.orders.push(o);
                    if keys.is_some() || total > self.max_spans {
                        return keys;
                    }
                }
                None => {
                    g.orders.push(Order {
                        files: files.to_vec(),
                        keys: None,
                    });
                    if g.orders.len() > ORDERS_KEPT {
                        g.orders.remove(0);
                    }
                    return None;
                }
            }
        }
        let mut keys = Vec::with_capacity(total);
        for (i, p) in parts.iter().enumerate() {
            p.keys_in(i as u32, i64::MIN, i64::MAX, &mut keys);
        }
        keys.sort();
        let keys = Arc::new(keys);
        let mut g = self.lock();
        if let Some(o) = g.orders.iter_mut().find(|o| o.files == files) {
            o.keys = Some(Arc::clone(&keys));
        }
        Some(keys)
    }
}

/// A file's path and its part.
type CachedPart = (PathBuf, Arc<Loader>);

/// Reads the analyzer's columns of one Parquet file into a [`Loader`].
fn read_file(path: &std::path::Path) -> Result<Loader, SqlError> {
    let err = |e: &dyn std::fmt::Display| SqlError::Internal(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| err(&e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| err(&e))?;
    let arrow_schema = builder.schema().clone();
    let roots = LOAD_COLUMN_NAMES
        .iter()
        .map(|n| arrow_schema.index_of(n).map_err(|e| err(&e)))
        .collect::<Result<Vec<_>, _>>()?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(8192)
        .build()
        .map_err(|e| err(&e))?;
    let mut part = Loader::default();
    for batch in reader {
        let batch = batch.map_err(|e| err(&e))?;
        part.push(&in_load_order(&batch)?)?;
    }
    part.seal();
    Ok(part)
}

/// The spans starting in `from..to` (Unix ns; `None`: unbounded), as
/// [`super::load::load`] returns them, reading through `cache`.
///
/// # Errors
/// [`SqlError::Internal`] when a file or segment cannot be read (a file deleted by retention
/// between the snapshot and the read is skipped: its spans are past retention).
pub async fn load_cached(
    table: &SpansTable,
    cache: &Arc<SpanCache>,
    timeline: &Timeline,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<Spans, SqlError> {
    let lo = from.unwrap_or(i64::MIN);
    let hi = to.map_or(i64::MAX, |t| t.saturating_sub(1));
    let snap = table.snapshot();
    let started = std::time::Instant::now();
    let overlapping: Vec<PathBuf> = snap
        .files
        .iter()
        .filter(|f| {
            let end = f.hour_start_unix_nano.saturating_add(HOUR_NS - 1);
            f.hour_start_unix_nano <= hi && end >= lo
        })
        .map(|f| f.path.clone())
        .collect();
    // Files not cached yet are read and converted on the blocking pool, as many at a time as
    // there are cores (each read is one thread's work: decompress, decode, convert, sort).
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut read = 0usize;
    let loaded: Vec<Option<CachedPart>> = futures::stream::iter(overlapping)
        .map(|path: PathBuf| {
            let cached = cache.get(&path);
            let cache = Arc::clone(cache);
            async move {
                if let Some(p) = cached {
                    return Ok((Some((path, p)), false));
                }
                let read_path = path.clone();
                let part = tokio::task::spawn_blocking(move || read_file(&read_path))
                    .await
                    .map_err(|e| SqlError::Internal(e.to_string()))?;
                match part {
                    Ok(part) => {
                        let part = Arc::new(part);
                        cache.put(path.clone(), Arc::clone(&part));
                        Ok((Some((path, part)), true))
                    }
                    // Deleted by retention since the snapshot: its spans are past retention.
                    Err(_) if !path.exists() => Ok((None, false)),
                    Err(e) => Err(e),
                }
            }
        })
        .buffered(threads)
        .map(|r: Result<(Option<CachedPart>, bool), SqlError>| {
            r.map(|(p, fresh)| {
                read += usize::from(fresh);
                p
            })
        })
        .try_collect()
        .await?;
    let (paths, parts): (Vec<PathBuf>, Vec<Arc<Loader>>) = loaded.into_iter().flatten().unzip();
    cache.keep_only(&snap.files);
    let segments: Vec<_> = snap
        .segments
        .into_iter()
        .filter(|s| s.start_range().is_some_and(|(a, b)| a <= hi && b >= lo))
        .collect();
    let memory = tokio::task::spawn_blocking(move || -> Result<Loader, SqlError> {
        let mut part = Loader::default();
        for s in &segments {
            let batch = s.decode().map_err(|e| SqlError::Internal(e.to_string()))?;
            part.push(&in_load_order(&batch)?)?;
        }
        part.sort();
        Ok(part)
    })
    .await
    .map_err(|e| SqlError::Internal(e.to_string()))??;
    let gathered = started.elapsed();
    let mut refs: Vec<&Loader> = parts.iter().map(|p| &**p).collect();
    let order = cache.order(&paths, &refs);
    let memory_part = refs.len() as u32;
    refs.push(&memory);
    let spans = match &order {
        // The files' order filtered to the range, then the memory's keys: two sorted runs,
        // which the sort merges in one pass.
        Some(order) => {
            let mut keys: Vec<MergeKey> = order
                .iter()
                .filter(|k| (lo..=hi).contains(&k.1))
                .copied()
                .collect();
            memory.keys_in(memory_part, lo, hi, &mut keys);
            keys.sort();
            Loader::finish_keys(&refs, &keys, lo, hi, timeline, PARALLEL_COPY_MIN)
        }
        None => Loader::merge_finish(&refs, lo, hi, timeline),
    };
    tracing::debug!(
        spans = spans.spans.len(),
        files = parts.len(),
        files_read = read,
        memory_spans = memory.len(),
        gather_ms = gathered.as_secs_f64() * 1e3,
        ordered = order.is_some(),
        merge_ms = (started.elapsed() - gathered).as_secs_f64() * 1e3,
        "cached load"
    );
    Ok(spans)
}
