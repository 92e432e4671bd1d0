//! Where the store's Parquet files live and what their names say:
//! `spans/hour=YYYY-MM-DDTHH/part-<written_unix_ms>-<seq>.parquet`, one hour of span start times
//! per file ([`FileMeta`], [`hour_of`], [`list_files`]).
//!
//! The write time in the file name drives retention (files are deleted `retention` after they
//! were written, whatever their span times, so an imported capture of old spans stays).

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
}

impl FileMeta {
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

pub(crate) fn hour_dir_name(hour_start: i64) -> String {
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

/// Lists the store's Parquet files under `spans_dir`; with `clean`, removes leftovers of
/// interrupted writes (`.tmp`; only the writing process may do that).
///
/// # Errors
/// I/O errors.
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
        for f in fs::read_dir(hour.path())? {
            let f = f?;
            let name = f.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tmp") {
                if clean {
                    let _ = fs::remove_file(f.path());
                }
                continue;
            }
            let Some(rest) = name
                .strip_prefix("part-")
                .and_then(|n| n.strip_suffix(".parquet"))
            else {
                continue;
            };
            let written = rest
                .split('-')
                .next()
                .and_then(|w| w.parse().ok())
                .unwrap_or(0);
            out.push(FileMeta {
                path: f.path(),
                hour_start_unix_nano: hour_start,
                written_unix_ms: written,
                size: f.metadata()?.len(),
                traces: None,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The wall clock in Unix ms: the write time file names carry, and retention's clock.
pub(crate) fn now_unix_ms() -> i64 {
    dyeline_model::time::now_unix_nano() / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hour_directories_round_trip() {
        let h = hour_of(1_735_732_812_005_000_000);
        assert_eq!(h % HOUR_NS, 0);
        assert_eq!(hour_dir_name(h), "hour=2025-01-01T12");
        assert_eq!(parse_hour_dir(&hour_dir_name(h)), Some(h));
        assert_eq!(hour_of(-1), -HOUR_NS);
    }
}
