//! Sealing: memory segments → in-memory parts ([`encode_parts`]), one Parquet file per hour in
//! the store files' format ([`crate::part`]). The store seals its newest rows so, and a flush
//! copies their row groups into a file without decoding them
//! ([`crate::file_write::write_segments`]).

use std::io;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::interleave_record_batch;
use arrow::datatypes::Int64Type;
use bytes::Bytes;
use dyeline_model::schema::col;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowColumnWriter, compute_leaves};
use parquet::file::writer::SerializedFileWriter;

use crate::part::{Part, ROW_GROUP_ROWS, RowRef, column_groups, storage_order, writer_properties};
use crate::segment::Segment;
use crate::trace_index::TraceIndex;

/// Rows of a file are handed to the Parquet writer this many at a time, so a flush copies
/// at most this many rows at once on top of the batches it reads from.
pub const WRITE_CHUNK_ROWS: usize = 8 * 1024;

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

pub(crate) fn encode_parts_in(
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
