//! Parquet files of the store: `spans/hour=YYYY-MM-DDTHH/part-<written_unix_ms>-<seq>.parquet`,
//! zstd-compressed, one hour of span start times per file. Rows are sorted by
//! (trace_id, start_time_unix_nano): a trace's spans sit together, so its id repeats and its times
//! are close; ids and times are written without dictionaries (they are nearly unique) and times
//! with delta encoding. On the release-walk fixture that took the file from 48.6 to about 28 bytes
//! per span (measured with `bench/src/bin/parquet_breakdown.rs`).
//!
//! The write time in the file name drives retention (files are deleted `retention` after they
//! were written, whatever their span times, so an imported capture of old spans stays). Files are
//! written to a temporary name, fsynced, then renamed into place.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::{SortColumn, SortOptions, lexsort_to_indices, take_record_batch};
use arrow::datatypes::Int64Type;
use dyeline_model::schema::col;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

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
}

/// The hour partition (its start, Unix ns) of a span start time.
pub fn hour_of(start_unix_nano: i64) -> i64 {
    start_unix_nano.div_euclid(HOUR_NS) * HOUR_NS
}

fn hour_dir_name(hour_start: i64) -> String {
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
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn writer_properties(zstd_level: i32) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(zstd_level).unwrap_or_default(),
        ))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_max_row_group_row_count(Some(256 * 1024));
    for id in [col::TRACE_ID, col::SPAN_ID, col::PARENT_SPAN_ID] {
        b = b.set_column_dictionary_enabled(ColumnPath::from(id), false);
    }
    for time in [
        col::START_TIME_UNIX_NANO,
        col::END_TIME_UNIX_NANO,
        col::DURATION_NS,
    ] {
        b = b
            .set_column_dictionary_enabled(ColumnPath::from(time), false)
            .set_column_encoding(ColumnPath::from(time), Encoding::DELTA_BINARY_PACKED);
    }
    b.build()
}

/// Sorts rows by (trace_id, start_time_unix_nano, span_id).
///
/// # Errors
/// Arrow errors (a schema mismatch).
pub fn sort_for_storage(batch: &RecordBatch) -> Result<RecordBatch, arrow::error::ArrowError> {
    let by = |name: &str| -> Result<SortColumn, arrow::error::ArrowError> {
        Ok(SortColumn {
            values: Arc::clone(batch.column(batch.schema().index_of(name)?)),
            options: Some(SortOptions::default()),
        })
    };
    let idx = lexsort_to_indices(
        &[
            by(col::TRACE_ID)?,
            by(col::START_TIME_UNIX_NANO)?,
            by(col::SPAN_ID)?,
        ],
        None,
    )?;
    take_record_batch(batch, &idx)
}

/// Writes `batch` (rows of one hour) as a new file of that hour; returns its metadata.
///
/// # Errors
/// I/O or Parquet errors; a failed write leaves no file behind but a `.tmp` that
/// [`list_files`] removes.
pub fn write_file(
    spans_dir: &Path,
    hour_start: i64,
    batch: &RecordBatch,
    written_unix_ms: i64,
    seq: u64,
    zstd_level: i32,
) -> io::Result<FileMeta> {
    let dir = spans_dir.join(hour_dir_name(hour_start));
    fs::create_dir_all(&dir)?;
    let name = format!("part-{written_unix_ms}-{seq:06}.parquet");
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let sorted = sort_for_storage(batch).map_err(io::Error::other)?;
    let file = File::create(&tmp)?;
    let mut w = ArrowWriter::try_new(file, sorted.schema(), Some(writer_properties(zstd_level)))
        .map_err(io::Error::other)?;
    w.write(&sorted).map_err(io::Error::other)?;
    let file = w.into_inner().map_err(io::Error::other)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, &path)?;
    File::open(&dir)?.sync_all()?;
    let size = fs::metadata(&path)?.len();
    Ok(FileMeta {
        path,
        hour_start_unix_nano: hour_start,
        written_unix_ms,
        size,
    })
}

/// Reads (trace_id, span_id) of every row of `path` (for rebuilding the duplicate filter).
///
/// # Errors
/// I/O or Parquet errors.
pub fn read_keys(path: &Path) -> io::Result<Vec<(String, String)>> {
    let file = File::open(path)?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(io::Error::other)?;
    let schema = builder.parquet_schema();
    let mask = ProjectionMask::columns(schema, [col::TRACE_ID, col::SPAN_ID]);
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(io::Error::other)?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(io::Error::other)?;
        let t = batch
            .column_by_name(col::TRACE_ID)
            .map(|c| c.as_string::<i32>());
        let s = batch
            .column_by_name(col::SPAN_ID)
            .map(|c| c.as_string::<i32>());
        if let (Some(t), Some(s)) = (t, s) {
            for i in 0..batch.num_rows() {
                out.push((t.value(i).to_owned(), s.value(i).to_owned()));
            }
        }
    }
    Ok(out)
}

/// Splits `batch` by hour of `start_time_unix_nano`: (hour start, rows).
///
/// # Errors
/// Arrow errors.
pub fn split_by_hour(
    batch: &RecordBatch,
) -> Result<Vec<(i64, RecordBatch)>, arrow::error::ArrowError> {
    let starts = batch
        .column_by_name(col::START_TIME_UNIX_NANO)
        .ok_or_else(|| arrow::error::ArrowError::SchemaError("no start time".into()))?
        .as_primitive::<Int64Type>();
    let mut hours: Vec<i64> = starts.iter().flatten().map(hour_of).collect();
    hours.sort_unstable();
    hours.dedup();
    if hours.len() <= 1 {
        return Ok(hours.into_iter().map(|h| (h, batch.clone())).collect());
    }
    let mut out = Vec::with_capacity(hours.len());
    for h in hours {
        let mask: arrow::array::BooleanArray = starts
            .iter()
            .map(|s| Some(s.is_some_and(|s| hour_of(s) == h)))
            .collect();
        out.push((h, arrow::compute::filter_record_batch(batch, &mask)?));
    }
    Ok(out)
}

/// Min and max `start_time_unix_nano` of a batch (`None` when empty).
pub fn start_range(batch: &RecordBatch) -> Option<(i64, i64)> {
    let starts = batch
        .column_by_name(col::START_TIME_UNIX_NANO)?
        .as_primitive::<Int64Type>();
    if starts.is_empty() {
        return None;
    }
    Some((arrow::compute::min(starts)?, arrow::compute::max(starts)?))
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
