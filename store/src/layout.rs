//! Where the store's Parquet files live and what their names say:
//! `spans/hour=YYYY-MM-DDTHH/part-<written_unix_ms>-<seq>.parquet`, one hour of span start times
//! per file ([`FileMeta`], [`hour_of`], [`list_files`]).
//!
//! The write time in the file name drives retention (files are deleted `retention` after they
//! were written, whatever their span times, so an imported capture of old spans stays). A
//! compacted file ([`crate::compact`]) is named `part-<written>-<seq>-c<stamp>-<n>.parquet`:
//! the newest write time (and `seq`) of the files it replaced, then the compaction's own
//! stamp, so a name is never reused.
//!
//! An hour directory may hold a compaction journal ([`JOURNAL`], [`Journal`]): the files a
//! compaction writes and the files they replace. [`list_files`] honours it, so a reader never
//! lists a row twice or misses one while a compaction swaps files: all outputs present → the
//! outputs and not the inputs; else the inputs and not the outputs.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::trace_index::TraceIndex;

/// One hour in nanoseconds.
pub const HOUR_NS: i64 = 3_600_000_000_000;

/// A Parquet file of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// Absolute path.
    pub path: PathBuf,
    /// Start of the hour partition, Unix ns.
    pub hour_start_unix_nano: i64,
    /// When the file was written, Unix ms.
    pub written_unix_ms: i64,
    /// Size in bytes.
    pub size: u64,
    /// The file's trace ids: set when the store wrote the file, and by a background pass
    /// for the files found at open; `None` until then, or once the trace-index budget
    /// dropped it (`StoreConfig::trace_index_max_bytes`): the file is then never skipped.
    pub traces: Option<Arc<TraceIndex>>,
    /// Set when the file is an object in shared storage ([`crate::object`]); `path` is then
    /// where the local cache keeps a copy of it once read whole.
    pub remote: Option<crate::object::RemoteFile>,
}

impl FileMeta {
    /// True when the file is in this data directory (not an object of shared storage).
    pub fn is_local(&self) -> bool {
        self.remote.is_none()
    }

    /// Makes the file readable at its path: nothing for a local file; an object is fetched
    /// into the local cache when absent.
    ///
    /// # Errors
    /// The object cannot be fetched.
    pub fn ensure_local(&self) -> io::Result<()> {
        match &self.remote {
            Some(r) => r.objects.fetch(&r.key, &self.path),
            None => Ok(()),
        }
    }

    /// True when the file's hour partition may hold span starts in `lo..=hi` (Unix ns).
    pub fn overlaps(&self, lo: i64, hi: i64) -> bool {
        let start = self.hour_start_unix_nano;
        let end = start.saturating_add(HOUR_NS - 1);
        start <= hi && end >= lo
    }
}

/// The hour partition (its start, Unix ns) of a span start time.
pub fn hour_of(start_unix_nano: i64) -> i64 {
    start_unix_nano.div_euclid(HOUR_NS) * HOUR_NS
}

/// The directory name of the hour partition starting at `hour_start` (Unix ns):
/// `hour=YYYY-MM-DDTHH` (UTC).
pub fn hour_dir_name(hour_start: i64) -> String {
    let secs = hour_start.div_euclid(1_000_000_000);
    match chrono::DateTime::from_timestamp(secs, 0) {
        Some(t) => format!("hour={}", t.format("%Y-%m-%dT%H")),
        None => format!("hour=ns{hour_start}"),
    }
}

fn parse_hour_dir(name: &str) -> Option<i64> {
    let h = name.strip_prefix("hour=")?;
    if let Some(ns) = h.strip_prefix("ns") {
        return ns.parse().ok();
    }
    let t =
        chrono::NaiveDateTime::parse_from_str(&format!("{h}:00:00"), "%Y-%m-%dT%H:%M:%S").ok()?;
    t.and_utc().timestamp_nanos_opt()
}

/// The compaction journal of an hour directory ([`Journal`]).
pub const JOURNAL: &str = "compaction.journal";

/// The first line of a [`JOURNAL`]: its format and version.
const JOURNAL_HEADER: &str = "dyeline-compaction-journal 1";

/// What a compaction of one hour directory writes before its first rename: the file names
/// (in the directory) of its outputs and of the inputs they replace. On disk, text:
/// [`JOURNAL_HEADER`], then `output <name>` and `input <name>` lines, then `end`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Journal {
    /// The new files.
    pub outputs: Vec<String>,
    /// The files they replace.
    pub inputs: Vec<String>,
}

impl Journal {
    /// The journal as written to disk.
    pub fn to_text(&self) -> String {
        let mut t = format!("{JOURNAL_HEADER}\n");
        for (kind, names) in [("output", &self.outputs), ("input", &self.inputs)] {
            for n in names {
                t.push_str(&format!("{kind} {n}\n"));
            }
        }
        t.push_str("end\n");
        t
    }

    /// Parses [`Journal::to_text`]; `None` for any other text (another version, cut short).
    pub fn parse(text: &str) -> Option<Self> {
        let mut lines = text.lines();
        if lines.next()? != JOURNAL_HEADER {
            return None;
        }
        let mut j = Self::default();
        for line in lines {
            match line.split_once(' ') {
                Some(("output", n)) => j.outputs.push(n.to_owned()),
                Some(("input", n)) => j.inputs.push(n.to_owned()),
                None if line == "end" => return Some(j),
                _ => return None,
            }
        }
        None
    }

    /// True when every output is among `names` (a listing of the directory).
    pub fn outputs_complete(&self, names: &[String]) -> bool {
        self.outputs.iter().all(|o| names.contains(o))
    }
}

/// The journal of the hour directory `dir`, if any.
///
/// # Errors
/// I/O errors; a journal that does not parse ([`io::ErrorKind::InvalidData`]: it is written
/// whole under a temporary name and renamed, so this is not a crash's leftover).
pub fn read_journal(dir: &Path) -> io::Result<Option<Journal>> {
    let path = dir.join(JOURNAL);
    match fs::read_to_string(&path) {
        Ok(text) => Journal::parse(&text).map(Some).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a compaction journal", path.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Lists the store's Parquet files under `spans_dir`; with `clean`, removes leftovers of
/// interrupted writes (`.tmp`; only the writing process may do that).
///
/// An hour directory's [`JOURNAL`] is honoured: its inputs are left out once every output is
/// there, its outputs until then. The journal is read before and after the directory, and
/// the directory read again if it changed meanwhile, so a listing taken while a compaction
/// renames or deletes sees one side of it whole.
///
/// # Errors
/// I/O errors; a journal that does not parse.
pub fn list_files(spans_dir: &Path, clean: bool) -> io::Result<Vec<FileMeta>> {
    let mut out = Vec::new();
    if !spans_dir.exists() {
        return Ok(out);
    }
    for hour in fs::read_dir(spans_dir)? {
        let hour = hour?;
        let Some(hour_start) = parse_hour_dir(&hour.file_name().to_string_lossy()) else {
            continue;
        };
        let dir = hour.path();
        let mut tries = 0;
        let (journal, names) = loop {
            let before = read_journal(&dir)?;
            let names = part_names(&dir, clean)?;
            let after = read_journal(&dir)?;
            tries += 1;
            if before == after || tries == 100 {
                break (after, names);
            }
        };
        let hidden: &[String] = match &journal {
            Some(j) if j.outputs_complete(&names) => &j.inputs,
            Some(j) => &j.outputs,
            None => &[],
        };
        for name in names.into_iter().filter(|n| !hidden.contains(n)) {
            let path = dir.join(&name);
            let size = match fs::metadata(&path) {
                Ok(m) => m.len(),
                // An input deleted since the listing: the journal hides it anyway.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            out.push(FileMeta {
                written_unix_ms: written_of(&name),
                path,
                hour_start_unix_nano: hour_start,
                size,
                traces: None,
                remote: None,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The `part-*.parquet` names in the hour directory `dir`; with `clean`, removes `.tmp` files.
fn part_names(dir: &Path, clean: bool) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for f in fs::read_dir(dir)? {
        let f = f?;
        let name = f.file_name().to_string_lossy().into_owned();
        if name.ends_with(".tmp") {
            if clean {
                let _ = fs::remove_file(f.path());
            }
            continue;
        }
        if name.starts_with("part-") && name.ends_with(".parquet") {
            names.push(name);
        }
    }
    Ok(names)
}

/// The write time (Unix ms) a file name `part-<written>-….parquet` carries; 0 when none.
pub(crate) fn written_of(name: &str) -> i64 {
    name.strip_prefix("part-")
        .and_then(|n| n.split(['-', '.']).next()?.parse().ok())
        .unwrap_or(0)
}

/// The `seq` a file name `part-<written>-<seq>….parquet` carries; 0 when none.
pub(crate) fn seq_of(name: &str) -> u64 {
    name.strip_prefix("part-")
        .and_then(|n| n.split(['-', '.']).nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// True when the file name `name` is a compaction's output ([`compacted_name`]).
pub(crate) fn is_compacted(name: &str) -> bool {
    name.strip_prefix("part-")
        .and_then(|n| n.split('-').nth(2))
        .is_some_and(|p| p.starts_with('c'))
}

/// The name of output `n` of a compaction stamped `stamp` (Unix ms when it started) whose
/// inputs' newest write time is `written` and largest `seq` is `seq` ([`seq_of`]).
pub(crate) fn compacted_name(written: i64, seq: u64, stamp: i64, n: usize) -> String {
    format!("part-{written}-{seq:06}-c{stamp}-{n}.parquet")
}

/// The wall clock in Unix ms: the write time file names carry, and retention's clock.
pub(crate) use dyeline_model::time::now_unix_ms;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_the_write_time_and_seq_and_journals_round_trip() {
        let flushed = "part-1700000000123-000042.parquet";
        let compacted = compacted_name(1_700_000_000_123, 42, 1_800_000_000_000, 3);
        assert_eq!(
            compacted,
            "part-1700000000123-000042-c1800000000000-3.parquet"
        );
        for n in [flushed, compacted.as_str()] {
            assert_eq!((written_of(n), seq_of(n)), (1_700_000_000_123, 42), "{n}");
        }
        assert!(is_compacted(&compacted) && !is_compacted(flushed));
        assert_eq!((written_of("x.parquet"), seq_of("part-5.parquet")), (0, 0));
        let j = Journal {
            outputs: vec![compacted.clone()],
            inputs: vec![flushed.to_owned(), "part-1-000001.parquet".to_owned()],
        };
        assert_eq!(Journal::parse(&j.to_text()), Some(j.clone()));
        // Cut short, or of another version: not a journal.
        let text = j.to_text();
        assert_eq!(Journal::parse(&text[..text.len() - 4]), None);
        assert_eq!(Journal::parse(&text.replace(" 1\n", " 2\n")), None);
        assert!(j.outputs_complete(&[compacted, flushed.to_owned()]));
        assert!(!j.outputs_complete(&[flushed.to_owned()]));
    }

    #[test]
    fn hour_directories_round_trip() {
        let h = hour_of(1_735_732_812_005_000_000);
        assert_eq!(h % HOUR_NS, 0);
        assert_eq!(hour_dir_name(h), "hour=2025-01-01T12");
        assert_eq!(parse_hour_dir(&hour_dir_name(h)), Some(h));
        assert_eq!(hour_of(-1), -HOUR_NS);
    }
}
