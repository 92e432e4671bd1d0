//! Local compaction: an hour partition's many small files merged into few large ones
//! ([`merge`]), swapped for them in the file list, with a journal so that neither a crash nor
//! a reader (in this process or a read-only one on the same directory) ever sees a row twice
//! or misses one.
//!
//! ```text
//! dyeline-compactor thread, once a minute (or Store::compact_now, `dyeline compact`):
//!   inputs whose grace has passed ─▶ deleted, then their journal
//!   for each due hour (closed + lateness, more files than ceil(bytes / target), no journal):
//!     merge its listed files ─▶ outputs under temporary names, fsynced
//!     ─▶ journal (outputs, inputs) written and fsynced ─▶ outputs renamed, directory fsynced
//!     ─▶ swap in the file list (one write lock: a snapshot holds all inputs or all outputs)
//!     ─▶ inputs kept for the grace (a query that took its snapshot before still reads them)
//! open (writable): an hour's journal left by a crash ─▶ every output there: the inputs are
//!     deleted (finish); else the outputs and their temporary files are (roll back); then the
//!     journal
//! ```
//!
//! An hour whose files are all outputs of one compaction is not compacted again, however its
//! files were cut (the cut judges the size as written, and the footer and bloom filters come
//! after); a file flushed into it later makes it due again. A compacted file carries the newest write time of its inputs in its name
//! ([`crate::layout::compacted_name`]), so retention deletes it when the newest of them would
//! have gone; an hour whose files would expire within twice the grace is left alone. An hour
//! holding a journal (inputs in their grace) is not compacted again until it is gone. Only
//! files of the store's file list are inputs: a file being written is not in it yet, and one
//! flushed into the hour while it is compacted stays beside the outputs.
//!
//! What else holds file paths: the duplicate filter (`dedupe.rs`) looks a key up in the
//! files of an hour it listed, and lists the hour again when one of them is gone; the
//! trace-index budget is applied again at the swap (the outputs bring their indexes); the
//! analyzer's per-file cache keeps only the files of the latest snapshot. Presence files are
//! not compacted (they are one row per instance and export, a few small files an hour).

mod merge;
#[cfg(test)]
mod tests;

pub use merge::{CHUNK_ROWS, MERGE_ROWS, Merged, MergedFile, merge};

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use crate::config::StoreConfig;
use crate::file_read::read_trace_index;
use crate::file_write::{sync_dir, temp_path, write_temp};
use crate::layout::{
    FileMeta, HOUR_NS, JOURNAL, Journal, compacted_name, is_compacted, now_unix_ms, read_journal,
    seq_of,
};
use crate::state::Shared;
use crate::trace_index::TraceIndex;

/// How often the `dyeline-compactor` thread looks for hours to compact.
pub const COMPACTION_TICK: Duration = Duration::from_secs(60);

/// What compacting one hour did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HourCompaction {
    /// Start of the hour partition, Unix ns.
    pub hour_start_unix_nano: i64,
    /// Files of the hour merged.
    pub files_before: usize,
    /// Files written.
    pub files_after: usize,
    /// Bytes of the files merged.
    pub bytes_before: u64,
    /// Bytes of the files written.
    pub bytes_after: u64,
    /// Rows written.
    pub rows: u64,
    /// Rows dropped as duplicates of a span key.
    pub duplicates: u64,
}

/// What one compaction pass did.
#[derive(Debug, Clone, Default)]
pub struct CompactionReport {
    /// The hours compacted, oldest first.
    pub hours: Vec<HourCompaction>,
    /// Hours whose compaction failed (their files stay as they were), with the error.
    pub failures: Vec<(i64, String)>,
    /// Replaced files deleted, their grace over.
    pub deleted_files: usize,
}

/// The compactions whose replaced files wait for their grace; one pass at a time holds it.
#[derive(Default)]
pub(crate) struct Compactor {
    pending: Vec<Pending>,
}

/// Inputs of a compaction kept until `due`, and the hour directory holding its journal.
struct Pending {
    hour: i64,
    dir: PathBuf,
    inputs: Vec<PathBuf>,
    due: Instant,
}

impl Compactor {
    /// Deletes the inputs whose grace is over at `now`, then their journals; returns the
    /// files deleted.
    fn delete_due(&mut self, now: Instant) -> usize {
        let (due, wait): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.due <= now);
        self.pending = wait;
        let mut deleted = 0;
        for p in due {
            deleted += remove_all(&p.inputs);
            if let Err(e) = sync_dir(&p.dir).and_then(|()| remove_journal(&p.dir)) {
                tracing::warn!(dir = %p.dir.display(), error = %e, "compaction: cannot remove the journal");
            }
        }
        deleted
    }
}

/// Removes `paths` (those already gone are passed over); returns how many it removed.
fn remove_all(paths: &[PathBuf]) -> usize {
    let mut removed = 0;
    for path in paths {
        match fs::remove_file(path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "compaction: cannot delete")
            }
        }
    }
    removed
}

fn write_journal(dir: &Path, journal: &Journal) -> io::Result<()> {
    let path = dir.join(JOURNAL);
    let tmp = write_temp(&path, |mut f| {
        f.write_all(journal.to_text().as_bytes())?;
        Ok(f)
    })?;
    fs::rename(tmp, &path)?;
    sync_dir(dir)
}

fn remove_journal(dir: &Path) -> io::Result<()> {
    match fs::remove_file(dir.join(JOURNAL)) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Finishes or rolls back the compactions a crash interrupted under `table_dir` (a writable
/// open, before the files are listed): for each hour directory with a journal, when every
/// output is there the inputs are deleted, else the outputs and their temporary files are;
/// then the journal.
///
/// # Errors
/// I/O errors; a journal that does not parse.
pub(crate) fn recover(table_dir: &Path) -> io::Result<()> {
    if !table_dir.exists() {
        return Ok(());
    }
    for hour in fs::read_dir(table_dir)? {
        let dir = hour?.path();
        if !dir.is_dir() {
            continue;
        }
        let Some(journal) = read_journal(&dir)? else {
            continue;
        };
        let paths =
            |names: &[String]| -> Vec<PathBuf> { names.iter().map(|n| dir.join(n)).collect() };
        let complete = journal.outputs.iter().all(|o| dir.join(o).exists());
        if complete {
            remove_all(&paths(&journal.inputs));
        } else {
            let outputs = paths(&journal.outputs);
            let temps: Vec<PathBuf> = outputs.iter().map(|o| temp_path(o)).collect();
            remove_all(&outputs);
            remove_all(&temps);
        }
        sync_dir(&dir)?;
        remove_journal(&dir)?;
        tracing::info!(
            dir = %dir.display(),
            finished = complete,
            "compaction interrupted by a crash: {}",
            if complete { "finished (inputs deleted)" } else { "rolled back (outputs deleted)" }
        );
    }
    Ok(())
}

/// The `dyeline-compactor` thread: a pass every [`COMPACTION_TICK`] until `stop` says so (or
/// its sender is dropped: the store closes), which a pass checks between hours.
pub(crate) fn compactor_loop(shared: &Shared, config: &StoreConfig, stop: &Receiver<()>) {
    let stopping = || !matches!(stop.try_recv(), Err(TryRecvError::Empty));
    loop {
        match stop.recv_timeout(COMPACTION_TICK) {
            Err(RecvTimeoutError::Timeout) => {
                run_pass(shared, config, false, &stopping);
            }
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// One pass: deletes the inputs whose grace is over, then compacts every due hour (with
/// `ignore_lateness`, every hour however recent) until `stopping()`. Failures are counted,
/// logged and reported; the hour's files stay as they were.
pub(crate) fn run_pass(
    shared: &Shared,
    config: &StoreConfig,
    ignore_lateness: bool,
    stopping: &dyn Fn() -> bool,
) -> CompactionReport {
    let mut compactor = shared.compaction.lock();
    let mut report = CompactionReport {
        deleted_files: compactor.delete_due(Instant::now()),
        ..CompactionReport::default()
    };
    for (hour, inputs) in due_hours(shared, config, ignore_lateness, &compactor) {
        if stopping() {
            break;
        }
        match compact_hour(shared, config, hour, &inputs) {
            Ok(Some((done, pending))) => {
                compactor.pending.push(pending);
                report.hours.push(done);
            }
            Ok(None) => {}
            Err(e) => {
                shared.metrics.compaction_failures.inc();
                tracing::warn!(hour, error = %e, "compaction failed; the hour's files stay as they were");
                report.failures.push((hour, e.to_string()));
            }
        }
    }
    report.deleted_files += compactor.delete_due(Instant::now());
    report
}

/// The hours due for compaction and their files (module doc).
fn due_hours(
    shared: &Shared,
    config: &StoreConfig,
    ignore_lateness: bool,
    compactor: &Compactor,
) -> Vec<(i64, Vec<FileMeta>)> {
    let mut hours: BTreeMap<i64, Vec<FileMeta>> = BTreeMap::new();
    // Objects of shared storage are compacted there, not here.
    for f in shared.state.read().files.iter().filter(|f| f.is_local()) {
        hours
            .entry(f.hour_start_unix_nano)
            .or_default()
            .push(f.clone());
    }
    let now_ms = now_unix_ms();
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let closed_before = now_ms
        .saturating_sub(ms(config.compaction_lateness))
        .saturating_mul(1_000_000);
    let target = config.compaction_target_bytes.max(1);
    hours.retain(|&hour, files| {
        let bytes: u64 = files.iter().map(|f| f.size).sum();
        let newest = files.iter().map(|f| f.written_unix_ms).max().unwrap_or(0);
        let expires = newest.saturating_add(ms(config.retention));
        // Outputs of one compaction alone are not merged again, however they were cut.
        let fresh = files.iter().any(|f| !is_compacted(&file_name(&f.path)));
        (ignore_lateness || hour.saturating_add(HOUR_NS) <= closed_before)
            && fresh
            && files.len() as u64 > bytes.div_ceil(target).max(1)
            && !compactor.pending.iter().any(|p| p.hour == hour)
            && expires > now_ms.saturating_add(2 * ms(config.compaction_grace))
    });
    hours.into_iter().collect()
}

/// Compacts the files `inputs` of `hour`: merged into new files, journaled, renamed and
/// swapped in. `None` when the inputs changed meanwhile (retention took one): nothing changed.
fn compact_hour(
    shared: &Shared,
    config: &StoreConfig,
    hour: i64,
    inputs: &[FileMeta],
) -> io::Result<Option<(HourCompaction, Pending)>> {
    let started = Instant::now();
    let Some(dir) = inputs
        .first()
        .and_then(|f| f.path.parent())
        .map(Path::to_path_buf)
    else {
        return Ok(None);
    };
    let mut indexes = Vec::with_capacity(inputs.len());
    for f in inputs {
        indexes.push(match &f.traces {
            Some(t) => Arc::clone(t),
            None => Arc::new(read_trace_index(&f.path)?),
        });
    }
    let traces = TraceIndex::union(indexes.iter().map(|t| &**t)).len();
    let names: Vec<String> = inputs.iter().map(|f| file_name(&f.path)).collect();
    let written = inputs.iter().map(|f| f.written_unix_ms).max().unwrap_or(0);
    let seq = names.iter().map(|n| seq_of(n)).max().unwrap_or(0);
    let mut stamp = now_unix_ms();
    while dir.join(compacted_name(written, seq, stamp, 0)).exists() {
        stamp += 1;
    }
    let paths: Vec<PathBuf> = inputs.iter().map(|f| f.path.clone()).collect();
    let merged = merge(
        &paths,
        config.compaction_target_bytes,
        config.zstd_level,
        traces,
        |i| dir.join(compacted_name(written, seq, stamp, i)),
    )?;
    let journal = Journal {
        outputs: merged.files.iter().map(|f| file_name(&f.path)).collect(),
        inputs: names,
    };
    let outputs: Vec<FileMeta> = merged
        .files
        .iter()
        .map(|f| FileMeta {
            path: f.path.clone(),
            hour_start_unix_nano: hour,
            written_unix_ms: written,
            size: f.bytes,
            traces: Some(Arc::new(f.traces.clone())),
            remote: None,
        })
        .collect();
    let installed = install(shared, &dir, &journal, &merged, inputs, outputs);
    match installed {
        Ok(true) => {}
        Ok(false) | Err(_) => {
            roll_back(&dir, &merged);
            return installed.map(|_| None);
        }
    }
    let done = HourCompaction {
        hour_start_unix_nano: hour,
        files_before: inputs.len(),
        files_after: merged.files.len(),
        bytes_before: inputs.iter().map(|f| f.size).sum(),
        bytes_after: merged.files.iter().map(|f| f.bytes).sum(),
        rows: merged.files.iter().map(|f| f.rows).sum(),
        duplicates: merged.duplicates,
    };
    let m = &shared.metrics;
    m.compactions.inc();
    m.compaction_input_files.inc_by(done.files_before as u64);
    m.compaction_output_files.inc_by(done.files_after as u64);
    m.compaction_input_bytes.inc_by(done.bytes_before);
    m.compaction_output_bytes.inc_by(done.bytes_after);
    m.compaction_duplicate_rows.inc_by(done.duplicates);
    m.compaction_seconds
        .observe(started.elapsed().as_secs_f64());
    tracing::info!(
        dir = %dir.display(),
        files_before = done.files_before,
        files_after = done.files_after,
        bytes_before = done.bytes_before,
        bytes_after = done.bytes_after,
        duplicates = done.duplicates,
        elapsed = ?started.elapsed(),
        "compacted an hour"
    );
    let pending = Pending {
        hour,
        dir,
        inputs: paths,
        due: Instant::now() + config.compaction_grace,
    };
    Ok(Some((done, pending)))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// True when every one of `inputs` is still in the file list.
fn all_listed(files: &[FileMeta], inputs: &[FileMeta]) -> bool {
    inputs
        .iter()
        .all(|i| files.iter().any(|f| f.path == i.path))
}

/// Journals the merge, renames its outputs into place and swaps them for `inputs` in the file
/// list; false (nothing swapped) when an input left the list meanwhile.
fn install(
    shared: &Shared,
    dir: &Path,
    journal: &Journal,
    merged: &Merged,
    inputs: &[FileMeta],
    outputs: Vec<FileMeta>,
) -> io::Result<bool> {
    if !all_listed(&shared.state.read().files, inputs) {
        return Ok(false);
    }
    write_journal(dir, journal)?;
    for f in &merged.files {
        fs::rename(&f.tmp, &f.path)?;
    }
    sync_dir(dir)?;
    let mut s = shared.state.write();
    if !all_listed(&s.files, inputs) {
        return Ok(false);
    }
    s.files.retain(|f| !inputs.iter().any(|i| i.path == f.path));
    s.files.extend(outputs);
    shared.files_changed(&mut s);
    Ok(true)
}

/// Undoes a merge that was not swapped in: its outputs and temporary files, then the journal.
fn roll_back(dir: &Path, merged: &Merged) {
    for f in &merged.files {
        remove_all(&[f.path.clone(), f.tmp.clone()]);
    }
    if let Err(e) = sync_dir(dir).and_then(|()| remove_journal(dir)) {
        tracing::warn!(dir = %dir.display(), error = %e, "compaction: cannot roll back the journal");
    }
}
