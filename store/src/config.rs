//! The store's settings ([`StoreConfig`], [`FsyncPolicy`]) and its fixed thresholds: when plain
//! rows are sealed ([`SEAL_ROWS`], [`SEAL_BYTES`]) and how long the duplicate filter keeps the
//! keys of a quiet hour ([`DUPLICATE_FILTER_QUIET`]).

use std::path::PathBuf;
use std::time::Duration;

/// When the WAL is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FsyncPolicy {
    /// fsync once per commit group, before the group is acknowledged (default).
    Always,
    /// Leave it to the OS: acknowledged data survives a process crash, not a power loss.
    Never,
}

/// Store settings.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Root data directory (`wal/` and `spans/` are created under it).
    pub data_dir: PathBuf,
    /// WAL fsync policy.
    pub fsync: FsyncPolicy,
    /// Memory is flushed to Parquet at least this often.
    pub flush_interval: Duration,
    /// … or once it holds this many rows.
    pub flush_max_rows: usize,
    /// Parquet files are deleted this long after they were written (default 7 days).
    pub retention: Duration,
    /// Writes waiting for the writer thread before new ones are refused as saturated.
    pub queue_capacity: usize,
    /// Bytes the rows held in memory may take (sealed, plain, and frozen for a flush:
    /// `dyeline_store_memory_bytes`) before new writes are refused as saturated (HTTP 429,
    /// gRPC UNAVAILABLE, with Retry-After), and a flush starts at once. Without it, writes
    /// arriving faster than the flusher seals and writes them (more receiving cores than one
    /// flusher keeps up with, a disk that refuses the flush) would grow memory without bound.
    /// [`Store::write_waiting`] (import) waits instead. Default 1 GiB.
    ///
    /// [`Store::write_waiting`]: crate::Store::write_waiting
    pub max_memory_bytes: usize,
    /// zstd level of Parquet (sealed memory and files). Default 1: on release-walk it wrote
    /// 29.3 bytes per span against 32.5 at level 3, and sealed loadgen rows about a quarter
    /// faster (`decode_floor --zstd-level`).
    pub zstd_level: i32,
    /// When false, nothing is written to disk (WAL and Parquet off; for benchmarks only).
    pub persist: bool,
    /// Open for reading only (`dyeline sql`, `analyze` beside a running server): the WAL is
    /// replayed into memory but nothing is written, flushed or deleted; writes are refused.
    pub read_only: bool,
    /// Bytes the Parquet files' trace-id indexes ([`trace_index`]) may take in memory, 8 per
    /// distinct trace per file. Files ordered by hour, then write time, newest first, keep
    /// theirs while the running total fits ([`trim_trace_indexes`]); every older file's is
    /// dropped (not rebuilt until the next start), and a trace lookup then opens that file
    /// instead of skipping it. Without a bound the indexes of a week of files grow with the
    /// traffic (0.7 GB a day per 1,000 new traces per second). Default 256 MiB.
    ///
    /// [`trace_index`]: crate::trace_index
    /// [`trim_trace_indexes`]: crate::trim_trace_indexes
    pub trace_index_max_bytes: usize,
    /// Merge each closed hour's files into few large ones ([`crate::compact`]). Default on.
    pub compaction: bool,
    /// An hour is compacted once the wall clock is this far past its end (spans arriving
    /// late still land in it first). Default 10 min.
    pub compaction_lateness: Duration,
    /// Compacted files are cut at about this many bytes, and an hour is compacted while it
    /// holds more files than `ceil(its bytes / this)`. Default 512 MiB.
    pub compaction_target_bytes: u64,
    /// The files a compaction replaced are deleted this long after the swap, so a query that
    /// took its snapshot before (in this process, or a read-only one on the same directory)
    /// can still read them. Default 65 min: longer than the longest SQL timeout (1 h).
    pub compaction_grace: Duration,
    /// With shared storage: writes are refused as saturated while the local Parquet files
    /// not uploaded yet take this many bytes or more (the bucket or catalog down). `u64::MAX`
    /// (the default) is no bound: without shared storage the local files are the data.
    pub staging_max_bytes: u64,
}

impl StoreConfig {
    /// Defaults for `data_dir`: fsync always, flush every 60 s or 500,000 rows, 7 days
    /// retention, 256 queued writes, 1 GiB of rows in memory, zstd level 1, 256 MiB of file
    /// trace indexes; compaction on (10 min lateness, 512 MiB files, 65 min grace).
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            fsync: FsyncPolicy::Always,
            flush_interval: Duration::from_secs(60),
            flush_max_rows: 500_000,
            retention: Duration::from_secs(7 * 24 * 3600),
            queue_capacity: 256,
            max_memory_bytes: 1 << 30,
            zstd_level: 1,
            persist: true,
            read_only: false,
            trace_index_max_bytes: 256 * 1024 * 1024,
            compaction: true,
            compaction_lateness: Duration::from_secs(600),
            compaction_target_bytes: 512 * 1024 * 1024,
            compaction_grace: Duration::from_secs(65 * 60),
            staging_max_bytes: u64::MAX,
        }
    }
}

/// Plain rows (as writes brought them) are sealed once this many have gathered: encoded
/// into one in-memory Parquet file per hour ([`seal::encode_parts`]), rows sorted by trace,
/// which a flush then copies into the hour's file as they are. About 50–75 MB of plain rows at
/// most meanwhile (loadgen's spans take 760 B each as Arrow), then tens of bytes per span.
/// Each sealed part is a row group of the files, so this is also their row-group size under
/// steady load; a trace whose spans straddle two seals sits in two row groups.
///
/// [`seal::encode_parts`]: crate::seal::encode_parts
pub const SEAL_ROWS: usize = 64 * 1024;

/// … or once the plain rows take this many bytes, whichever comes first: small writes carry
/// a batch's fixed costs for few rows (a 20-span request took about 3 KB per span plain), so
/// rows alone would not bound the memory they hold before a seal.
pub const SEAL_BYTES: usize = 32 * 1024 * 1024;

/// The duplicate filter drops an hour's key set once no span of that hour has arrived for this
/// long, or for 4 × `flush_interval` if longer (by then the hour's rows are in Parquet, where a
/// later span of the hour is looked up by its trace: [`dedupe`]). With spans arriving on time an
/// hour's set lives its hour and about 11 minutes more (the sweep runs once a minute), so the
/// filter holds at most about 71 minutes of keys. It was 1 h, and two hours of keys, while a
/// span for a dropped hour reloaded every key of the hour.
///
/// [`dedupe`]: crate::dedupe
pub const DUPLICATE_FILTER_QUIET: Duration = Duration::from_secs(600);
