//! The per-file path in: the analyzer's spans read Parquet file by Parquet file, with a
//! cache per file or without.
//!
//! The store's Parquet files never change once written (a new flush writes a new file;
//! retention deletes whole files), so the analyzer's records of a file ([`Loader`] state) can
//! be kept and reused by every later load whose range overlaps it. A load then reads only
//! the files it has not seen and the memory segments (the last flush interval of data), and
//! merges the parts: the same [`Spans`] as [`super::scan::load`] over the same range, without
//! scanning and converting the hour again. The dashboard's analyses use it: a range asked for
//! the first time costs a merge and the detections, not a scan.
//!
//! Memory: at most the records [`SpanCache::new`] is given (one [`SpanRec`] each)
//! are kept; the least recently used files go first, and each load drops the files no longer
//! in the store.
//!
//! Without a cache: [`load_once`] (a one-off analysis: `dyeline analyze`, the findings API)
//! reads every file on its own core and takes the parts instead of copying them, and
//! [`count_windows_once`] (the windowed detections only) counts each file as it is read,
//! keeping no record per span.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dyeline_model::release::Timeline;
use dyeline_store::file_read::{DICTIONARY_COLUMNS, FileBatches, FileSource};
use dyeline_store::layout::FileMeta;
use dyeline_store::table::SpansTable;

use futures::{StreamExt, TryStreamExt};

use super::columns::LoadColumns;
use super::loader::Loader;
use crate::analyze::config::AnalyzerConfig;
use crate::analyze::detect::windows::WindowCounts;
use crate::analyze::detect::windows::counter::WindowCounter;
use crate::analyze::error::AnalyzeError;
use crate::analyze::spans::EnvironmentFilter;
#[cfg(doc)]
use crate::analyze::spans::SpanRec;
use crate::analyze::spans::Spans;

/// Records kept by default: about an hour at 3,000 spans/s would not fit; an hour of
/// `dyeline demo` (about 330,000) does several times over.
pub const DEFAULT_MAX_SPANS: usize = 2_000_000;

struct Entry {
    part: Arc<Loader>,
    used: u64,
}

#[derive(Default)]
struct Inner {
    files: HashMap<PathBuf, Entry>,
    tick: u64,
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

    fn get(&self, path: &Path) -> Option<Arc<Loader>> {
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

    /// Drops the files that are no longer in the store (`live`: its files now).
    fn keep_only(&self, live: &[FileMeta]) {
        let live: std::collections::HashSet<&PathBuf> = live.iter().map(|f| &f.path).collect();
        self.lock().files.retain(|p, _| live.contains(p));
    }
}

/// A reader of `columns` of one store file, in batches of 8,192 rows, and the file's row
/// count. The low-cardinality string columns are read as dictionaries, as they are stored
/// ([`DICTIONARY_COLUMNS`]): no string is materialised per row, and the loader interns each
/// distinct value once.
fn open_file(file: &FileSource, columns: LoadColumns) -> Result<FileBatches, AnalyzeError> {
    file.open(columns.names(), &DICTIONARY_COLUMNS)
        .map_err(|e| AnalyzeError::read(file.path(), e))
}

/// Reads the analyzer's columns of one Parquet file into a [`Loader`].
fn read_file(file: &FileSource) -> Result<Loader, AnalyzeError> {
    let FileBatches { reader, rows } = open_file(file, LoadColumns::All)?;
    // Sized once from the file's row count: growing by doubling would copy the records and
    // touch fresh pages again at every step.
    let mut part = Loader::with_capacity(rows);
    for batch in reader {
        let batch = batch.map_err(|e| AnalyzeError::read(file.path(), e))?;
        part.push(&batch)?;
    }
    part.seal();
    Ok(part)
}

/// The windowed counts of the spans starting in `lo..=hi` of one Parquet file
/// ([`WindowCounter`]), reading only [`LoadColumns::Windows`].
fn count_file(
    file: &FileSource,
    timeline: &Timeline,
    config: &AnalyzerConfig,
    lo: i64,
    hi: i64,
    filter: &EnvironmentFilter,
) -> Result<WindowCounts, AnalyzeError> {
    let FileBatches { reader, .. } = open_file(file, LoadColumns::Windows)?;
    let mut counter = WindowCounter::new(timeline, config, lo, hi, filter.clone());
    for batch in reader {
        let batch = batch.map_err(|e| AnalyzeError::read(file.path(), e))?;
        counter.push(&batch)?;
    }
    Ok(counter.finish())
}

/// The four windowed detections' counts (domain §6.3–6) of the spans starting in
/// `from..to` (Unix ns; `None`: unbounded): the files overlapping the range read on every
/// core, each counted as it is read ([`WindowCounter`]) with only the columns those
/// detections use, then the memory segments, and the counts merged. What
/// [`find`] counts over [`load_once`]'s spans, without holding a record per span: the
/// windowed-only `dyeline analyze`.
///
/// [`find`]: crate::analyze::detect::windows::find
///
/// # Errors
/// As [`load_cached`].
pub async fn count_windows_once(
    table: &SpansTable,
    timeline: &Timeline,
    config: &AnalyzerConfig,
    from: Option<i64>,
    to: Option<i64>,
    filter: &EnvironmentFilter,
) -> Result<WindowCounts, AnalyzeError> {
    let (lo, hi) = inclusive(from, to);
    let started = std::time::Instant::now();
    let snap = table.snapshot();
    let overlapping = snap.files_in(lo, hi);
    let files = overlapping.len();
    // One copy of the timeline and thresholds, shared by the blocking reads. (A task per row
    // group instead of per file measured slower: each opens the file and parses its footer.)
    let shared = Arc::new((timeline.clone(), config.clone(), filter.clone()));
    let reading = Arc::clone(&shared);
    let mut parts: Vec<WindowCounts> = read_on_cores(overlapping, move |file| {
        count_file(file, &reading.0, &reading.1, lo, hi, &reading.2)
    })
    .await?
    .into_iter()
    .flatten()
    .collect();
    let segments = snap.segments_in(lo, hi);
    let memory = tokio::task::spawn_blocking(move || -> Result<WindowCounts, AnalyzeError> {
        let mut counter = WindowCounter::new(&shared.0, &shared.1, lo, hi, shared.2.clone());
        for s in &segments {
            let batch = s
                .decode()
                .map_err(|e| AnalyzeError::Internal(e.to_string()))?;
            counter.push(&batch)?;
        }
        Ok(counter.finish())
    })
    .await
    .map_err(|e| AnalyzeError::Internal(e.to_string()))??;
    parts.push(memory);
    let gathered = started.elapsed();
    let counts = WindowCounts::merge(parts);
    tracing::debug!(
        spans = counts.spans,
        files,
        gather_ms = gathered.as_secs_f64() * 1e3,
        merge_ms = (started.elapsed() - gathered).as_secs_f64() * 1e3,
        "window counts"
    );
    Ok(counts)
}

/// The range `from..to` (Unix ns, `to` exclusive; `None` is unbounded) as the inclusive
/// `lo..=hi` the loads filter with.
fn inclusive(from: Option<i64>, to: Option<i64>) -> (i64, i64) {
    (
        from.unwrap_or(i64::MIN),
        to.map_or(i64::MAX, |t| t.saturating_sub(1)),
    )
}

/// `read` of each of `files` on the blocking pool, as many at a time as there
/// are cores, in the order of `files`; `None` for a file deleted since the snapshot (by
/// retention: its spans are past retention). The largest are started first and the next as
/// soon as any read ends: in file order, with results taken in order, a core sat idle while
/// a large file ahead of a finished small one was still being read, and a large file read
/// last ran alone.
///
/// # Errors
/// The first failed read of a file that still exists.
async fn read_on_cores<T: Send + 'static>(
    files: Vec<FileSource>,
    read: impl Fn(&FileSource) -> Result<T, AnalyzeError> + Send + Sync + 'static,
) -> Result<Vec<Option<T>>, AnalyzeError> {
    let read = Arc::new(read);
    let mut order: Vec<(usize, u64, FileSource)> = files
        .into_iter()
        .enumerate()
        .map(|(i, file)| (i, file.size(), file))
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut done: Vec<(usize, Option<T>)> = futures::stream::iter(order)
        .map(|(at, _, file)| {
            let read = Arc::clone(&read);
            async move {
                let path = file.path().to_path_buf();
                // An object of shared storage that cannot be read is an error, not retention.
                let local = file.meta().is_local();
                let result = tokio::task::spawn_blocking(move || read(&file))
                    .await
                    .map_err(|e| AnalyzeError::Internal(e.to_string()))?;
                match result {
                    Ok(v) => Ok((at, Some(v))),
                    Err(_) if local && !path.exists() => Ok((at, None)),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(threads)
        .try_collect()
        .await?;
    done.sort_by_key(|(at, _)| *at);
    Ok(done.into_iter().map(|(_, v)| v).collect())
}

/// The spans starting in `from..to` (Unix ns; `None`: unbounded), as
/// [`super::scan::load`] returns them up to the order of whole traces (grouped, see
/// [`Loader::merge_finish`]), reading through `cache`.
///
/// # Errors
/// [`AnalyzeError::Read`] when a file cannot be read, [`AnalyzeError::Internal`] when a
/// memory segment cannot (a file deleted by retention
/// between the snapshot and the read is skipped: its spans are past retention).
pub async fn load_cached(
    table: &SpansTable,
    cache: &Arc<SpanCache>,
    timeline: &Timeline,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<Spans, AnalyzeError> {
    load_through(table, Some(cache), timeline, from, to).await
}

/// [`load_cached`] without a cache, for a one-off analysis: each file is read, and its
/// records are taken into the result instead of copied ([`Loader::merge_owned`]), so each
/// span's record is held once.
///
/// # Errors
/// As [`load_cached`].
pub async fn load_once(
    table: &SpansTable,
    timeline: &Timeline,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<Spans, AnalyzeError> {
    load_through(table, None, timeline, from, to).await
}

/// [`load_cached`] with `cache`, else [`load_once`].
async fn load_through(
    table: &SpansTable,
    cache: Option<&Arc<SpanCache>>,
    timeline: &Timeline,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<Spans, AnalyzeError> {
    let (lo, hi) = inclusive(from, to);
    let started = std::time::Instant::now();
    let Gathered {
        parts,
        memory,
        read,
    } = gather(table, cache, lo, hi).await?;
    let gathered = started.elapsed();
    let (files, memory_spans) = (parts.len(), memory.len());
    let spans = if cache.is_some() {
        // The cache shares the parts with later loads: they are copied.
        let mut refs: Vec<&Loader> = parts.iter().map(|p| &**p).collect();
        refs.push(&memory);
        Loader::merge_finish(&refs, lo, hi, timeline)
    } else {
        // No cache holds the parts: each Arc is the only one, so it unwraps without a copy.
        let mut owned: Vec<Loader> = parts
            .into_iter()
            .map(|p| Arc::try_unwrap(p).unwrap_or_else(|shared| (*shared).clone()))
            .collect();
        owned.push(memory);
        Loader::merge_owned(owned, lo, hi, timeline)
    };
    tracing::debug!(
        spans = spans.len(),
        files,
        files_read = read,
        memory_spans,
        gather_ms = gathered.as_secs_f64() * 1e3,
        merge_ms = (started.elapsed() - gathered).as_secs_f64() * 1e3,
        "{}",
        if cache.is_some() {
            "cached load"
        } else {
            "load once"
        }
    );
    Ok(spans)
}

/// The parts of a load: one per overlapping file, and the memory segments' spans.
struct Gathered {
    parts: Vec<Arc<Loader>>,
    memory: Loader,
    /// Files read (not found in the cache).
    read: usize,
}

/// Reads the parts of the spans starting in `lo..=hi`: the overlapping files (through
/// `cache` when given) and the memory segments.
async fn gather(
    table: &SpansTable,
    cache: Option<&Arc<SpanCache>>,
    lo: i64,
    hi: i64,
) -> Result<Gathered, AnalyzeError> {
    let snap = table.snapshot();
    // The overlapping files; those not cached yet are read and converted on the blocking
    // pool (each read is one thread's work: decompress, decode, convert, sort).
    let overlapping = snap.files_in(lo, hi);
    let mut parts: Vec<Option<Arc<Loader>>> = overlapping
        .iter()
        .map(|f| cache.and_then(|c| c.get(f.path())))
        .collect();
    let (missing, to_read): (Vec<usize>, Vec<FileSource>) = overlapping
        .iter()
        .enumerate()
        .filter(|(i, _)| parts[*i].is_none())
        .map(|(i, f)| (i, f.clone()))
        .unzip();
    let fresh = read_on_cores(to_read, |file| read_file(file).map(Arc::new)).await?;
    let mut read = 0usize;
    for (i, part) in missing.into_iter().zip(fresh) {
        if let (Some(part), Some(cache)) = (&part, cache) {
            cache.put(overlapping[i].path().to_path_buf(), Arc::clone(part));
        }
        read += usize::from(part.is_some());
        parts[i] = part;
    }
    // The parts in the snapshot's file order: the merge's output order follows it.
    let parts: Vec<Arc<Loader>> = parts.into_iter().flatten().collect();
    if let Some(cache) = cache {
        cache.keep_only(&snap.files);
    }
    let segments = snap.segments_in(lo, hi);
    let memory = tokio::task::spawn_blocking(move || -> Result<Loader, AnalyzeError> {
        let mut part = Loader::default();
        for s in &segments {
            let batch = s
                .decode()
                .map_err(|e| AnalyzeError::Internal(e.to_string()))?;
            part.push(&batch)?;
        }
        part.sort();
        Ok(part)
    })
    .await
    .map_err(|e| AnalyzeError::Internal(e.to_string()))??;
    Ok(Gathered {
        parts,
        memory,
        read,
    })
}
