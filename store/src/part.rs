//! The Parquet format of a part: one hour's rows encoded as a Parquet file ([`Part`]), the
//! form sealed memory holds and the unit a file is copied from. zstd-compressed; rows of a row
//! group are sorted by (trace_id, start_time_unix_nano) ([`storage_order`]): a trace's spans sit
//! together, so its id repeats and its times are close; ids and times are written without
//! dictionaries (they are nearly unique) and times with delta encoding (`writer_properties`).
//! On the release-walk fixture that took the file from 48.6 to about 28 bytes per span (measured
//! with `bench/src/bin/parquet_breakdown.rs`). Because of that order a lookup by trace id is
//! cheap: `trace_id` carries a bloom filter (a file or row group without the id is skipped) and
//! page-level min/max (only the page holding the id is read, of every column; pages hold at most
//! [`DATA_PAGE_ROWS`] rows).
//!
//! Every part and file carries [`SCHEMA_VERSION`] in its key-value metadata (under
//! [`SCHEMA_VERSION_KEY`]); [`part_reader`] reads rows back without it in their schema.
//!
//! No [`crate::segment::Segment`] here: segments hold parts, not the other way round.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use arrow::error::ArrowError;
use bytes::Bytes;
use dyeline_model::schema::{SCHEMA_VERSION, SCHEMA_VERSION_KEY, col};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::reader::ChunkReader;
use parquet::schema::types::ColumnPath;

use crate::layout::hour_of;
use crate::trace_index::TraceIndex;

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
///
/// The key-value metadata holds [`SCHEMA_VERSION`] under [`SCHEMA_VERSION_KEY`].
pub(crate) fn writer_properties(zstd_level: i32, traces: u64) -> WriterProperties {
    let trace = ColumnPath::from(col::TRACE_ID);
    let mut b = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![KeyValue::new(
            SCHEMA_VERSION_KEY.to_owned(),
            SCHEMA_VERSION.to_string(),
        )]))
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

/// A reader of the part or file `input` whose rows have the schema they were written with.
///
/// The Parquet reader adds a file's key-value metadata to the Arrow schema it reports; the
/// [`SCHEMA_VERSION_KEY`] is left out of it here, so rows read back from a part equal the rows
/// sealed into it, and a file written from parts does not copy the key into its Arrow schema.
/// Files written before the version was (without the key) read as they always did.
///
/// # Errors
/// Parquet errors reading the footer.
pub(crate) fn part_reader<T: ChunkReader + 'static>(
    input: T,
) -> Result<ParquetRecordBatchReaderBuilder<T>, ParquetError> {
    let meta = part_metadata(&input)?;
    Ok(ParquetRecordBatchReaderBuilder::new_with_metadata(
        input, meta,
    ))
}

/// The footer of the part or file `input` as [`part_reader`] reads it (the Arrow schema
/// without [`SCHEMA_VERSION_KEY`]), to build several readers of one file from (one per row
/// group: [`crate::compact`]).
///
/// # Errors
/// Parquet errors reading the footer.
pub(crate) fn part_metadata<T: ChunkReader + 'static>(
    input: &T,
) -> Result<ArrowReaderMetadata, ParquetError> {
    let meta = ArrowReaderMetadata::load(input, ArrowReaderOptions::new())?;
    if !meta.schema().metadata().contains_key(SCHEMA_VERSION_KEY) {
        return Ok(meta);
    }
    let mut schema = meta.schema().as_ref().clone();
    schema.metadata.remove(SCHEMA_VERSION_KEY);
    ArrowReaderMetadata::try_new(
        Arc::clone(meta.metadata()),
        ArrowReaderOptions::new().with_schema(Arc::new(schema)),
    )
}

/// One row of a list of batches: (batch index, row index), as [`interleave_record_batch`](arrow::compute::interleave_record_batch)
/// takes it.
pub type RowRef = (usize, usize);

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

/// Rows per row group of a file written from segments
/// ([`write_segments`](crate::file_write::write_segments)).
pub const ROW_GROUP_ROWS: usize = 256 * 1024;

/// A flush decodes the segments' columns in about this many groups, one group at a time.
const COLUMN_GROUPS: usize = 4;

/// Splits the fields of `sample` into at most about [`COLUMN_GROUPS`] runs of adjacent
/// columns of similar decoded size (a column larger than a share is a group of its own).
pub(crate) fn column_groups(sample: &RecordBatch) -> Vec<Vec<usize>> {
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

/// One hour's rows encoded as a whole Parquet file in memory
/// ([`encode_parts`](crate::seal::encode_parts)): the form in which memory holds rows once
/// sealed ([`Segment::from_part`](crate::segment::Segment::from_part)), and the bytes a flush
/// copies into a file row group by row group, without decoding them
/// ([`write_segments`](crate::file_write::write_segments)).
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
    use crate::file_read::key_batch;
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
}
