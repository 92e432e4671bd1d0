//! Writing the store's files: memory segments and sealed parts → one new file per hour
//! ([`write_segments`]). Sealed parts' row groups are copied as encoded (`copy_row_groups`);
//! plain rows are sealed first ([`crate::seal`]). Files are written to a temporary name,
//! fsynced, then renamed into place.

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::file::writer::SerializedFileWriter;

use crate::layout::{FileMeta, hour_dir_name};
use crate::part::{Part, ROW_GROUP_ROWS, part_reader, writer_properties};
use crate::seal::encode_parts_in;
use crate::segment::Segment;
use crate::trace_index::TraceIndex;

/// Writes the rows of `segments` (memory segments in the `spans` schema) as new files, one
/// per hour of `start_time_unix_nano`; returns their metadata, each with its [`TraceIndex`].
///
/// Sealed segments ([`Segment::part`]) are copied: each row group's encoded column chunks,
/// with their bloom filters and page indexes, go into the file as they are, not decoded. The
/// other segments are encoded first ([`encode_parts`](crate::seal::encode_parts)), then copied alike. So a file holds one
/// or more row groups, each in storage order; a trace's spans sit together within a row group,
/// and a trace written across two seals sits in two.
///
/// # Errors
/// I/O, IPC or Parquet errors; a failed write leaves `.tmp` files that [`list_files`](crate::layout::list_files) removes.
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

pub(crate) fn write_segments_in(
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
    let traces = if let [one] = parts {
        Arc::clone(&one.traces)
    } else {
        Arc::new(TraceIndex::union(parts.iter().map(|p| &*p.traces)))
    };
    let schema = part_reader(first.bytes.clone())
        .map_err(io::Error::other)?
        .schema()
        .clone();
    let props = writer_properties(zstd_level, traces.len() as u64);
    let mut meta = write_hour_file(spans_dir, hour, written_unix_ms, *seq, |file| {
        let (mut writer, _) = ArrowWriter::try_new(file, schema, Some(props))
            .and_then(ArrowWriter::into_serialized_writer)
            .map_err(io::Error::other)?;
        for part in parts {
            copy_row_groups(&part.bytes, &mut writer).map_err(io::Error::other)?;
        }
        writer.into_inner().map_err(io::Error::other)
    })?;
    meta.traces = Some(traces);
    Ok(meta)
}

/// Writes a new file of hour `hour` under `table_dir` (`hour=…/part-<written_unix_ms>-<seq>
/// .parquet`, [`crate::layout`]) with `write`, which is given the file and returns it written:
/// to a temporary name first, fsynced, then renamed into place and the directory fsynced, so a
/// crash leaves the whole file or a `.tmp` that [`list_files`](crate::layout::list_files)
/// removes. The returned metadata has no trace index.
///
/// # Errors
/// I/O errors, and `write`'s.
pub(crate) fn write_hour_file(
    table_dir: &Path,
    hour: i64,
    written_unix_ms: i64,
    seq: u64,
    write: impl FnOnce(File) -> io::Result<File>,
) -> io::Result<FileMeta> {
    let dir = table_dir.join(hour_dir_name(hour));
    fs::create_dir_all(&dir)?;
    let path = dir.join(format!("part-{written_unix_ms}-{seq:06}.parquet"));
    let tmp = write_temp(&path, write)?;
    fs::rename(&tmp, &path)?;
    sync_dir(&dir)?;
    Ok(FileMeta {
        size: fs::metadata(&path)?.len(),
        path,
        hour_start_unix_nano: hour,
        written_unix_ms,
        traces: None,
        remote: None,
    })
}

/// The temporary name a file at `path` is written under before it is renamed into place:
/// `<name>.tmp`, which [`list_files`](crate::layout::list_files) never lists.
pub(crate) fn temp_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    name.into()
}

/// Writes the file that will be `path` under its [`temp_path`] with `write` (given the new
/// file, returning it written) and fsyncs it; returns the temporary path. The caller renames
/// it into place and then fsyncs the directory ([`sync_dir`]).
///
/// # Errors
/// I/O errors, and `write`'s.
pub(crate) fn write_temp(
    path: &Path,
    write: impl FnOnce(File) -> io::Result<File>,
) -> io::Result<std::path::PathBuf> {
    let tmp = temp_path(path);
    let f = write(File::create(&tmp)?)?;
    f.sync_all()?;
    Ok(tmp)
}

/// fsyncs the directory `dir`, so the renames and removals in it survive a crash.
///
/// # Errors
/// I/O errors.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_read::{key_batch, read_keys_of_traces, read_trace_index};
    use crate::layout::hour_of;
    use crate::part::DATA_PAGE_ROWS;
    use crate::seal::encode_parts;
    use arrow::array::{AsArray, RecordBatch};
    use arrow::datatypes::Int64Type;
    use dyeline_model::schema::col;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

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
        let mut want: Vec<crate::file_read::StoredKey> = (0..rows)
            .filter(|&i| wanted.iter().any(|w| w == ids.value(i)))
            .map(|i| (ids.value(i).to_owned(), spans.value(i).to_owned(), false))
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

    /// A flushed file and a sealed part carry [`SCHEMA_VERSION`] in their key-value metadata
    /// (as decimal text under [`SCHEMA_VERSION_KEY`]); rows read back through
    /// [`part_reader`] have the schema they were written with, without the key.
    #[tokio::test]
    async fn flushed_files_and_sealed_parts_carry_the_schema_version() {
        use dyeline_model::schema::{SCHEMA_VERSION, SCHEMA_VERSION_KEY};
        use parquet::file::reader::{ChunkReader, FileReader};
        use parquet::file::serialized_reader::SerializedFileReader;

        fn version<R: ChunkReader + 'static>(input: R) -> Option<String> {
            let reader = SerializedFileReader::new(input).unwrap();
            let kv = reader.metadata().file_metadata().key_value_metadata()?;
            let v = kv.iter().find(|kv| kv.key == SCHEMA_VERSION_KEY)?;
            v.value.clone()
        }
        let expected = Some(SCHEMA_VERSION.to_string());

        let dir = tempfile::tempdir().unwrap();
        let store = crate::test_support::open_unsynced(dir.path());
        assert_eq!(crate::test_support::write(&store, 0, 100).await.stored, 100);
        store.flush().await.unwrap();
        let files = store.snapshot().files;
        assert_eq!(files.len(), 1);
        assert_eq!(version(File::open(&files[0].path).unwrap()), expected);
        crate::test_support::close(store).await;

        let (batch, _) = crate::test_support::rows(0, 10);
        let part = encode_parts(&[&Segment::plain(batch.clone())], 3)
            .unwrap()
            .remove(0);
        assert_eq!(version(part.bytes.clone()), expected);
        assert_eq!(part_reader(part.bytes).unwrap().schema(), &batch.schema());
    }
}
