//! Parquet files of the store: `spans/hour=YYYY-MM-DDTHH/part-<written_unix_ms>-<seq>.parquet`,
//! zstd-compressed, one hour of span start times per file. Rows are sorted by
//! (trace_id, start_time_unix_nano): a trace's spans sit together, so its id repeats and its times
//! are close; ids and times are written without dictionaries (they are nearly unique) and times
//! with delta encoding. On the release-walk fixture that took the file from 48.6 to about 28 bytes
//! per span (measured with `bench/src/bin/parquet_breakdown.rs`). Because of that order a lookup
//! by trace id is cheap: `trace_id` carries a bloom filter (a file or row group without the id
//! is skipped) and page-level min/max (only the page holding the id is read, of every column;
//! pages hold at most [`DATA_PAGE_ROWS`] rows).
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

use crate::trace_index::{TraceIndex, trace_hash};

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
    /// for the files found at open (`None` until then: the file is never skipped).
    pub traces: Option<Arc<TraceIndex>>,
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
                traces: None,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Rows per data page at most: with the rows sorted by trace id, a lookup by trace id reads
/// one page of each column instead of the whole row group.
pub const DATA_PAGE_ROWS: usize = 8 * 1024;

/// False-positive rate of the trace id bloom filter.
pub const TRACE_ID_BLOOM_FPP: f64 = 0.01;

/// Writer settings for a file of `traces` distinct trace ids.
///
/// Rows are sorted by trace id ([`sort_for_storage`]), so `trace_id` gets page-level min/max
/// statistics (the column index) and a bloom filter sized for `traces` ids: a lookup by
/// trace id skips the files and row groups whose filter says no, and within a row group
/// reads only the pages whose range holds the id (DataFusion prunes with both). Other
/// columns keep row-group statistics.
fn writer_properties(zstd_level: i32, traces: u64) -> WriterProperties {
    let trace = ColumnPath::from(col::TRACE_ID);
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(zstd_level).unwrap_or_default(),
        ))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_column_statistics_enabled(trace.clone(), EnabledStatistics::Page)
        .set_column_bloom_filter_enabled(trace.clone(), true)
        .set_column_bloom_filter_fpp(trace.clone(), TRACE_ID_BLOOM_FPP)
        .set_column_bloom_filter_max_ndv(trace, traces.max(1))
        .set_data_page_row_count_limit(DATA_PAGE_ROWS)
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
    // The file's trace index also gives the bloom filter its number of distinct ids.
    let traces = TraceIndex::of_batch(&sorted).map(Arc::new);
    let ndv = traces.as_ref().map_or(0, |t| t.len() as u64);
    let props = writer_properties(zstd_level, ndv);
    let file = File::create(&tmp)?;
    let mut w =
        ArrowWriter::try_new(file, sorted.schema(), Some(props)).map_err(io::Error::other)?;
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
        traces,
    })
}

/// The batches of columns `names` of the file at `path`.
///
/// # Errors
/// I/O or Parquet errors opening the file (each batch may still carry a read error).
fn read_columns(
    path: &Path,
    names: &[&str],
) -> io::Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader> {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(File::open(path)?).map_err(io::Error::other)?;
    let mask = ProjectionMask::columns(builder.parquet_schema(), names.iter().copied());
    builder
        .with_projection(mask)
        .build()
        .map_err(io::Error::other)
}

/// Reads (trace_id, span_id) of every row of `path` (for rebuilding the duplicate filter).
///
/// # Errors
/// I/O or Parquet errors.
pub fn read_keys(path: &Path) -> io::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for batch in read_columns(path, &[col::TRACE_ID, col::SPAN_ID])? {
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

/// The [`TraceIndex`] of the file at `path` (reads its `trace_id` column only).
///
/// # Errors
/// I/O or Parquet errors (a file removed by retention meanwhile, a corrupt file).
pub fn read_trace_index(path: &Path) -> io::Result<TraceIndex> {
    let mut hashes = Vec::new();
    for batch in read_columns(path, &[col::TRACE_ID])? {
        let batch = batch.map_err(io::Error::other)?;
        if let Some(ids) = batch
            .column_by_name(col::TRACE_ID)
            .and_then(|c| c.as_string_opt::<i32>())
        {
            hashes.extend(ids.iter().flatten().map(trace_hash));
        }
    }
    Ok(TraceIndex::from_hashes(hashes))
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

    /// A lookup by trace id can skip a file by its bloom filter and, within it, every page
    /// of `trace_id` but one by the page index.
    #[test]
    fn files_carry_a_trace_id_bloom_filter_and_page_index() {
        use arrow::array::{Int64Array, StringArray};
        use arrow::datatypes::{DataType, Field, Schema};
        use parquet::file::reader::FileReader;
        use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};

        let rows = 3 * DATA_PAGE_ROWS;
        // 10 spans per trace, rows in a scrambled order (the writer sorts them).
        let trace = |t: usize| format!("{:032x}", (t as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let order: Vec<usize> = (0..rows).map(|i| (i * 7919) % rows).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new(col::TRACE_ID, DataType::Utf8, false),
            Field::new(col::SPAN_ID, DataType::Utf8, false),
            Field::new(col::START_TIME_UNIX_NANO, DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from_iter_values(
                    order.iter().map(|&i| trace(i / 10)),
                )),
                Arc::new(StringArray::from_iter_values(
                    order.iter().map(|&i| format!("{i:016x}")),
                )),
                Arc::new(Int64Array::from_iter_values(
                    order.iter().map(|&i| i as i64),
                )),
            ],
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let meta = write_file(dir.path(), 0, &batch, 1, 1, 3).unwrap();
        // The file's trace index, as written and as read back at open, holds every trace.
        let written = meta.traces.as_deref().unwrap();
        assert_eq!(written.len(), rows.div_ceil(10));
        assert_eq!(&read_trace_index(&meta.path).unwrap(), written);
        assert!(written.may_contain(&trace(0)) && written.may_contain(&trace(rows / 10 - 1)));
        assert!(!written.may_contain(&trace(rows)));
        let options = ReadOptionsBuilder::new()
            .with_page_index()
            .with_reader_properties(
                parquet::file::properties::ReaderProperties::builder()
                    .set_read_bloom_filter(true)
                    .build(),
            )
            .build();
        let reader =
            SerializedFileReader::new_with_options(File::open(&meta.path).unwrap(), options)
                .unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 1);
        let t = 0; // trace_id is the first column
        let pages = &reader.metadata().offset_index().unwrap()[0][t];
        assert_eq!(
            pages.page_locations().len(),
            3,
            "one page per {DATA_PAGE_ROWS} rows"
        );
        let index = &reader.metadata().column_index().unwrap()[0][t];
        assert!(
            !matches!(
                index,
                parquet::file::page_index::column_index::ColumnIndexMetaData::NONE
            ),
            "trace_id has page min/max"
        );
        let rg = reader.get_row_group(0).unwrap();
        let bloom = rg
            .get_column_bloom_filter(t)
            .expect("trace_id bloom filter");
        for i in 0..rows.div_ceil(10) {
            assert!(bloom.check(trace(i).as_str()), "present id {i} must pass");
        }
        let false_hits = (rows.div_ceil(10)..rows.div_ceil(10) + 10_000)
            .filter(|&i| bloom.check(trace(i).as_str()))
            .count();
        // 1 % asked; allow 3 % over 10,000 absent ids.
        assert!(false_hits < 300, "{false_hits} false positives of 10000");
        // Columns without page statistics have no column index min/max.
        assert!(matches!(
            reader.metadata().column_index().unwrap()[0][2],
            parquet::file::page_index::column_index::ColumnIndexMetaData::NONE
        ));
    }
}
