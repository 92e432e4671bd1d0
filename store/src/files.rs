//! Parquet files of the store: `spans/hour=YYYY-MM-DDTHH/part-<written_unix_ms>-<seq>.parquet`,
//! zstd-compressed, one hour of span start times per file; and the same encoding in memory
//! ([`Part`]: the store seals its newest rows so, and a flush copies their row groups into a
//! file without decoding them, [`write_segments`]). Rows of a row group are sorted by
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
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::interleave_record_batch;
use arrow::datatypes::Int64Type;
use arrow::error::ArrowError;
use bytes::Bytes;
use dyeline_model::schema::col;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowColumnWriter, compute_leaves};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;

use crate::segment::Segment;
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
    /// for the files found at open; `None` until then, or once the trace-index budget
    /// dropped it (`StoreConfig::trace_index_max_bytes`): the file is then never skipped.
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

/// Rows per data page at most: with a row group's rows sorted by trace id, a lookup by trace
/// id reads one page of each column instead of the whole row group.
pub const DATA_PAGE_ROWS: usize = 8 * 1024;

/// False-positive rate of the trace id bloom filter.
pub const TRACE_ID_BLOOM_FPP: f64 = 0.01;

/// Writer settings for a file of `traces` distinct trace ids.
///
/// A row group's rows are sorted by trace id ([`storage_order`]), so `trace_id` gets page-level
/// min/max statistics (the column index) and a bloom filter sized for `traces` ids: a lookup
/// by trace id skips the files and row groups whose filter says no, and within a row group
/// reads only the pages whose range holds the id (DataFusion prunes with both). Other
/// columns keep row-group statistics, but for free text and JSON, which have none.
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
    // Free text and JSON: min/max of such values prunes nothing, and comparing every value
    // (hundreds of bytes, long shared prefixes) was a seventh of the encoding time.
    for text in [
        col::ATTRIBUTES,
        col::RESOURCE_ATTRIBUTES,
        col::EVENTS,
        col::STATUS_MESSAGE,
        col::DECISION_TEXT,
        col::TRACE_STATE,
    ] {
        b = b.set_column_statistics_enabled(ColumnPath::from(text), EnabledStatistics::None);
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

/// One row of a list of batches: (batch index, row index), as [`interleave_record_batch`]
/// takes it.
pub type RowRef = (usize, usize);

/// Rows of a file are handed to the Parquet writer this many at a time, so a flush copies
/// at most this many rows at once on top of the batches it reads from.
pub const WRITE_CHUNK_ROWS: usize = 8 * 1024;

/// The rows of `batches` grouped by the hour of their `start_time_unix_nano` (ascending), each
/// hour's rows in storage order: by (trace_id, start_time_unix_nano, span_id), ascending,
/// strings compared bytewise (lower-case hex ids sort as their bytes do); rows with equal
/// keys keep their order (batch, then row).
///
/// Only the three key columns are read; no row is copied.
///
/// # Errors
/// A batch lacking one of the three columns, or holding them with other types.
pub fn storage_order(batches: &[RecordBatch]) -> Result<Vec<(i64, Vec<RowRef>)>, ArrowError> {
    let missing = |name: &str| ArrowError::SchemaError(format!("no {name} column"));
    let mut keys: Vec<(i64, &str, i64, &str, RowRef)> =
        Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for (b, batch) in batches.iter().enumerate() {
        let string = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| missing(name))?
                .as_string_opt::<i32>()
                .ok_or_else(|| ArrowError::SchemaError(format!("{name} is not Utf8")))
        };
        let (traces, spans) = (string(col::TRACE_ID)?, string(col::SPAN_ID)?);
        let starts = batch
            .column_by_name(col::START_TIME_UNIX_NANO)
            .ok_or_else(|| missing(col::START_TIME_UNIX_NANO))?
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| ArrowError::SchemaError("start_time_unix_nano is not Int64".into()))?;
        for r in 0..batch.num_rows() {
            let start = starts.value(r);
            keys.push((
                hour_of(start),
                traces.value(r),
                start,
                spans.value(r),
                (b, r),
            ));
        }
    }
    keys.sort_unstable();
    let mut out: Vec<(i64, Vec<RowRef>)> = Vec::new();
    for (hour, _, _, _, at) in keys {
        match out.last_mut() {
            Some((h, rows)) if *h == hour => rows.push(at),
            _ => out.push((hour, vec![at])),
        }
    }
    Ok(out)
}

/// Rows per row group of a file written from segments ([`write_segments`]).
pub const ROW_GROUP_ROWS: usize = 256 * 1024;

/// A flush decodes the segments' columns in about this many groups, one group at a time.
const COLUMN_GROUPS: usize = 4;

/// Splits the fields of `sample` into at most about [`COLUMN_GROUPS`] runs of adjacent
/// columns of similar decoded size (a column larger than a share is a group of its own).
fn column_groups(sample: &RecordBatch) -> Vec<Vec<usize>> {
    let sizes: Vec<usize> = sample
        .columns()
        .iter()
        .map(|c| c.get_array_memory_size())
        .collect();
    let share = sizes.iter().sum::<usize>().div_ceil(COLUMN_GROUPS).max(1);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut size = 0;
    for (i, &s) in sizes.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if size + s <= share => g.push(i),
            _ => {
                groups.push(vec![i]);
                size = 0;
            }
        }
        size += s;
    }
    groups
}

/// One hour's rows encoded as a whole Parquet file in memory ([`encode_parts`]): the form in
/// which memory holds rows once sealed ([`Segment::from_part`]), and the bytes a flush copies
/// into a file row group by row group, without decoding them ([`write_segments`]).
#[derive(Debug, Clone)]
pub struct Part {
    /// Start of the hour partition of every row, Unix ns.
    pub hour_start_unix_nano: i64,
    /// The Parquet file: the store files' writer settings (bloom filter and page index on
    /// `trace_id`), rows in storage order, row groups of at most [`ROW_GROUP_ROWS`] rows.
    pub bytes: Bytes,
    /// Rows.
    pub rows: usize,
    /// Min and max `start_time_unix_nano`.
    pub start_range: (i64, i64),
    /// The rows' trace ids.
    pub traces: Arc<TraceIndex>,
}

/// One hour's rows being encoded by [`encode_parts`].
struct OpenPart {
    hour: i64,
    rows: Vec<RowRef>,
    start_range: (i64, i64),
    writer: SerializedFileWriter<Vec<u8>>,
    /// Per row group, one writer per Parquet leaf column, until its column group is written.
    columns: Vec<Vec<Option<ArrowColumnWriter>>>,
    /// Per row group, each leaf column's encoded chunk once its writer is closed.
    chunks: Vec<Vec<Option<ArrowColumnChunk>>>,
    traces: Arc<TraceIndex>,
}

impl OpenPart {
    /// Encodes columns `group` of the part's rows into its column writers, taking them from
    /// `sources` (every segment decoded to those columns, in that order), [`WRITE_CHUNK_ROWS`]
    /// rows at a time. `leaves[c]` are the Parquet leaves of schema field `c`.
    ///
    /// The writers of those leaves are closed at the end, so their buffers and zstd
    /// contexts (each some hundreds of KB, zeroed when first used) are freed before the next
    /// group's writers start, and reused by them instead of being new memory.
    fn encode(
        &mut self,
        sources: &[&RecordBatch],
        group: &[usize],
        schema: &arrow::datatypes::Schema,
        leaves: &[Range<usize>],
        row_group_rows: usize,
    ) -> Result<(), parquet::errors::ParquetError> {
        let missing = || parquet::errors::ParquetError::General("column written twice".into());
        for (g, rows) in self.rows.chunks(row_group_rows).enumerate() {
            for chunk in rows.chunks(WRITE_CHUNK_ROWS) {
                let part = interleave_record_batch(sources, chunk)?;
                for (j, &c) in group.iter().enumerate() {
                    let arrays = compute_leaves(schema.field(c), part.column(j))?;
                    for (leaf, array) in leaves[c].clone().zip(&arrays) {
                        self.columns[g][leaf]
                            .as_mut()
                            .ok_or_else(missing)?
                            .write(array)?;
                    }
                }
            }
            for leaf in group.iter().flat_map(|&c| leaves[c].clone()) {
                let writer = self.columns[g][leaf].take().ok_or_else(missing)?;
                self.chunks[g][leaf] = Some(writer.close()?);
            }
        }
        Ok(())
    }

    /// Writes the encoded row groups and the footer.
    fn finish(mut self) -> Result<Part, parquet::errors::ParquetError> {
        for chunks in self.chunks {
            let mut row_group = self.writer.next_row_group()?;
            for chunk in chunks {
                chunk
                    .ok_or_else(|| {
                        parquet::errors::ParquetError::General(
                            "a column group was not written".into(),
                        )
                    })?
                    .append_to_row_group(&mut row_group)?;
            }
            row_group.close()?;
        }
        // Copied to its exact size: the writer's buffer grew by doubling, and the part is
        // held until it is flushed.
        let buf = self.writer.into_inner()?;
        Ok(Part {
            hour_start_unix_nano: self.hour,
            bytes: Bytes::copy_from_slice(&buf),
            rows: self.rows.len(),
            start_range: self.start_range,
            traces: self.traces,
        })
    }
}

/// Encodes the rows of `segments` (memory segments in the `spans` schema, any form) as one
/// in-memory Parquet file per hour of `start_time_unix_nano` ([`Part`]), rows in storage order
/// ([`storage_order`]), at `zstd_level`.
///
/// Memory stays low: the key columns are decoded first to find the order, then the other
/// columns are decoded a group at a time (about a quarter of the row bytes each,
/// [`Segment::decode_columns`]) and encoded into each part's column writers,
/// [`WRITE_CHUNK_ROWS`] rows at a time. A flush of 500,000 spans used to decode every column of
/// every segment at once (about 550 MB, each page of it new memory the kernel had to zero).
///
/// # Errors
/// IPC or Parquet errors.
pub fn encode_parts(segments: &[&Segment], zstd_level: i32) -> io::Result<Vec<Part>> {
    encode_parts_in(segments, zstd_level, ROW_GROUP_ROWS)
}

fn encode_parts_in(
    segments: &[&Segment],
    zstd_level: i32,
    row_group_rows: usize,
) -> io::Result<Vec<Part>> {
    let Some(first) = segments.first() else {
        return Ok(Vec::new());
    };
    let schema = first.schema().map_err(io::Error::other)?;
    let index = |name: &str| schema.index_of(name).map_err(io::Error::other);
    let key_columns = [
        index(col::TRACE_ID)?,
        index(col::SPAN_ID)?,
        index(col::START_TIME_UNIX_NANO)?,
    ];
    let keys: Vec<RecordBatch> = segments
        .iter()
        .map(|s| s.decode_columns(&key_columns))
        .collect::<Result<_, _>>()
        .map_err(io::Error::other)?;
    let sample = first.decode().map_err(io::Error::other)?;
    // Parquet leaf columns of each field (a map has two, a list one), in schema order.
    let mut leaves = Vec::with_capacity(schema.fields().len());
    let mut next = 0;
    for (field, column) in schema.fields().iter().zip(sample.columns()) {
        let n = compute_leaves(field, column)
            .map_err(io::Error::other)?
            .len();
        leaves.push(next..next + n);
        next += n;
    }
    let groups = column_groups(&sample);
    drop(sample);
    // `key_columns` puts trace_id first, start time third.
    let trace_ids: Vec<_> = keys
        .iter()
        .map(|k| k.column(0).as_string::<i32>())
        .collect();
    let starts: Vec<_> = keys
        .iter()
        .map(|k| k.column(2).as_primitive::<Int64Type>())
        .collect();
    let mut open = Vec::new();
    for (hour, rows) in storage_order(&keys).map_err(io::Error::other)? {
        let traces = TraceIndex::from_ids(rows.iter().map(|&(b, r)| trace_ids[b].value(r)));
        let start_range = rows.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &(b, r)| {
            let t = starts[b].value(r);
            (lo.min(t), hi.max(t))
        });
        let props = writer_properties(zstd_level, traces.len() as u64);
        let (writer, factory) = ArrowWriter::try_new(Vec::new(), Arc::clone(&schema), Some(props))
            .and_then(ArrowWriter::into_serialized_writer)
            .map_err(io::Error::other)?;
        let columns: Vec<Vec<Option<ArrowColumnWriter>>> = (0..rows.len().div_ceil(row_group_rows))
            .map(|g| {
                factory
                    .create_column_writers(g)
                    .map(|w| w.into_iter().map(Some).collect())
            })
            .collect::<Result<_, _>>()
            .map_err(io::Error::other)?;
        let chunks = columns
            .iter()
            .map(|w| w.iter().map(|_| None).collect())
            .collect();
        open.push(OpenPart {
            hour,
            rows,
            start_range,
            writer,
            columns,
            chunks,
            traces: Arc::new(traces),
        });
    }
    drop(keys);
    for group in &groups {
        let decoded: Vec<RecordBatch> = segments
            .iter()
            .map(|s| s.decode_columns(group))
            .collect::<Result<_, _>>()
            .map_err(io::Error::other)?;
        let sources: Vec<&RecordBatch> = decoded.iter().collect();
        for part in &mut open {
            part.encode(&sources, group, &schema, &leaves, row_group_rows)
                .map_err(io::Error::other)?;
        }
    }
    open.into_iter()
        .map(|p| p.finish().map_err(io::Error::other))
        .collect()
}

/// Writes the rows of `segments` (memory segments in the `spans` schema) as new files, one
/// per hour of `start_time_unix_nano`; returns their metadata, each with its [`TraceIndex`].
///
/// Sealed segments ([`Segment::part`]) are copied: each row group's encoded column chunks,
/// with their bloom filters and page indexes, go into the file as they are, not decoded. The
/// other segments are encoded first ([`encode_parts`]), then copied alike. So a file holds one
/// or more row groups, each in storage order; a trace's spans sit together within a row group,
/// and a trace written across two seals sits in two.
///
/// # Errors
/// I/O, IPC or Parquet errors; a failed write leaves `.tmp` files that [`list_files`] removes.
pub fn write_segments(
    spans_dir: &Path,
    segments: &[&Segment],
    written_unix_ms: i64,
    seq: &mut u64,
    zstd_level: i32,
) -> io::Result<Vec<FileMeta>> {
    write_segments_in(
        spans_dir,
        segments,
        written_unix_ms,
        seq,
        zstd_level,
        ROW_GROUP_ROWS,
    )
}

fn write_segments_in(
    spans_dir: &Path,
    segments: &[&Segment],
    written_unix_ms: i64,
    seq: &mut u64,
    zstd_level: i32,
    row_group_rows: usize,
) -> io::Result<Vec<FileMeta>> {
    let (sealed, other): (Vec<&Segment>, Vec<&Segment>) =
        segments.iter().partition(|s| s.part().is_some());
    let fresh = encode_parts_in(&other, zstd_level, row_group_rows)?;
    let mut hours: std::collections::BTreeMap<i64, Vec<&Part>> = Default::default();
    for part in sealed.iter().filter_map(|s| s.part()).chain(&fresh) {
        hours
            .entry(part.hour_start_unix_nano)
            .or_default()
            .push(part);
    }
    hours
        .into_iter()
        .map(|(hour, parts)| write_file(spans_dir, hour, &parts, written_unix_ms, seq, zstd_level))
        .collect()
}

/// Writes `parts` (all of hour `hour`) into one new file by copying their row groups.
fn write_file(
    spans_dir: &Path,
    hour: i64,
    parts: &[&Part],
    written_unix_ms: i64,
    seq: &mut u64,
    zstd_level: i32,
) -> io::Result<FileMeta> {
    let Some(first) = parts.first() else {
        return Err(io::Error::other("no rows to write"));
    };
    *seq += 1;
    let dir = spans_dir.join(hour_dir_name(hour));
    fs::create_dir_all(&dir)?;
    let name = format!("part-{written_unix_ms}-{seq:06}.parquet");
    let path = dir.join(&name);
    let tmp = dir.join(format!("{name}.tmp"));
    let traces = if let [one] = parts {
        Arc::clone(&one.traces)
    } else {
        Arc::new(TraceIndex::union(parts.iter().map(|p| &*p.traces)))
    };
    let schema = ParquetRecordBatchReaderBuilder::try_new(first.bytes.clone())
        .map_err(io::Error::other)?
        .schema()
        .clone();
    let props = writer_properties(zstd_level, traces.len() as u64);
    let (mut writer, _) = ArrowWriter::try_new(File::create(&tmp)?, schema, Some(props))
        .and_then(ArrowWriter::into_serialized_writer)
        .map_err(io::Error::other)?;
    for part in parts {
        copy_row_groups(&part.bytes, &mut writer).map_err(io::Error::other)?;
    }
    let f = writer.into_inner().map_err(io::Error::other)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, &path)?;
    File::open(&dir)?.sync_all()?;
    Ok(FileMeta {
        size: fs::metadata(&path)?.len(),
        path,
        hour_start_unix_nano: hour,
        written_unix_ms,
        traces: Some(traces),
    })
}

/// Appends every row group of the Parquet file `part` to `writer` (of the same schema) as
/// encoded: each column chunk's bytes are copied with its statistics, bloom filter, column
/// index and offset index (the offsets rewritten for their new place).
fn copy_row_groups<W: io::Write + Send>(
    part: &Bytes,
    writer: &mut SerializedFileWriter<W>,
) -> Result<(), parquet::errors::ParquetError> {
    use parquet::bloom_filter::Sbbf;
    use parquet::column::writer::ColumnCloseResult;
    use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
    use parquet::file::page_index::column_index::ColumnIndexMetaData;

    let meta = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .parse_and_finish(part)?;
    for (g, group) in meta.row_groups().iter().enumerate() {
        let mut row_group = writer.next_row_group()?;
        for (c, column) in group.columns().iter().enumerate() {
            let column_index = meta
                .column_index()
                .and_then(|i| i.get(g)?.get(c).cloned())
                .filter(|i| !matches!(i, ColumnIndexMetaData::NONE));
            let offset_index = meta.offset_index().and_then(|i| i.get(g)?.get(c).cloned());
            row_group.append_column(
                part,
                ColumnCloseResult {
                    bytes_written: u64::try_from(column.compressed_size()).unwrap_or(0),
                    rows_written: u64::try_from(group.num_rows()).unwrap_or(0),
                    metadata: column.clone(),
                    bloom_filter: Sbbf::read_from_column_chunk(column, part)?,
                    column_index,
                    offset_index,
                },
            )?;
        }
        row_group.close()?;
    }
    Ok(())
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
    collect_keys(
        read_columns(path, &[col::TRACE_ID, col::SPAN_ID])?,
        |_| true,
        &mut out,
    )?;
    Ok(out)
}

/// Appends to `out` the (trace_id, span_id) of the rows `reader` yields whose trace id passes
/// `keep`; returns the rows read.
fn collect_keys(
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    keep: impl Fn(&str) -> bool,
    out: &mut Vec<(String, String)>,
) -> io::Result<usize> {
    let mut read = 0;
    for batch in reader {
        let batch = batch.map_err(io::Error::other)?;
        read += batch.num_rows();
        let t = batch
            .column_by_name(col::TRACE_ID)
            .and_then(|c| c.as_string_opt::<i32>());
        let s = batch
            .column_by_name(col::SPAN_ID)
            .and_then(|c| c.as_string_opt::<i32>());
        if let (Some(t), Some(s)) = (t, s) {
            for i in 0..batch.num_rows() {
                if keep(t.value(i)) {
                    out.push((t.value(i).to_owned(), s.value(i).to_owned()));
                }
            }
        }
    }
    Ok(read)
}

/// True when one of `traces` (sorted, as stored) lies in `min..=max` (raw bytes of Parquet
/// statistics); a missing bound means "may".
fn any_within(traces: &[String], min: Option<&[u8]>, max: Option<&[u8]>) -> bool {
    let from = min.map_or(0, |lo| traces.partition_point(|t| t.as_bytes() < lo));
    match (traces.get(from), max) {
        (None, _) => false,
        (Some(t), Some(hi)) => t.as_bytes() <= hi,
        (Some(_), None) => true,
    }
}

/// Reads (trace_id, span_id) of the rows of the file at `path` whose trace id is one of
/// `traces` (sorted and distinct, lower-case hex as stored), and how many rows it read to find
/// them. Only the row groups whose `trace_id` min/max and bloom filter hold one of the ids are
/// read, and within them only such pages (the page index; a row group is sorted by trace id,
/// so a trace sits in one or two pages of [`DATA_PAGE_ROWS`] rows). Exact: statistics only skip rows that cannot
/// match, and the rows read are compared by value. A file without statistics or page index
/// is read whole.
///
/// # Errors
/// I/O or Parquet errors.
pub fn read_keys_of_traces(
    path: &Path,
    traces: &[String],
) -> io::Result<(Vec<(String, String)>, usize)> {
    use parquet::arrow::arrow_reader::{ArrowReaderOptions, RowSelection, RowSelector};
    use parquet::file::page_index::column_index::ColumnIndexMetaData;

    let options = ArrowReaderOptions::new()
        .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Optional);
    let file = File::open(path)?;
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file.try_clone()?, options)
        .map_err(io::Error::other)?;
    let meta = Arc::clone(builder.metadata());
    let Some(trace_col) = builder
        .parquet_schema()
        .columns()
        .iter()
        .position(|c| c.path().string() == col::TRACE_ID)
    else {
        return Ok((Vec::new(), 0));
    };
    let mut row_groups = Vec::new();
    let mut selectors: Vec<RowSelector> = Vec::new();
    for (g, group) in meta.row_groups().iter().enumerate() {
        let stats = group.column(trace_col).statistics();
        if !any_within(
            traces,
            stats.and_then(|s| s.min_bytes_opt()),
            stats.and_then(|s| s.max_bytes_opt()),
        ) {
            continue;
        }
        // Row groups of several seals each span the whole id range: their bloom filters
        // tell them apart (a row group without one is read).
        let bloom =
            parquet::bloom_filter::Sbbf::read_from_column_chunk(group.column(trace_col), &file)
                .map_err(io::Error::other)?;
        if bloom.is_some_and(|b| !traces.iter().any(|t| b.check(t.as_str()))) {
            continue;
        }
        row_groups.push(g);
        let rows = usize::try_from(group.num_rows()).unwrap_or(0);
        let pages = meta
            .column_index()
            .zip(meta.offset_index())
            .and_then(|(ci, oi)| Some((ci.get(g)?.get(trace_col)?, oi.get(g)?.get(trace_col)?)));
        let Some((ColumnIndexMetaData::BYTE_ARRAY(index), offsets)) = pages else {
            selectors.push(RowSelector::select(rows));
            continue;
        };
        let locations = offsets.page_locations();
        for (p, page) in locations.iter().enumerate() {
            let first = usize::try_from(page.first_row_index).unwrap_or(0);
            let end = locations
                .get(p + 1)
                .map_or(rows, |n| usize::try_from(n.first_row_index).unwrap_or(rows));
            let n = end.saturating_sub(first);
            if any_within(traces, index.min_value(p), index.max_value(p)) {
                selectors.push(RowSelector::select(n));
            } else {
                selectors.push(RowSelector::skip(n));
            }
        }
    }
    if row_groups.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let mask = ProjectionMask::columns(builder.parquet_schema(), [col::TRACE_ID, col::SPAN_ID]);
    let reader = builder
        .with_row_groups(row_groups)
        .with_row_selection(RowSelection::from(selectors))
        .with_projection(mask)
        .build()
        .map_err(io::Error::other)?;
    let mut out = Vec::new();
    let read = collect_keys(
        reader,
        |t| traces.binary_search_by(|x| x.as_str().cmp(t)).is_ok(),
        &mut out,
    )?;
    Ok((out, read))
}

/// The rows of the file at `path` (its footer).
///
/// # Errors
/// I/O or Parquet errors.
pub fn read_rows(path: &Path) -> io::Result<u64> {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(File::open(path)?).map_err(io::Error::other)?;
    Ok(u64::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0))
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

/// A batch of the `spans` key columns only: `trace_id` and `span_id` (hex, as stored) and
/// `start_time_unix_nano` (Unix ns), row i from the i-th item of each. It is what the duplicate
/// filter and the Parquet writer's sort read; the store's tests and benchmarks build rows with it.
///
/// # Errors
/// An Arrow error when the three lengths differ.
pub fn key_batch(
    traces: impl IntoIterator<Item = String>,
    spans: impl IntoIterator<Item = String>,
    starts: impl IntoIterator<Item = i64>,
) -> Result<RecordBatch, ArrowError> {
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![
        Field::new(col::TRACE_ID, DataType::Utf8, false),
        Field::new(col::SPAN_ID, DataType::Utf8, false),
        Field::new(col::START_TIME_UNIX_NANO, DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(traces)),
            Arc::new(StringArray::from_iter_values(spans)),
            Arc::new(Int64Array::from_iter_values(starts)),
        ],
    )
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
    use proptest::prelude::*;

    proptest! {
        /// Rows come out in the byte order of their (hour, trace_id, start, span_id) keys,
        /// ties by position, whatever the ids look like (hex or not, of any case and length)
        /// and however the rows are split into batches.
        #[test]
        fn storage_order_is_the_byte_order_of_the_keys(
            rows in prop::collection::vec(
                (0u8..4, any::<u128>(), 0u8..3, 0i64..3, any::<u64>()), 1..200),
            odd in prop::option::of((0usize..200, prop::sample::select(
                vec!["0A", "00000000000000000000000000000ABC", "xyz", ""]))),
            split in 1usize..50,
        ) {
            let mut traces = Vec::new();
            let mut spans = Vec::new();
            let mut starts = Vec::new();
            for &(t, trace, s, hour, span) in &rows {
                // Few distinct values, so ties on each key part are common.
                traces.push(format!("{:032x}", trace % u128::from(t + 1)));
                spans.push(format!("{:016x}", span % u64::from(s + 1)));
                starts.push(hour * 3_600_000_000_000 + (span % 3) as i64);
            }
            if let Some((at, id)) = odd {
                let at = at % traces.len();
                traces[at] = id.to_owned();
            }
            let whole = key_batch(traces, spans, starts).unwrap();
            let batches: Vec<RecordBatch> = (0..whole.num_rows())
                .step_by(split)
                .map(|at| whole.slice(at, split.min(whole.num_rows() - at)))
                .collect();
            // Each row's key, ending with its position: (hour, trace_id, start, span_id, at).
            let key = |(b, r): RowRef| {
                let batch: &RecordBatch = &batches[b];
                let start = batch.column(2).as_primitive::<Int64Type>().value(r);
                (
                    hour_of(start),
                    batch.column(0).as_string::<i32>().value(r).to_owned(),
                    start,
                    batch.column(1).as_string::<i32>().value(r).to_owned(),
                    (b, r),
                )
            };
            let order = storage_order(&batches).unwrap();
            let keys: Vec<_> = order
                .iter()
                .flat_map(|(hour, rows)| rows.iter().map(move |&at| (*hour, at)))
                .map(|(hour, at)| {
                    let k = key(at);
                    assert_eq!(k.0, hour, "row {at:?} listed under another hour");
                    k
                })
                .collect();
            // Every row once, hours once each, and keys strictly ascending (ties by position).
            prop_assert_eq!(keys.len(), whole.num_rows());
            prop_assert!(order.windows(2).all(|w| w[0].0 < w[1].0));
            prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "{:?}", keys);
        }
    }

    #[test]
    fn trace_ranges_hold_ids_by_byte_order() {
        let ids = ["0b".to_owned(), "0d".to_owned()];
        assert!(any_within(&ids, Some(b"0a"), Some(b"0b")));
        assert!(any_within(&ids, Some(b"0c"), Some(b"0e")));
        assert!(!any_within(&ids, Some(b"0c"), Some(b"0c")));
        assert!(!any_within(&ids, Some(b"0e"), Some(b"0f")));
        assert!(!any_within(&ids, Some(b"00"), Some(b"0a")));
        assert!(any_within(&ids, None, Some(b"0b")));
        assert!(any_within(&ids, Some(b"0d"), None));
        assert!(!any_within(&ids, Some(b"0e"), None));
        assert!(!any_within(&[], None, None));
    }

    #[test]
    fn keys_of_traces_are_read_from_their_pages_of_the_row_groups_holding_them() {
        // 40,000 spans of 8,000 traces (5 each) in row groups of 10,000 rows, pages of
        // DATA_PAGE_ROWS: the selection must map pages to rows across skipped row groups.
        let n = 40_000u64;
        let trace = |i: u64| format!("{:032x}", i / 5 + 1);
        let batch = key_batch(
            (0..n).map(trace),
            (0..n).map(|i| format!("{:016x}", i + 1)),
            (0..n).map(|i| i as i64),
        )
        .unwrap();
        let segment = Segment::plain(batch.clone());
        let dir = tempfile::tempdir().unwrap();
        let mut seq = 0;
        let metas = write_segments_in(dir.path(), &[&segment], 5, &mut seq, 3, 10_000).unwrap();
        let path = &metas[0].path;
        let groups = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
            .unwrap()
            .metadata()
            .num_row_groups();
        assert_eq!(groups, 4);
        let all = read_keys(path).unwrap();
        // Traces in the second and fourth row groups, and one in no row group.
        let mut wanted = vec![trace(12_345), trace(35_000), format!("{:032x}", u128::MAX)];
        wanted.sort();
        let (mut found, read) = read_keys_of_traces(path, &wanted).unwrap();
        found.sort();
        let mut expected: Vec<(String, String)> = all
            .into_iter()
            .filter(|(t, _)| wanted.contains(t))
            .collect();
        expected.sort();
        assert_eq!(expected.len(), 10);
        assert_eq!(found, expected);
        assert!(
            (10..=2 * DATA_PAGE_ROWS).contains(&read),
            "{read} rows read"
        );
        // No wanted trace: nothing read.
        assert_eq!(
            read_keys_of_traces(path, &[format!("{:032x}", 0)]).unwrap(),
            (Vec::new(), 0)
        );
    }

    #[test]
    fn hour_directories_round_trip() {
        let h = hour_of(1_735_732_812_005_000_000);
        assert_eq!(h % HOUR_NS, 0);
        assert_eq!(hour_dir_name(h), "hour=2025-01-01T12");
        assert_eq!(parse_hour_dir(&hour_dir_name(h)), Some(h));
        assert_eq!(hour_of(-1), -HOUR_NS);
    }

    /// The trace id of trace `t` in [`scrambled_keys`] (spread over the id space).
    fn scrambled_trace(t: usize) -> String {
        format!("{:032x}", (t as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// `rows` key rows, 10 spans per trace ([`scrambled_trace`] of row / 10), span id and
    /// start time the row number, in a scrambled order (the writer sorts them).
    fn scrambled_keys(rows: usize) -> RecordBatch {
        let order: Vec<usize> = (0..rows).map(|i| (i * 7919) % rows).collect();
        key_batch(
            order.iter().map(|&i| scrambled_trace(i / 10)),
            order.iter().map(|&i| format!("{i:016x}")),
            order.iter().map(|&i| i as i64),
        )
        .unwrap()
    }

    /// A reader of the file at `path` with its page index and bloom filters loaded.
    fn indexed_reader(path: &Path) -> parquet::file::serialized_reader::SerializedFileReader<File> {
        use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};
        let options = ReadOptionsBuilder::new()
            .with_page_index()
            .with_reader_properties(
                parquet::file::properties::ReaderProperties::builder()
                    .set_read_bloom_filter(true)
                    .build(),
            )
            .build();
        SerializedFileReader::new_with_options(File::open(path).unwrap(), options).unwrap()
    }

    /// A lookup by trace id can skip a file by its bloom filter and, within it, every page
    /// of `trace_id` but one by the page index.
    #[test]
    fn files_carry_a_trace_id_bloom_filter_and_page_index() {
        use parquet::file::reader::FileReader;

        let rows = 3 * DATA_PAGE_ROWS;
        let trace = scrambled_trace;
        let batch = scrambled_keys(rows);
        let dir = tempfile::tempdir().unwrap();
        let segment = Segment::plain(batch.clone());
        let mut seq = 0;
        let meta = write_segments(dir.path(), &[&segment], 1, &mut seq, 3)
            .unwrap()
            .remove(0);
        // The file's trace index, as written and as read back at open, holds every trace.
        let written = meta.traces.as_deref().unwrap();
        assert_eq!(written.len(), rows.div_ceil(10));
        assert_eq!(&read_trace_index(&meta.path).unwrap(), written);
        assert!(written.may_contain(&trace(0)) && written.may_contain(&trace(rows / 10 - 1)));
        assert!(!written.may_contain(&trace(rows)));
        let reader = indexed_reader(&meta.path);
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
    /// A flush copies sealed parts' row groups as encoded, beside the plain rows it encodes:
    /// every row once, each row group in storage order, each keeping its trace_id bloom filter
    /// and page index, so a lookup by trace still finds exactly the trace's rows.
    #[test]
    fn sealed_parts_are_copied_into_files_with_their_indexes() {
        use parquet::file::page_index::column_index::ColumnIndexMetaData;
        use parquet::file::reader::FileReader;

        let rows = 2 * DATA_PAGE_ROWS;
        let trace = scrambled_trace;
        // Scrambled, so each trace has spans in both halves.
        let batch = scrambled_keys(rows);
        let (a, b) = (batch.slice(0, rows / 2), batch.slice(rows / 2, rows / 2));
        let part = encode_parts(&[&Segment::plain(a.clone())], 3)
            .unwrap()
            .remove(0);
        let sealed = Segment::from_part(part);
        let plain = Segment::plain(b.clone());
        let dir = tempfile::tempdir().unwrap();
        let mut seq = 0;
        let meta = write_segments(dir.path(), &[&sealed, &plain], 1, &mut seq, 3)
            .unwrap()
            .remove(0);
        let sorted = |x: &RecordBatch| {
            let by = |c: usize| arrow::compute::SortColumn {
                values: Arc::clone(x.column(c)),
                options: None,
            };
            let order = arrow::compute::lexsort_to_indices(&[by(0), by(2), by(1)], None).unwrap();
            arrow::compute::take_record_batch(x, &order).unwrap()
        };
        let expected =
            arrow::compute::concat_batches(&batch.schema(), &[sorted(&a), sorted(&b)]).unwrap();
        let parts: Vec<RecordBatch> =
            ParquetRecordBatchReaderBuilder::try_new(File::open(&meta.path).unwrap())
                .unwrap()
                .build()
                .unwrap()
                .map(Result::unwrap)
                .collect();
        let got = arrow::compute::concat_batches(&parts[0].schema(), &parts).unwrap();
        assert_eq!(got.columns(), expected.columns());
        assert_eq!(meta.traces.as_deref().unwrap().len(), rows.div_ceil(10));

        let reader = indexed_reader(&meta.path);
        assert_eq!(reader.metadata().num_row_groups(), 2);
        for (g, half) in [&a, &b].into_iter().enumerate() {
            let bloom = reader
                .get_row_group(g)
                .unwrap()
                .get_column_bloom_filter(0)
                .cloned()
                .expect("trace_id bloom filter");
            for id in half.column(0).as_string::<i32>().iter().flatten() {
                assert!(bloom.check(id), "row group {g}: {id} must pass");
            }
            assert!(!matches!(
                reader.metadata().column_index().unwrap()[g][0],
                ColumnIndexMetaData::NONE
            ));
            let pages = reader.metadata().offset_index().unwrap()[g][0].page_locations();
            assert_eq!(pages.len(), 1, "row group {g}");
        }
        let mut wanted = vec![trace(5), trace(rows / 10 - 1)];
        wanted.sort();
        let (mut found, _) = read_keys_of_traces(&meta.path, &wanted).unwrap();
        found.sort();
        let ids = batch.column(0).as_string::<i32>();
        let spans = batch.column(1).as_string::<i32>();
        let mut want: Vec<(String, String)> = (0..rows)
            .filter(|&i| wanted.iter().any(|w| w == ids.value(i)))
            .map(|i| (ids.value(i).to_owned(), spans.value(i).to_owned()))
            .collect();
        want.sort();
        assert_eq!(found.len(), 20);
        assert_eq!(found, want);
    }

    /// Files written from segments a column group at a time hold every row of their hour, in
    /// the order Arrow's own sort gives, with nested columns (a map of two leaves, a list) and
    /// nulls intact, in row groups of the size asked.
    #[test]
    fn files_from_segments_hold_each_hour_sorted() {
        use arrow::array::{
            Array, Int64Array, ListBuilder, MapBuilder, StringArray, StringBuilder,
        };
        use arrow::datatypes::{DataType, Field, Schema};
        use parquet::file::reader::FileReader;
        use parquet::file::serialized_reader::SerializedFileReader;
        let hour = 3_600_000_000_000i64;
        let make = |seed: usize, n: usize| {
            let mut map = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
            let mut list = ListBuilder::new(StringBuilder::new());
            let mut trace = Vec::new();
            let mut span = Vec::new();
            let mut start = Vec::new();
            let mut name = Vec::new();
            for i in 0..n {
                let k = seed * 10_000 + i;
                trace.push(format!("{:032x}", (k * 7919) % 1009));
                span.push(format!("{k:016x}"));
                // Two hours, interleaved.
                start.push((k % 2) as i64 * hour + (k as i64 * 13) % 1000);
                name.push((!k.is_multiple_of(3)).then(|| format!("op{}", k % 5)));
                if k.is_multiple_of(4) {
                    map.append(false).unwrap();
                } else {
                    map.keys().append_value("trade");
                    map.values()
                        .append_value(if k.is_multiple_of(2) { "blue" } else { "green" });
                    map.keys().append_value(format!("ch{}", k % 3));
                    map.values().append_value("green");
                    map.append(true).unwrap();
                }
                for j in 0..k % 3 {
                    list.values().append_value(format!("c{j}"));
                }
                list.append(!k.is_multiple_of(5));
            }
            let map = map.finish();
            let list = list.finish();
            let schema = Arc::new(Schema::new(vec![
                Field::new(col::TRACE_ID, DataType::Utf8, false),
                Field::new("name", DataType::Utf8, true),
                Field::new(col::SPAN_ID, DataType::Utf8, false),
                Field::new("decisions", map.data_type().clone(), true),
                Field::new(col::START_TIME_UNIX_NANO, DataType::Int64, false),
                Field::new("conflicting", list.data_type().clone(), true),
            ]));
            RecordBatch::try_new(
                schema,
                vec![
                    Arc::new(StringArray::from(trace)),
                    Arc::new(StringArray::from(name)),
                    Arc::new(StringArray::from(span)),
                    Arc::new(map),
                    Arc::new(Int64Array::from(start)),
                    Arc::new(list),
                ],
            )
            .unwrap()
        };
        let batches = [make(0, 1500), make(1, 700), make(2, 2300)];
        let segments: Vec<Segment> = batches.iter().map(|b| Segment::plain(b.clone())).collect();
        let refs: Vec<&Segment> = segments.iter().collect();
        let dir = tempfile::tempdir().unwrap();
        let mut seq = 0;
        let metas = write_segments_in(dir.path(), &refs, 5, &mut seq, 3, 1000).unwrap();
        assert_eq!(seq, 2);
        assert_eq!(
            metas
                .iter()
                .map(|m| m.hour_start_unix_nano)
                .collect::<Vec<_>>(),
            [0, hour]
        );
        let all = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        let read = |path: &Path| {
            let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
                .unwrap()
                .build()
                .unwrap();
            let parts: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
            arrow::compute::concat_batches(&parts[0].schema(), &parts).unwrap()
        };
        for meta in &metas {
            let starts = all
                .column_by_name(col::START_TIME_UNIX_NANO)
                .unwrap()
                .as_primitive::<Int64Type>();
            let mask: arrow::array::BooleanArray = starts
                .iter()
                .map(|s| Some(hour_of(s.unwrap()) == meta.hour_start_unix_nano))
                .collect();
            let rows = arrow::compute::filter_record_batch(&all, &mask).unwrap();
            // The expected order, by Arrow's own sort.
            let by = |name: &str| arrow::compute::SortColumn {
                values: Arc::clone(rows.column_by_name(name).unwrap()),
                options: None,
            };
            let order = arrow::compute::lexsort_to_indices(
                &[
                    by(col::TRACE_ID),
                    by(col::START_TIME_UNIX_NANO),
                    by(col::SPAN_ID),
                ],
                None,
            )
            .unwrap();
            let expected = arrow::compute::take_record_batch(&rows, &order).unwrap();
            let got = read(&meta.path);
            assert_eq!(got.num_rows(), rows.num_rows());
            assert_eq!(got.columns(), expected.columns());
            let ids = expected.column(0).as_string::<i32>();
            assert_eq!(
                meta.traces.as_deref(),
                Some(&TraceIndex::from_ids(ids.iter().flatten()))
            );
            let reader = SerializedFileReader::new(File::open(&meta.path).unwrap()).unwrap();
            assert_eq!(
                reader.metadata().num_row_groups(),
                rows.num_rows().div_ceil(1000)
            );
        }
        assert_eq!(
            metas
                .iter()
                .map(|m| read(&m.path).num_rows())
                .sum::<usize>(),
            4500
        );
    }
}
