//! The Parquet files of `presence`: rows → one file per hour of `time_unix_nano`
//! ([`write_hours`]), rows sorted by (instance_id, time_unix_nano), zstd, the layout's version
//! in the key-value metadata ([`PRESENCE_SCHEMA_VERSION_KEY`]); and files → rows in the current
//! schema ([`read_file`], a column a file lacks read as null).
//!
//! The file names of [`crate::layout`] (`hour=…/part-<written_unix_ms>-<seq>.parquet`), with the
//! WAL segment the flush closed as `seq` ([`wal_through`]): a file holds every row of the
//! presence WAL up to that segment, so after a crash between writing the files and deleting the
//! WAL, recovery skips the segments a file already holds instead of doubling their rows.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, RecordBatch, new_null_array};
use arrow::compute::{SortColumn, concat_batches, filter_record_batch, lexsort_to_indices, take};
use arrow::datatypes::Int64Type;
use dyeline_model::presence::{
    PRESENCE_SCHEMA_VERSION, PRESENCE_SCHEMA_VERSION_KEY, col, presence_schema,
};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::file_write::write_hour_file;
use crate::layout::{FileMeta, hour_of};

/// The WAL segment a presence file's rows go up to (its name's `seq`); 0 when the name says
/// none.
pub(crate) fn wal_through(file: &FileMeta) -> u64 {
    file.path
        .file_name()
        .and_then(|n| n.to_str())
        .map_or(0, crate::layout::seq_of)
}

/// Writes `batches` (the `presence` schema) as new files under `dir`, one per hour of
/// `time_unix_nano`, named with `written_unix_ms` and `wal_segment`.
///
/// # Errors
/// Arrow, Parquet and I/O errors (a failed write leaves a `.tmp` the next open removes).
pub(crate) fn write_hours(
    dir: &Path,
    batches: &[RecordBatch],
    written_unix_ms: i64,
    wal_segment: u64,
    zstd_level: i32,
) -> io::Result<Vec<FileMeta>> {
    let schema = presence_schema();
    let all = concat_batches(&schema, batches).map_err(io::Error::other)?;
    if all.num_rows() == 0 {
        return Ok(Vec::new());
    }
    let times = time_column(&all)?;
    let hours: Vec<i64> = times.values().iter().map(|&t| hour_of(t)).collect();
    let mut distinct = hours.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![KeyValue::new(
            PRESENCE_SCHEMA_VERSION_KEY.to_owned(),
            PRESENCE_SCHEMA_VERSION.to_string(),
        )]))
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(zstd_level).unwrap_or_default(),
        ))
        .build();
    let mut out = Vec::with_capacity(distinct.len());
    for hour in distinct {
        let mask: BooleanArray = hours.iter().map(|&h| Some(h == hour)).collect();
        let rows = sorted(&filter_record_batch(&all, &mask).map_err(io::Error::other)?)?;
        let props = props.clone();
        out.push(write_hour_file(
            dir,
            hour,
            written_unix_ms,
            wal_segment,
            |file| {
                let mut w = ArrowWriter::try_new(file, Arc::clone(&schema), Some(props))
                    .map_err(io::Error::other)?;
                w.write(&rows).map_err(io::Error::other)?;
                w.into_inner().map_err(io::Error::other)
            },
        )?);
    }
    Ok(out)
}

fn time_column(batch: &RecordBatch) -> io::Result<&arrow::array::Int64Array> {
    batch
        .column_by_name(col::TIME_UNIX_NANO)
        .and_then(|c| c.as_primitive_opt::<Int64Type>())
        .ok_or_else(|| io::Error::other("presence rows without an Int64 time_unix_nano"))
}

/// `batch` sorted by (instance_id, time_unix_nano).
fn sorted(batch: &RecordBatch) -> io::Result<RecordBatch> {
    let key = |name: &str| -> io::Result<SortColumn> {
        Ok(SortColumn {
            values: Arc::clone(
                batch
                    .column_by_name(name)
                    .ok_or_else(|| io::Error::other(format!("no column {name}")))?,
            ),
            options: None,
        })
    };
    let order = lexsort_to_indices(&[key(col::INSTANCE_ID)?, key(col::TIME_UNIX_NANO)?], None)
        .map_err(io::Error::other)?;
    let columns = batch
        .columns()
        .iter()
        .map(|c| take(c, &order, None))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io::Error::other)?;
    RecordBatch::try_new(batch.schema(), columns).map_err(io::Error::other)
}

/// The rows of the presence file at `path` whose time lies in `lo..=hi`, in the current
/// schema ([`conform`]).
///
/// # Errors
/// I/O and Parquet errors.
pub(crate) fn read_file(path: &Path, lo: i64, hi: i64) -> io::Result<Vec<RecordBatch>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)
        .map_err(io::Error::other)?
        .build()
        .map_err(io::Error::other)?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = conform(&batch.map_err(io::Error::other)?)?;
        let batch = in_range(&batch, lo, hi)?;
        if batch.num_rows() > 0 {
            out.push(batch);
        }
    }
    Ok(out)
}

/// The rows of `batch` whose time lies in `lo..=hi`.
///
/// # Errors
/// A batch without the time column.
pub(crate) fn in_range(batch: &RecordBatch, lo: i64, hi: i64) -> io::Result<RecordBatch> {
    let times = time_column(batch)?;
    if times.values().iter().all(|t| (lo..=hi).contains(t)) {
        return Ok(batch.clone());
    }
    let mask: BooleanArray = times
        .values()
        .iter()
        .map(|t| Some((lo..=hi).contains(t)))
        .collect();
    filter_record_batch(batch, &mask).map_err(io::Error::other)
}

/// `batch` in the current `presence` schema: its columns taken by name, a column it lacks (a
/// file written before the column was) as nulls.
///
/// # Errors
/// A column of the wrong type, or a non-nullable column missing.
pub(crate) fn conform(batch: &RecordBatch) -> io::Result<RecordBatch> {
    let schema = presence_schema();
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) => Arc::clone(c),
            None => new_null_array(f.data_type(), batch.num_rows()),
        })
        .collect();
    RecordBatch::try_new(schema, columns).map_err(io::Error::other)
}
