//! The merge of a compaction ([`merge`]): the row groups of some files of the `spans` table,
//! each sorted by (trace_id, start_time_unix_nano, span_id) ([`crate::part::storage_order`]),
//! merged as sorted runs into new files in that order, one row per span key (domain §1:
//! trace_id, span_id, SERVER half; the first seen kept), cut at about a target size. Written
//! in the store's file format ([`writer_properties`]: zstd, bloom filter and page index on
//! `trace_id`, the schema version), each output with its [`TraceIndex`], under its temporary
//! name, fsynced: the caller journals and renames them ([`crate::compact`]).
//!
//! Streaming, k-way: every row group is one run read by its own Parquet reader, a batch at a
//! time; a heap of runs picks the next row. Memory is bounded by the runs, not the hour: about
//! [`MERGE_ROWS`] decoded rows in the runs' batches together (at least 64 per run: with more
//! than `MERGE_ROWS / 64` runs, 64 rows each), one page per column of each run's reader, the
//! output chunk of [`CHUNK_ROWS`] rows and the writer's open row group (at most
//! [`ROW_GROUP_ROWS`] rows, encoded), and the span ids of the trace being merged.
//!
//! Files of an earlier schema version are read with the columns added since as nulls
//! ([`upgrade_rows`]) and written in the current one. The merge is the unit the shared
//! catalog's compaction will reuse; it knows nothing of hours, journals or the file list.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fs::{self, File};
use std::io;
use std::path::PathBuf;

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::interleave_record_batch;
use arrow::datatypes::{Int64Type, SchemaRef};
use dyeline_model::schema::col;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use crate::file_read::server_rows;
use crate::file_write::temp_path;
use crate::part::{ROW_GROUP_ROWS, part_metadata, writer_properties};
use crate::recovery::upgrade_rows;
use crate::trace_index::{TraceIndex, trace_hash};

/// Decoded rows the runs' batches hold together, about (module doc).
pub const MERGE_ROWS: usize = 64 * 1024;

/// Rows handed to the Parquet writer at a time.
pub const CHUNK_ROWS: usize = 8 * 1024;

/// One output of a [`merge`]: written and fsynced under its temporary name.
#[derive(Debug, Clone)]
pub struct MergedFile {
    /// Where it goes once renamed.
    pub path: PathBuf,
    /// Where it is now ([`temp_path`] of `path`).
    pub tmp: PathBuf,
    /// Rows.
    pub rows: u64,
    /// Bytes.
    pub bytes: u64,
    /// Its trace ids.
    pub traces: TraceIndex,
}

/// What a [`merge`] wrote.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    /// The new files, in key order.
    pub files: Vec<MergedFile>,
    /// Rows read.
    pub rows_in: u64,
    /// Rows dropped as duplicates of a span key.
    pub duplicates: u64,
}

/// Merges the rows of the files `inputs` (store files of one hour) into new files: their row
/// groups as sorted runs, rows in storage order, one row per span key (the first in order,
/// ties by input order), a file cut once it holds about `target_bytes` (at a trace's end, so a
/// trace sits in one file). `traces` is about how many distinct trace ids the inputs hold (for
/// the bloom filters' size); `name(i)` is the final path of output `i`. Every output is
/// written under its temporary name and fsynced; on an error those written are removed.
///
/// # Errors
/// I/O and Parquet errors; inputs whose rows have different layouts (not `spans` rows of
/// one schema once upgraded).
pub fn merge(
    inputs: &[PathBuf],
    target_bytes: u64,
    zstd_level: i32,
    traces: usize,
    name: impl FnMut(usize) -> PathBuf,
) -> io::Result<Merged> {
    let mut created = Vec::new();
    let result = merge_into(inputs, target_bytes, zstd_level, traces, name, &mut created);
    if result.is_err() {
        for tmp in created {
            let _ = fs::remove_file(tmp);
        }
    }
    result
}

/// One row group being read: its current batch (in the layout every run shares) and row.
struct Run {
    reader: ParquetRecordBatchReader,
    batch: RecordBatch,
    trace: StringArray,
    start: Int64Array,
    span: StringArray,
    server: Vec<bool>,
    row: usize,
    /// Index of `batch` in the merge's list of source batches.
    src: usize,
}

impl Run {
    /// Reads the first non-empty batch of `reader`; `None` when there is none.
    fn open(mut reader: ParquetRecordBatchReader, schema: &SchemaRef) -> io::Result<Option<Self>> {
        let Some(batch) = next_batch(&mut reader, schema)? else {
            return Ok(None);
        };
        let (trace, start, span, server) = keys(&batch)?;
        Ok(Some(Self {
            reader,
            batch,
            trace,
            start,
            span,
            server,
            row: 0,
            src: 0,
        }))
    }

    /// Moves to the next row; `Some(true)` when that loaded a new batch, `None` at the end.
    fn advance(&mut self, schema: &SchemaRef) -> io::Result<Option<bool>> {
        self.row += 1;
        if self.row < self.batch.num_rows() {
            return Ok(Some(false));
        }
        let Some(batch) = next_batch(&mut self.reader, schema)? else {
            return Ok(None);
        };
        (self.trace, self.start, self.span, self.server) = keys(&batch)?;
        self.batch = batch;
        self.row = 0;
        Ok(Some(true))
    }
}

/// The next non-empty batch of `reader`, upgraded to the current layout, which must be
/// `schema`'s.
fn next_batch(
    reader: &mut ParquetRecordBatchReader,
    schema: &SchemaRef,
) -> io::Result<Option<RecordBatch>> {
    for batch in reader.by_ref() {
        let batch = upgrade_rows(batch.map_err(io::Error::other)?).map_err(io::Error::other)?;
        if batch.schema().fields() != schema.fields() {
            return Err(io::Error::other(
                "the files to merge hold rows of different layouts",
            ));
        }
        if batch.num_rows() > 0 {
            return Ok(Some(batch));
        }
    }
    Ok(None)
}

/// The key columns of `batch` and whether each row is a SERVER span.
fn keys(batch: &RecordBatch) -> io::Result<(StringArray, Int64Array, StringArray, Vec<bool>)> {
    let column = |name: &str| {
        batch
            .column_by_name(name)
            .ok_or_else(|| io::Error::other(format!("no {name} column")))
    };
    let string = |name: &str| -> io::Result<StringArray> {
        column(name)?
            .as_string_opt::<i32>()
            .cloned()
            .ok_or_else(|| io::Error::other(format!("{name} is not Utf8")))
    };
    let start = column(col::START_TIME_UNIX_NANO)?
        .as_primitive_opt::<Int64Type>()
        .cloned()
        .ok_or_else(|| io::Error::other("start_time_unix_nano is not Int64"))?;
    Ok((
        string(col::TRACE_ID)?,
        start,
        string(col::SPAN_ID)?,
        server_rows(batch),
    ))
}

/// Storage order of the runs' current rows, ties by run (input order).
fn key_order(runs: &[Run], a: usize, b: usize) -> Ordering {
    let (x, y) = (&runs[a], &runs[b]);
    x.trace
        .value(x.row)
        .as_bytes()
        .cmp(y.trace.value(y.row).as_bytes())
        .then(x.start.value(x.row).cmp(&y.start.value(y.row)))
        .then(
            x.span
                .value(x.row)
                .as_bytes()
                .cmp(y.span.value(y.row).as_bytes()),
        )
        .then(a.cmp(&b))
}

/// Restores the heap order of `heap` (run indices, least key first) below position `i`.
fn sift_down(heap: &mut [usize], runs: &[Run], mut i: usize) {
    loop {
        let mut least = i;
        for child in [2 * i + 1, 2 * i + 2] {
            if child < heap.len() && key_order(runs, heap[child], heap[least]).is_lt() {
                least = child;
            }
        }
        if least == i {
            return;
        }
        heap.swap(i, least);
        i = least;
    }
}

/// The output file being written.
struct Output {
    writer: ArrowWriter<File>,
    path: PathBuf,
    tmp: PathBuf,
    rows: u64,
}

impl Output {
    fn finish(self, traces: TraceIndex) -> io::Result<MergedFile> {
        self.writer
            .into_inner()
            .map_err(io::Error::other)?
            .sync_all()?;
        Ok(MergedFile {
            bytes: fs::metadata(&self.tmp)?.len(),
            path: self.path,
            tmp: self.tmp,
            rows: self.rows,
            traces,
        })
    }
}

/// The writing side of a merge: the rows picked and not yet written, the batches they come
/// from, and the output file.
struct Sink<F> {
    schema: SchemaRef,
    props: parquet::file::properties::WriterProperties,
    name: F,
    target_bytes: u64,
    /// Source batches of `picked`; each live run's current batch is among them.
    sources: Vec<RecordBatch>,
    picked: Vec<(usize, usize)>,
    /// Hashes of the traces of the output's rows, written or picked (an output is cut only
    /// between traces).
    traces: Vec<u64>,
    out: Option<Output>,
    files: Vec<MergedFile>,
}

impl<F: FnMut(usize) -> PathBuf> Sink<F> {
    /// Writes the picked rows to the output (opened first if none is).
    fn write_picked(&mut self, created: &mut Vec<PathBuf>) -> io::Result<()> {
        if self.picked.is_empty() {
            return Ok(());
        }
        let sources: Vec<&RecordBatch> = self.sources.iter().collect();
        let rows = interleave_record_batch(&sources, &self.picked).map_err(io::Error::other)?;
        let out = match &mut self.out {
            Some(out) => out,
            None => {
                let path = (self.name)(self.files.len());
                let tmp = temp_path(&path);
                created.push(tmp.clone());
                let writer = ArrowWriter::try_new(
                    File::create(&tmp)?,
                    self.schema.clone(),
                    Some(self.props.clone()),
                )
                .map_err(io::Error::other)?;
                self.out.insert(Output {
                    writer,
                    path,
                    tmp,
                    rows: 0,
                })
            }
        };
        out.writer.write(&rows).map_err(io::Error::other)?;
        out.rows += rows.num_rows() as u64;
        self.picked.clear();
        Ok(())
    }

    /// True once the output holds about the target size.
    fn full(&self) -> bool {
        self.out.as_ref().is_some_and(|o| {
            (o.writer.bytes_written() + o.writer.in_progress_size()) as u64 >= self.target_bytes
        })
    }

    /// Closes the output, if any.
    fn cut(&mut self) -> io::Result<()> {
        if let Some(out) = self.out.take() {
            let traces = TraceIndex::from_hashes(std::mem::take(&mut self.traces));
            self.files.push(out.finish(traces)?);
        }
        Ok(())
    }
}

fn merge_into(
    inputs: &[PathBuf],
    target_bytes: u64,
    zstd_level: i32,
    traces: usize,
    name: impl FnMut(usize) -> PathBuf,
    created: &mut Vec<PathBuf>,
) -> io::Result<Merged> {
    let mut footers = Vec::with_capacity(inputs.len());
    for path in inputs {
        let file = File::open(path)?;
        let meta = part_metadata(&file).map_err(io::Error::other)?;
        footers.push((file, meta));
    }
    let groups: usize = footers
        .iter()
        .map(|(_, m)| m.metadata().num_row_groups())
        .sum();
    let total_rows: i64 = footers
        .iter()
        .map(|(_, m)| m.metadata().file_metadata().num_rows())
        .sum();
    let batch_rows = (MERGE_ROWS / groups.max(1)).clamp(64, CHUNK_ROWS);
    // The layout every run is read in: the current schema, unless the inputs are not whole
    // `spans` rows (the store's tests write key columns only), then theirs.
    let Some(schema) = footers.first().map(|(_, m)| {
        let sample = RecordBatch::new_empty(m.schema().clone());
        upgrade_rows(sample).map(|b| b.schema())
    }) else {
        return Ok(Merged::default());
    };
    let schema = schema.map_err(io::Error::other)?;
    let mut runs = Vec::with_capacity(groups);
    for (file, meta) in &footers {
        for g in 0..meta.metadata().num_row_groups() {
            let reader =
                ParquetRecordBatchReaderBuilder::new_with_metadata(file.try_clone()?, meta.clone())
                    .with_row_groups(vec![g])
                    .with_batch_size(batch_rows)
                    .build()
                    .map_err(io::Error::other)?;
            if let Some(run) = Run::open(reader, &schema)? {
                runs.push(run);
            }
        }
    }
    // Distinct traces a row group of the output holds, about: the bloom filters' size.
    let per_group =
        (traces as f64 * ROW_GROUP_ROWS as f64 / total_rows.max(1) as f64 * 1.25).ceil() as usize;
    let ndv = per_group.clamp(1, traces.max(1)) as u64;
    let mut sink = Sink {
        schema: schema.clone(),
        props: writer_properties(zstd_level, ndv),
        name,
        target_bytes,
        sources: Vec::new(),
        picked: Vec::with_capacity(CHUNK_ROWS),
        traces: Vec::new(),
        out: None,
        files: Vec::new(),
    };
    for run in &mut runs {
        run.src = sink.sources.len();
        sink.sources.push(run.batch.clone());
    }
    let mut heap: Vec<usize> = (0..runs.len()).collect();
    for i in (0..heap.len() / 2).rev() {
        sift_down(&mut heap, &runs, i);
    }
    let mut merged = Merged::default();
    let mut trace = String::new();
    let mut seen: HashSet<(Box<[u8]>, bool)> = HashSet::new();
    let mut cut_due = false;
    while let Some(&top) = heap.first() {
        let run = &runs[top];
        let id = run.trace.value(run.row);
        if id != trace {
            if cut_due {
                sink.write_picked(created)?;
                sink.cut()?;
                cut_due = false;
            }
            trace.clear();
            trace.push_str(id);
            seen.clear();
            sink.traces.push(trace_hash(id));
        }
        let server = run.server.get(run.row).copied().unwrap_or(false);
        merged.rows_in += 1;
        if seen.insert((run.span.value(run.row).as_bytes().into(), server)) {
            sink.picked.push((run.src, run.row));
        } else {
            merged.duplicates += 1;
        }
        match runs[top].advance(&schema)? {
            Some(false) => {}
            Some(true) => {
                runs[top].src = sink.sources.len();
                sink.sources.push(runs[top].batch.clone());
            }
            None => {
                heap.swap_remove(0);
            }
        }
        sift_down(&mut heap, &runs, 0);
        if sink.picked.len() >= CHUNK_ROWS {
            sink.write_picked(created)?;
            cut_due = sink.full();
            // Only the live runs' batches are sources of later rows.
            sink.sources.clear();
            for &r in &heap {
                runs[r].src = sink.sources.len();
                sink.sources.push(runs[r].batch.clone());
            }
        }
    }
    sink.write_picked(created)?;
    sink.cut()?;
    merged.files = sink.files;
    Ok(merged)
}
