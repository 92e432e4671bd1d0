//! Shared compaction: the hourly objects of every node merged into few large ones, by any node
//! (`[store] compaction` on, with shared storage), one hour at a time.
//!
//! An hour is due once it ended `[store] compaction_lateness` ago and holds more live files
//! than `ceil(bytes / compaction_target_bytes)`, one of them not a compaction's output, and
//! its last compaction is at least `[store] compaction_grace` old (late spans uploaded into a
//! compacted hour wait beside its outputs rather than have the whole hour merged again at
//! every pass: [`Catalog::compaction_due`]). The
//! compacting node claims the hour's files (`FOR UPDATE SKIP LOCKED`: another node's
//! compaction of the same hour skips them), fetches them into a scratch directory, merges them
//! with the single-node store's merge (sorted by trace id, one row per span key, outputs cut
//! at about the target between traces), puts each output and its trace-id index under fresh
//! keys, and in the claim's one transaction inserts the outputs and marks the inputs deleted.
//! Readers list one side or the other; the inputs' objects are deleted by the maintenance pass
//! once no reader can hold them ([`crate::maintenance`]). A failure or crash rolls the claim
//! back: the inputs stay, the outputs already put are orphans for the janitor.
//!
//! Does not own the merge itself (`dyeline_store::compact::merge`) or when passes run (the
//! uploader's loop).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dyeline_store::RemoteObjects;
use dyeline_store::compact::merge;

use crate::cache::ObjectCache;
use crate::catalog::{Catalog, FileKind};
use crate::node::NodeId;
use crate::put::{UploadError, put_rows};

/// The scratch directory of compactions under a data directory.
pub const SCRATCH_DIR: &str = "cache/compaction";

/// At most this many hours are compacted per pass.
const HOURS_PER_PASS: u32 = 4;

/// The compaction's settings (`[store]`).
#[derive(Debug, Clone, Copy)]
pub struct CompactionSettings {
    /// `compaction_lateness`.
    pub lateness: Duration,
    /// `compaction_target_bytes`.
    pub target_bytes: u64,
    /// How long after its last compaction an hour is not merged again (`compaction_grace`).
    pub cooldown: Duration,
    /// The store's zstd level.
    pub zstd_level: i32,
}

/// One hour compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourCompacted {
    /// The hour (Unix ns).
    pub hour_unix_nano: i64,
    /// Files before and after.
    pub files: (usize, usize),
    /// Bytes before and after.
    pub bytes: (u64, u64),
    /// Rows written, and rows dropped as duplicates of a span key.
    pub rows: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
}

fn local(path: &Path, e: impl std::fmt::Display) -> UploadError {
    UploadError::Local {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// One pass: up to [`HOURS_PER_PASS`] due hours of spans compacted, as `node` at `epoch`,
/// with scratch files under `data_dir`/[`SCRATCH_DIR`].
///
/// # Errors
/// The catalog, the object store or the merge failing; the hour stays as it was.
pub async fn run_pass(
    catalog: &Catalog,
    cache: &Arc<ObjectCache>,
    node: &NodeId,
    epoch: i64,
    data_dir: &Path,
    settings: CompactionSettings,
) -> Result<Vec<HourCompacted>, UploadError> {
    let now = dyeline_model::time::now_unix_nano();
    let lateness = i64::try_from(settings.lateness.as_nanos()).unwrap_or(i64::MAX);
    let due = catalog
        .compaction_due(
            FileKind::Spans,
            now.saturating_sub(lateness),
            settings.target_bytes,
            settings.cooldown,
            HOURS_PER_PASS,
        )
        .await?;
    let mut done = Vec::new();
    for hour in due {
        let Some(claim) = catalog.claim_hour(FileKind::Spans, hour).await? else {
            continue;
        };
        let scratch = data_dir
            .join(SCRATCH_DIR)
            .join(ulid::Ulid::new().to_string());
        let result = compact_claim(claim, cache, node, epoch, &scratch, settings).await;
        let _ = tokio::fs::remove_dir_all(&scratch).await;
        done.push(result?);
    }
    Ok(done)
}

async fn compact_claim(
    claim: crate::catalog::compaction::HourClaim,
    cache: &Arc<ObjectCache>,
    node: &NodeId,
    epoch: i64,
    scratch: &Path,
    settings: CompactionSettings,
) -> Result<HourCompacted, UploadError> {
    let started = Instant::now();
    let hour = claim.hour_unix_nano;
    tokio::fs::create_dir_all(scratch)
        .await
        .map_err(|e| local(scratch, e))?;
    let mut inputs: Vec<PathBuf> = Vec::with_capacity(claim.inputs.len());
    let mut traces = 0usize;
    for (i, f) in claim.inputs.iter().enumerate() {
        let path = scratch.join(format!("in-{i}.parquet"));
        cache
            .fetch_to(&f.file.key, &path)
            .await
            .map_err(|e| local(&path, e))?;
        traces += usize::try_from(f.file.rows).unwrap_or(0);
        inputs.push(path);
    }
    let bytes_in: u64 = claim.inputs.iter().map(|f| f.file.bytes).sum();
    let out_dir = scratch.to_path_buf();
    let (target, level) = (settings.target_bytes, settings.zstd_level);
    // `traces` is an upper bound (rows), which only sizes the bloom filters generously.
    let merged = tokio::task::spawn_blocking(move || {
        merge(&inputs, target, level, traces, |i| {
            out_dir.join(format!("out-{i}.parquet"))
        })
    })
    .await
    .map_err(|e| local(scratch, e))?
    .map_err(|e| local(scratch, e))?;
    let store = cache.object_store();
    let mut outputs = Vec::with_capacity(merged.files.len());
    for f in &merged.files {
        let index = Some(&f.traces);
        let row = put_rows(
            store.as_ref(),
            node,
            FileKind::Spans,
            hour,
            &f.tmp,
            f.bytes,
            index,
        );
        outputs.push(row.await?);
    }
    let files_in = claim.inputs.len();
    claim.commit(node, epoch, &outputs).await?;
    let done = HourCompacted {
        hour_unix_nano: hour,
        files: (files_in, outputs.len()),
        bytes: (bytes_in, outputs.iter().map(|f| f.bytes).sum()),
        rows: merged.files.iter().map(|f| f.rows).sum(),
        duplicates: merged.duplicates,
    };
    tracing::info!(
        hour,
        files_before = done.files.0,
        files_after = done.files.1,
        bytes_before = done.bytes.0,
        bytes_after = done.bytes.1,
        duplicates = done.duplicates,
        ms = started.elapsed().as_millis() as u64,
        "shared compaction: hour compacted"
    );
    Ok(done)
}
