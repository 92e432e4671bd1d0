//! Reading the store's files: the span keys of a file ([`StoredKey`]: trace_id, span_id and
//! whether the span is a SERVER half, domain §1), whole ([`read_keys`]) or of given traces only, through the `trace_id` bloom filters and page index
//! ([`read_keys_of_traces`]); a file's [`TraceIndex`] and row count; and [`key_batch`], the
//! key columns as a batch.
//!
//! And per-file reading for readers outside the store (the analyzer keeps its records per
//! file, files being immutable once written): [`crate::Snapshot::files_in`] lists the files of
//! a time range as [`FileSource`]s, and [`FileSource::open`] reads the columns asked of one,
//! the low-cardinality ones as dictionaries ([`DICTIONARY_COLUMNS`]), so no reader outside the
//! store opens Parquet itself. A column of the `spans` schema that a file written by an earlier
//! schema version lacks (a nullable column added since) is read as nulls ([`FileReader`]).

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, RecordBatch, new_null_array};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use arrow::error::ArrowError;
use dyeline_model::schema::{col, spans_schema};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};

use crate::layout::FileMeta;
use crate::trace_index::{TraceIndex, trace_hash};

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

/// A stored span's key as its file holds it: (trace_id, span_id) as hex text, and whether the
/// span is a SERVER span (the half of a Zipkin/B3 shared span id that is its own span:
/// [`dyeline_model::SpanKey`]). A file without a `span_kind` column holds no SERVER span.
pub type StoredKey = (String, String, bool);

/// The columns a [`StoredKey`] is read from.
const KEY_COLUMNS: [&str; 3] = [col::TRACE_ID, col::SPAN_ID, col::SPAN_KIND];

/// Reads the [`StoredKey`] of every row of `path` (for rebuilding the duplicate filter).
///
/// # Errors
/// I/O or Parquet errors.
pub fn read_keys(path: &Path) -> io::Result<Vec<StoredKey>> {
    let mut out = Vec::new();
    collect_keys(read_columns(path, &KEY_COLUMNS)?, |_| true, &mut out)?;
    Ok(out)
}

/// Appends to `out` the [`StoredKey`]s of the rows `reader` yields whose trace id passes
/// `keep`; returns the rows read.
fn collect_keys(
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    keep: impl Fn(&str) -> bool,
    out: &mut Vec<StoredKey>,
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
        let server = server_rows(&batch);
        if let (Some(t), Some(s)) = (t, s) {
            for i in 0..batch.num_rows() {
                if keep(t.value(i)) {
                    out.push((
                        t.value(i).to_owned(),
                        s.value(i).to_owned(),
                        server.get(i).copied().unwrap_or(false),
                    ));
                }
            }
        }
    }
    Ok(read)
}

/// Whether each row of `batch` is a SERVER span (its `span_kind` column, plain or
/// dictionary-encoded); empty when the batch has no such column.
pub(crate) fn server_rows(batch: &RecordBatch) -> Vec<bool> {
    let Some(kinds) = batch.column_by_name(col::SPAN_KIND) else {
        return Vec::new();
    };
    let kinds = match arrow::compute::cast(kinds, &DataType::Utf8) {
        Ok(k) => k,
        Err(_) => return Vec::new(),
    };
    let kinds = kinds.as_string::<i32>();
    kinds
        .iter()
        .map(|k| k.is_some_and(dyeline_model::SpanKey::is_server_text))
        .collect()
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

/// Reads the [`StoredKey`]s of the rows of the file at `path` whose trace id is one of
/// `traces` (sorted and distinct, lower-case hex as stored), and how many rows it read to find
/// them. Only the row groups whose `trace_id` min/max and bloom filter hold one of the ids are
/// read, and within them only such pages (the page index; a row group is sorted by trace id,
/// so a trace sits in one or two pages of [`DATA_PAGE_ROWS`](crate::part::DATA_PAGE_ROWS) rows). Exact: statistics only skip rows that cannot
/// match, and the rows read are compared by value. A file without statistics or page index
/// is read whole.
///
/// # Errors
/// I/O or Parquet errors.
pub fn read_keys_of_traces(path: &Path, traces: &[String]) -> io::Result<(Vec<StoredKey>, usize)> {
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
    let mask = ProjectionMask::columns(builder.parquet_schema(), KEY_COLUMNS);
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

/// The rows of the file at `path` and the least and greatest value of its Int64 column
/// `time` (`start_time_unix_nano` of spans, `time_unix_nano` of presence), from its footer's
/// statistics (`None` when a row group has none).
///
/// # Errors
/// I/O or Parquet errors.
pub fn read_start_range(path: &Path, time: &str) -> io::Result<(u64, Option<(i64, i64)>)> {
    use parquet::file::statistics::Statistics;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(File::open(path)?).map_err(io::Error::other)?;
    let meta = builder.metadata();
    let rows = u64::try_from(meta.file_metadata().num_rows()).unwrap_or(0);
    let Some(i) = meta
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.name() == time)
    else {
        return Ok((rows, None));
    };
    let mut range: Option<(i64, i64)> = None;
    for g in meta.row_groups() {
        if g.num_rows() == 0 {
            continue;
        }
        let Some(Statistics::Int64(s)) = g.column(i).statistics() else {
            return Ok((rows, None));
        };
        let (Some(&lo), Some(&hi)) = (s.min_opt(), s.max_opt()) else {
            return Ok((rows, None));
        };
        range = Some(range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
    }
    Ok((rows, range))
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

/// The columns an analyzer reads as dictionaries from the store's files: few distinct values
/// each, and stored dictionary-encoded, so a reader materialises no string per row and can
/// intern each distinct value once.
pub const DICTIONARY_COLUMNS: [&str; 12] = [
    col::SERVICE_NAME,
    col::DEPLOYMENT_ENVIRONMENT,
    col::INSTANCE_ID,
    col::COLOR,
    col::COLOR_RULE,
    col::SPAN_KIND,
    col::TRAFFIC_KIND,
    col::DECISION_SOURCE,
    col::LANE,
    col::LANE_RULE,
    col::LANE_TAG,
    col::LANE_TAG_SOURCE,
];

/// Rows per batch of a [`FileSource::open`] reader.
pub const READ_BATCH_ROWS: usize = 8192;

/// One Parquet file of the store, to be read by a reader that works file by file (the
/// analyzer keeps its records per file, files being immutable once written):
/// [`crate::Snapshot::files_in`] lists them, [`FileSource::open`] reads one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSource {
    meta: FileMeta,
}

/// A reader of one store file ([`FileSource::open`]): its batches and its row count.
pub struct FileBatches {
    /// The batches, of at most [`READ_BATCH_ROWS`] rows each.
    pub reader: FileReader,
    /// Rows of the file (from its footer): a reader can size what it builds once.
    pub rows: usize,
}

/// The batches of [`FileSource::open`]: the columns the file holds, in the file's order,
/// then the asked columns it lacks (nullable columns of the `spans` schema added after the
/// file was written) as null columns, in the order asked.
pub struct FileReader {
    inner: ParquetRecordBatchReader,
    /// The lacking columns' fields, and the schema of the batches with them (`None`: none
    /// lacking, batches passed on as read).
    missing: Option<(Vec<FieldRef>, SchemaRef)>,
}

impl Iterator for FileReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = self.inner.next()?;
        let Some((fields, schema)) = &self.missing else {
            return Some(batch);
        };
        Some(batch.and_then(|b| {
            let rows = b.num_rows();
            let mut columns: Vec<ArrayRef> = b.columns().to_vec();
            columns.extend(fields.iter().map(|f| new_null_array(f.data_type(), rows)));
            RecordBatch::try_new(Arc::clone(schema), columns)
        }))
    }
}

impl FileSource {
    /// The file `meta` of the store.
    pub fn new(meta: FileMeta) -> Self {
        Self { meta }
    }

    /// Its metadata.
    pub fn meta(&self) -> &FileMeta {
        &self.meta
    }

    /// Its absolute path: a file's identity (the store never reuses a name).
    pub fn path(&self) -> &Path {
        &self.meta.path
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.meta.size
    }

    /// The file opened: a local file as it is; an object of shared storage from the local
    /// cache, fetched into it first when absent (and again if the cache dropped it meanwhile).
    fn local_file(&self) -> io::Result<File> {
        let Some(remote) = &self.meta.remote else {
            return File::open(self.path());
        };
        for _ in 0..2 {
            self.meta.ensure_local()?;
            match File::open(self.path()) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                other => return other,
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "object {}: evicted from the cache as soon as fetched",
                remote.key
            ),
        ))
    }

    /// A reader of the columns `columns` (by name; the batches hold them in the file's column
    /// order) in batches of [`READ_BATCH_ROWS`] rows, each of `dictionaries` (as
    /// [`DICTIONARY_COLUMNS`]) that is stored as `Utf8` read as `Dictionary(Int32, Utf8)`, as
    /// it is stored. A nullable `spans` column the file lacks (a file written before the
    /// column was added: an earlier [`SCHEMA_VERSION`](dyeline_model::schema::SCHEMA_VERSION),
    /// version 1 for the links and lane columns) is read as nulls, after the file's columns.
    ///
    /// # Errors
    /// I/O and Parquet errors opening the file (one deleted by retention since it was listed:
    /// [`io::ErrorKind::NotFound`]); a column of `columns` the file lacks that is not a
    /// nullable column of the `spans` schema. Each batch may still carry a read error.
    pub fn open(&self, columns: &[&str], dictionaries: &[&str]) -> io::Result<FileBatches> {
        let file = self.local_file()?;
        let plain = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
            .map_err(io::Error::other)?;
        let hinted: Vec<Field> = plain
            .schema()
            .fields()
            .iter()
            .map(|f| {
                if dictionaries.contains(&f.name().as_str()) && f.data_type() == &DataType::Utf8 {
                    Field::new(
                        f.name(),
                        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                        f.is_nullable(),
                    )
                } else {
                    f.as_ref().clone()
                }
            })
            .collect();
        let metadata = ArrowReaderMetadata::try_new(
            Arc::clone(plain.metadata()),
            ArrowReaderOptions::new().with_schema(Arc::new(Schema::new(hinted))),
        )
        .map_err(io::Error::other)?;
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, metadata);
        let rows = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        let arrow_schema = builder.schema().clone();
        let mut roots = Vec::with_capacity(columns.len());
        let mut missing: Vec<FieldRef> = Vec::new();
        for name in columns {
            match arrow_schema.index_of(name) {
                Ok(i) => roots.push(i),
                Err(e) => missing
                    .push(added_column(name, dictionaries).ok_or_else(|| io::Error::other(e))?),
            }
        }
        roots.sort_unstable();
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
        let inner = builder
            .with_projection(mask)
            .with_batch_size(READ_BATCH_ROWS)
            .build()
            .map_err(io::Error::other)?;
        let missing = (!missing.is_empty()).then(|| {
            let mut fields: Vec<FieldRef> = arrow::array::RecordBatchReader::schema(&inner)
                .fields()
                .to_vec();
            fields.extend(missing.iter().cloned());
            (missing, Arc::new(Schema::new(fields)))
        });
        Ok(FileBatches {
            reader: FileReader { inner, missing },
            rows,
        })
    }
}

/// The field of column `name` for a file written before it was added: a nullable column of
/// the `spans` schema (a dictionary of `Utf8` when `name` is in `dictionaries`); `None` for
/// any other name.
fn added_column(name: &str, dictionaries: &[&str]) -> Option<FieldRef> {
    let field = spans_schema().field_with_name(name).ok()?.clone();
    if !field.is_nullable() {
        return None;
    }
    Some(Arc::new(
        if dictionaries.contains(&name) && field.data_type() == &DataType::Utf8 {
            Field::new(
                name,
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                true,
            )
        } else {
            field
        },
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::file_write::{write_segments, write_segments_in};
    use crate::part::DATA_PAGE_ROWS;
    use crate::segment::Segment;
    use crate::test_support::{close, open_unsynced, write};
    use arrow::array::Array;

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
        let mut expected: Vec<StoredKey> = all
            .into_iter()
            .filter(|(t, _, _)| wanted.contains(t))
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

    /// Rows with two low-cardinality columns beside the keys: `service_name` (one of 3) and
    /// `name` (one of 7), and `color`, null every fifth row; `n` rows in one hour.
    fn analyzer_rows(n: usize) -> RecordBatch {
        use arrow::array::StringArray;
        let keys = key_batch(
            (0..n).map(|i| format!("{:032x}", i / 4 + 1)),
            (0..n).map(|i| format!("{:016x}", i + 1)),
            (0..n).map(|i| i as i64),
        )
        .unwrap();
        let mut fields = keys.schema().fields().to_vec();
        let mut columns = keys.columns().to_vec();
        for (name, values) in [
            (
                col::SERVICE_NAME,
                (0..n).map(|i| Some(format!("svc{}", i % 3))).collect(),
            ),
            (
                col::NAME,
                (0..n).map(|i| Some(format!("op{}", i % 7))).collect(),
            ),
            (
                col::COLOR,
                (0..n)
                    .map(|i| (i % 5 != 0).then(|| ["blue", "green"][i % 2].to_owned()))
                    .collect::<Vec<_>>(),
            ),
        ] {
            fields.push(Arc::new(Field::new(name, DataType::Utf8, true)));
            columns.push(Arc::new(StringArray::from(values)));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    /// The column `name` of every batch `reader` yields, as plain strings.
    fn strings(batches: &[RecordBatch], name: &str) -> Vec<Option<String>> {
        batches
            .iter()
            .flat_map(|b| {
                let c =
                    arrow::compute::cast(b.column_by_name(name).unwrap(), &DataType::Utf8).unwrap();
                let c = c.as_string::<i32>();
                (0..c.len())
                    .map(|i| c.is_valid(i).then(|| c.value(i).to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn a_file_source_reads_the_columns_asked_with_the_dictionary_columns_as_dictionaries() {
        let n = 2 * READ_BATCH_ROWS + 100;
        let dir = tempfile::tempdir().unwrap();
        let segment = Segment::plain(analyzer_rows(n));
        let mut seq = 0;
        let meta = write_segments(dir.path(), &[&segment], 1, &mut seq, 3)
            .unwrap()
            .remove(0);
        let source = FileSource::new(meta.clone());
        assert_eq!(
            (source.path(), source.size()),
            (meta.path.as_path(), meta.size)
        );
        assert_eq!(source.meta(), &meta);

        // Asked out of order: the batches hold the columns in the file's order.
        let asked = [col::COLOR, col::TRACE_ID, col::NAME, col::SERVICE_NAME];
        let FileBatches { reader, rows } = source.open(&asked, &DICTIONARY_COLUMNS).unwrap();
        assert_eq!(rows, n);
        let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
        assert!(batches.iter().all(|b| b.num_rows() <= READ_BATCH_ROWS));
        assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), n);
        let schema = batches[0].schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [col::TRACE_ID, col::SERVICE_NAME, col::NAME, col::COLOR]
        );
        let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let type_of = |name: &str| schema.field_with_name(name).unwrap().data_type().clone();
        assert_eq!(type_of(col::SERVICE_NAME), dictionary);
        assert_eq!(type_of(col::COLOR), dictionary);
        // Not a dictionary column, and ids are never read as dictionaries.
        assert_eq!(type_of(col::NAME), DataType::Utf8);
        assert_eq!(type_of(col::TRACE_ID), DataType::Utf8);

        // The same values as a plain read of the file, nulls kept.
        let plain: Vec<RecordBatch> = source
            .open(&asked, &[])
            .unwrap()
            .reader
            .map(Result::unwrap)
            .collect();
        assert_eq!(plain[0].schema().field(1).data_type(), &DataType::Utf8);
        for name in asked {
            assert_eq!(strings(&batches, name), strings(&plain, name), "{name}");
        }
        assert_eq!(
            strings(&batches, col::COLOR)
                .iter()
                .filter(|c| c.is_none())
                .count(),
            n.div_ceil(5)
        );

        // A column the file lacks, and a file deleted since it was listed (retention).
        assert!(source.open(&["no_such_column"], &[]).is_err());
        std::fs::remove_file(&meta.path).unwrap();
        let gone = source.open(&asked, &DICTIONARY_COLUMNS).err().unwrap();
        assert_eq!(gone.kind(), io::ErrorKind::NotFound);
    }

    /// `n` rows of the `spans` schema of version 1 (every column but `links`), in one hour:
    /// ids from the row number, nulls in the nullable columns, fixed values in the others.
    pub(crate) fn version_1_rows(n: usize) -> RecordBatch {
        use arrow::array::{
            BooleanArray, Int32Array, Int64Array, StringArray, UInt32Array, new_null_array,
        };
        let schema = dyeline_model::schema::spans_schema();
        let fields: Vec<Arc<Field>> = schema
            .fields()
            .iter()
            .filter(|f| f.name() != col::LINKS)
            .cloned()
            .collect();
        let columns: Vec<arrow::array::ArrayRef> = fields
            .iter()
            .map(|f| -> arrow::array::ArrayRef {
                match (f.name().as_str(), f.data_type()) {
                    (col::TRACE_ID, _) => Arc::new(StringArray::from_iter_values(
                        (0..n).map(|i| format!("{:032x}", i + 1)),
                    )),
                    (col::SPAN_ID, _) => Arc::new(StringArray::from_iter_values(
                        (0..n).map(|i| format!("{:016x}", i + 1)),
                    )),
                    (col::SPAN_KIND, _) => {
                        Arc::new(StringArray::from_iter_values((0..n).map(|_| "SERVER")))
                    }
                    _ if f.is_nullable() => new_null_array(f.data_type(), n),
                    (_, DataType::Utf8) => {
                        Arc::new(StringArray::from_iter_values((0..n).map(|_| "x")))
                    }
                    (_, DataType::Int64) => Arc::new(Int64Array::from_iter_values(
                        (0..n).map(|i| crate::layout::HOUR_NS + i as i64),
                    )),
                    (_, DataType::Int32) => Arc::new(Int32Array::from(vec![0; n])),
                    (_, DataType::UInt32) => Arc::new(UInt32Array::from(vec![0; n])),
                    (_, DataType::Boolean) => Arc::new(BooleanArray::from(vec![false; n])),
                    (name, other) => unreachable!("{name}: {other}"),
                }
            })
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    /// A file written before the `links` column (schema version 1) reads through the per-file
    /// reader (the column left out) and through SQL (the column null), beside a file that has it.
    #[tokio::test]
    async fn a_file_written_before_the_links_column_reads_with_links_null() {
        let dir = tempfile::tempdir().unwrap();
        let mut seq = 0;
        let old = write_segments(
            &dir.path().join("spans"),
            &[&Segment::plain(version_1_rows(3))],
            crate::layout::now_unix_ms(),
            &mut seq,
            3,
        )
        .unwrap()
        .remove(0);
        // And a file of this version, its links set.
        let v1 = version_1_rows(2);
        let mut fields = v1.schema().fields().to_vec();
        fields.push(Arc::new(Field::new(col::LINKS, DataType::Utf8, true)));
        let mut columns = v1.columns().to_vec();
        columns.push(Arc::new(arrow::array::StringArray::from(vec!["[]"; 2])));
        let v2 = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        assert_eq!(v2.schema(), dyeline_model::schema::spans_schema());
        write_segments(
            &dir.path().join("spans"),
            &[&Segment::plain(v2)],
            crate::layout::now_unix_ms(),
            &mut seq,
            3,
        )
        .unwrap();
        let source = FileSource::new(old);
        let batches: Vec<RecordBatch> = source
            .open(
                &[col::SPAN_ID, col::LINKS, col::SPAN_KIND],
                &DICTIONARY_COLUMNS,
            )
            .unwrap()
            .reader
            .map(Result::unwrap)
            .collect();
        let schema = batches[0].schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        // The column the old file lacks is there, after the file's, every row null.
        assert_eq!(names, [col::SPAN_ID, col::SPAN_KIND, col::LINKS]);
        assert!(
            batches
                .iter()
                .all(|b| b.column(2).null_count() == b.num_rows())
        );
        // A column that is not a nullable spans column is still an error.
        assert!(source.open(&[col::SPAN_ID, "no_such_column"], &[]).is_err());

        let mut config = crate::StoreConfig::new(dir.path());
        config.read_only = true;
        let store = crate::Store::open(config).unwrap();
        let ctx = datafusion::prelude::SessionContext::new();
        ctx.register_table("spans", store.table()).unwrap();
        let rows = ctx
            .sql("SELECT span_id, links, count(*) OVER () AS n FROM spans ORDER BY span_id")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let rows = arrow::compute::concat_batches(&rows[0].schema(), &rows).unwrap();
        assert_eq!(rows.num_rows(), 5);
        // The old file's three rows null, the new file's two `[]`.
        assert_eq!(rows.column(1).null_count(), 3);
        let links = rows.column(1).as_string::<i32>();
        assert_eq!(links.iter().flatten().collect::<Vec<_>>(), ["[]", "[]"]);
        assert_eq!(
            rows.column(0).as_string::<i32>().value(4),
            format!("{:016x}", 3)
        );
        close(store).await;
    }

    /// The files and segments of one snapshot hold every stored span of a range once, the
    /// files read through [`FileSource::open`], whatever has been flushed.
    #[tokio::test]
    async fn a_snapshot_reads_every_stored_span_of_a_range_once_through_files_and_segments() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unsynced(dir.path());
        // Hour 1 (test_support::rows): two flushed files, then rows held in memory.
        for first in [0, 100] {
            assert_eq!(write(&store, first, 100).await.stored, 100);
            store.flush().await.unwrap();
        }
        assert_eq!(write(&store, 200, 50).await.stored, 50);
        let hour = crate::layout::HOUR_NS;
        let snap = store.snapshot();
        let span_ids = |lo: i64, hi: i64| -> Vec<String> {
            let mut ids = Vec::new();
            for file in snap.files_in(lo, hi) {
                for b in file
                    .open(&[col::SPAN_ID], &DICTIONARY_COLUMNS)
                    .unwrap()
                    .reader
                {
                    let b = b.unwrap();
                    let c = b.column(0).as_string::<i32>();
                    ids.extend(c.iter().flatten().map(str::to_owned));
                }
            }
            for s in snap.segments_in(lo, hi) {
                let b = s.decode().unwrap();
                let c = b.column_by_name(col::SPAN_ID).unwrap().as_string::<i32>();
                ids.extend(c.iter().flatten().map(str::to_owned));
            }
            ids.sort();
            ids
        };
        assert_eq!(snap.files_in(hour, 2 * hour - 1).len(), 2);
        assert_eq!(snap.segments_in(hour, 2 * hour - 1).len(), 1);
        let mut all: Vec<String> = (0..250u64).map(|i| format!("{:016x}", i + 1)).collect();
        all.sort();
        assert_eq!(span_ids(hour, 2 * hour - 1), all);
        assert_eq!(span_ids(i64::MIN, i64::MAX), all);
        // Files are chosen by hour, segments by their start range (rows start at hour + i).
        assert_eq!(snap.files_in(hour + 10, hour + 20).len(), 2);
        assert!(snap.segments_in(hour + 10, hour + 20).is_empty());
        assert!(span_ids(0, hour - 1).is_empty());
        assert!(span_ids(2 * hour, i64::MAX).is_empty());
        close(store).await;
    }
}
