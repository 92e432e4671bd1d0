//! Tests of local compaction on real stores and files: the merge's order and duplicate
//! dropping (property test), the cut by size, older schema versions, queries in a loop while
//! compactions swap, and recovery from each state a crash can leave on disk.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::prelude::SessionContext;
use dyeline_model::schema::col;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;

use super::*;
use crate::file_read::{DICTIONARY_COLUMNS, key_batch};
use crate::file_write::write_segments_in;
use crate::layout::{HOUR_NS, list_files};
use crate::segment::Segment;
use crate::test_support::{close, write};
use crate::{FsyncPolicy, Store, StoreConfig};

/// Key rows `(trace, span, start, server)` as a batch with a `span_kind` column, all in hour 1.
fn kinded(rows: &[(u8, u8, i64, bool)]) -> RecordBatch {
    let keys = key_batch(
        rows.iter().map(|r| format!("{:032x}", r.0)),
        rows.iter().map(|r| format!("{:016x}", r.1)),
        rows.iter().map(|r| HOUR_NS + r.2),
    )
    .unwrap();
    let mut fields = keys.schema().fields().to_vec();
    fields.push(Arc::new(Field::new(col::SPAN_KIND, DataType::Utf8, false)));
    let mut columns = keys.columns().to_vec();
    columns.push(Arc::new(StringArray::from_iter_values(
        rows.iter().map(|r| if r.3 { "SERVER" } else { "CLIENT" }),
    )));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// Every row of the Parquet file at `path`.
fn read_all(path: &Path) -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// `(trace, start, span, server)` of every row of `batches`, in order.
fn key_rows(batches: &[RecordBatch]) -> Vec<(String, i64, String, bool)> {
    let mut out = Vec::new();
    for b in batches {
        let s = |name| b.column_by_name(name).unwrap().as_string::<i32>().clone();
        let (t, sp, kind) = (s(col::TRACE_ID), s(col::SPAN_ID), s(col::SPAN_KIND));
        let st = b
            .column_by_name(col::START_TIME_UNIX_NANO)
            .unwrap()
            .as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            out.push((
                t.value(i).to_owned(),
                st.value(i),
                sp.value(i).to_owned(),
                kind.value(i) == "SERVER",
            ));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Files of random rows (few distinct traces, spans and starts, so keys repeat within and
    /// across files and row groups), each of several row groups: the merge writes every span
    /// key once, the copy with the least start (the first in merge order), all rows in
    /// storage order, with the trace index of exactly the traces written.
    #[test]
    fn the_merge_keeps_storage_order_and_one_row_per_span_key(
        files in prop::collection::vec(
            prop::collection::vec((0u8..6, 0u8..8, 0i64..4, any::<bool>()), 1..60), 1..5),
        group_rows in 3usize..40,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut seq = 0;
        let mut paths = Vec::new();
        for rows in &files {
            let segment = Segment::plain(kinded(rows));
            let written =
                write_segments_in(dir.path(), &[&segment], 1, &mut seq, 1, group_rows).unwrap();
            paths.push(written[0].path.clone());
        }
        let out = dir.path().join("out.parquet");
        let merged = merge(&paths, u64::MAX, 1, 6, |_| out.clone()).unwrap();
        prop_assert_eq!(merged.files.len(), 1);
        let rows = key_rows(&read_all(&merged.files[0].tmp));
        // Each key's least start among its copies.
        let mut first: BTreeMap<(String, String, bool), i64> = BTreeMap::new();
        let total: usize = files.iter().map(Vec::len).sum();
        for &(t, s, st, server) in files.iter().flatten() {
            let k = (format!("{t:032x}"), format!("{s:016x}"), server);
            let e = first.entry(k).or_insert(HOUR_NS + st);
            *e = (*e).min(HOUR_NS + st);
        }
        prop_assert_eq!(merged.rows_in, total as u64);
        prop_assert_eq!(merged.duplicates, (total - first.len()) as u64);
        prop_assert_eq!(merged.files[0].rows, first.len() as u64);
        let got: BTreeMap<(String, String, bool), i64> = rows
            .iter()
            .map(|(t, st, s, server)| ((t.clone(), s.clone(), *server), *st))
            .collect();
        prop_assert_eq!(got.len(), rows.len(), "a span key written twice");
        prop_assert_eq!(&got, &first);
        prop_assert!(
            rows.windows(2).all(|w| (&w[0].0, w[0].1, &w[0].2) <= (&w[1].0, w[1].1, &w[1].2)),
            "{:?}", rows
        );
        let traces: BTreeSet<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        prop_assert_eq!(
            &merged.files[0].traces,
            &TraceIndex::from_ids(traces.iter().copied())
        );
    }
}

/// A store in `dir` without fsync or the compactor thread (the tests compact by hand).
fn config(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.fsync = FsyncPolicy::Never;
    c.compaction = false;
    c
}

/// Writes `files` flushes of `rows` rows each (row numbers from `first` on) into hour 1.
async fn flushes(store: &Store, first: u64, files: u64, rows: u64) {
    for f in 0..files {
        assert_eq!(write(store, first + f * rows, rows).await.stored, rows);
        store.flush().await.unwrap();
    }
}

/// `count(*)` and `count(DISTINCT trace_id || span_id)` over `store`'s `spans`.
async fn counts(store: &Store) -> (i64, i64) {
    let ctx = SessionContext::new();
    ctx.register_table("spans", store.table()).unwrap();
    let b = ctx
        .sql("SELECT count(*), count(DISTINCT trace_id || span_id) FROM spans")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let v = |c: usize| b[0].column(c).as_primitive::<Int64Type>().value(0);
    (v(0), v(1))
}

/// The counts a read-only store opened on `dir` now answers.
async fn read_only_counts(dir: &Path) -> (i64, i64) {
    let mut c = config(dir);
    c.read_only = true;
    let store = Store::open(c).unwrap();
    let n = counts(&store).await;
    close(store).await;
    n
}

/// The `.parquet` files and journals in the hour-1 directory, by name.
fn on_disk(dir: &Path) -> Vec<String> {
    let hour = dir
        .join("spans")
        .join(crate::layout::hour_dir_name(HOUR_NS));
    let mut names: Vec<String> = std::fs::read_dir(hour)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

async fn compact_now(store: &Arc<Store>, ignore_lateness: bool) -> CompactionReport {
    let s = Arc::clone(store);
    tokio::task::spawn_blocking(move || s.compact_now(ignore_lateness).unwrap())
        .await
        .unwrap()
}

/// An hour is cut into files of about the target size: at most `ceil(bytes / target)` of
/// them, each trace in one; every row stays; a read-only store lists the outputs, not the
/// inputs kept for their grace; the hour is then not compacted again.
#[tokio::test]
async fn an_hour_ends_with_at_most_ceil_bytes_over_target_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(config(dir.path())).unwrap());
    flushes(&store, 0, 6, 2000).await;
    let before = store.snapshot().files;
    assert_eq!(before.len(), 6);
    let bytes: u64 = before.iter().map(|f| f.size).sum();
    let store = {
        let s = Arc::try_unwrap(store).ok().unwrap();
        close(s).await;
        let mut c = config(dir.path());
        c.compaction_target_bytes = bytes / 3;
        Arc::new(Store::open(c).unwrap())
    };
    let report = compact_now(&store, false).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let [hour] = &report.hours[..] else {
        panic!("{report:?}")
    };
    let after = store.snapshot().files;
    assert_eq!(
        (hour.files_before, hour.files_after, hour.rows),
        (6, after.len(), 12_000)
    );
    assert!(
        (2..=3).contains(&after.len()),
        "{} files of {bytes} bytes, target {}",
        after.len(),
        bytes / 3
    );
    assert!(
        after
            .iter()
            .all(|f| f.path.to_string_lossy().contains("-c"))
    );
    // No trace in two files.
    let mut seen = BTreeSet::new();
    for f in &after {
        let ids: BTreeSet<String> = crate::file_read::read_keys(&f.path)
            .unwrap()
            .into_iter()
            .map(|k| k.0)
            .collect();
        assert!(seen.is_disjoint(&ids));
        seen.extend(ids);
    }
    assert_eq!(seen.len(), 12_000 / 5);
    assert_eq!(counts(&store).await, (12_000, 12_000));
    // The inputs wait for their grace beside the journal; another process lists the outputs.
    assert_eq!(on_disk(dir.path()).len(), 6 + after.len() + 1);
    assert_eq!(read_only_counts(dir.path()).await, (12_000, 12_000));
    let m = store.metrics();
    assert_eq!(
        (
            m.compactions.get(),
            m.compaction_input_files.get(),
            m.compaction_output_files.get(),
            m.compaction_input_bytes.get()
        ),
        (1, 6, after.len() as u64, bytes)
    );
    // Nothing more to do.
    assert!(compact_now(&store, true).await.hours.is_empty());
    close(Arc::try_unwrap(store).ok().unwrap()).await;
    // Reopened: the interrupted grace ends (inputs deleted, journal gone).
    let store = Store::open(config(dir.path())).unwrap();
    assert_eq!(on_disk(dir.path()).len(), after.len());
    assert_eq!(counts(&store).await, (12_000, 12_000));
    close(store).await;
}

/// An hour is compacted once it closed plus the lateness, not before (unless told to), and
/// again once a late file joins its compacted one.
#[tokio::test]
async fn an_hour_waits_for_its_lateness_unless_told_not_to() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    // Hour 1 closed 56 years ago: a lateness longer than that keeps it open.
    c.compaction_lateness = Duration::from_secs(100 * 365 * 86_400);
    c.compaction_grace = Duration::ZERO;
    c.retention = Duration::from_secs(200 * 365 * 86_400);
    let store = Arc::new(Store::open(c).unwrap());
    flushes(&store, 0, 2, 100).await;
    assert!(compact_now(&store, false).await.hours.is_empty());
    let report = compact_now(&store, true).await;
    assert_eq!(report.hours.len(), 1);
    // No grace: the inputs went at once, with the journal.
    assert_eq!(report.deleted_files, 2);
    assert_eq!(on_disk(dir.path()).len(), 1);
    // A late span's file makes the hour due again; its output is an input like any other.
    flushes(&store, 200, 1, 10).await;
    let report = compact_now(&store, true).await;
    assert_eq!(
        report
            .hours
            .iter()
            .map(|h| (h.files_before, h.files_after, h.rows))
            .collect::<Vec<_>>(),
        [(2, 1, 210)]
    );
    assert_eq!(on_disk(dir.path()).len(), 1);
    assert_eq!(counts(&store).await, (210, 210));
    close(Arc::try_unwrap(store).ok().unwrap()).await;
}

/// Files written before the `links` column (schema version 1) merge with current ones into
/// current files, the old rows' links null.
#[test]
fn older_schema_versions_are_written_in_the_current_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut seq = 0;
    let v1 = crate::file_read::tests::version_1_rows(5);
    let mut fields = v1.schema().fields().to_vec();
    fields.push(Arc::new(Field::new(col::LINKS, DataType::Utf8, true)));
    let mut columns = v1.columns().to_vec();
    columns.push(Arc::new(StringArray::from(vec!["[]"; 5])));
    let current = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let mut paths = Vec::new();
    for rows in [v1.slice(0, 3), current.slice(3, 2)] {
        let segment = Segment::plain(rows);
        paths.push(
            write_segments_in(dir.path(), &[&segment], 1, &mut seq, 1, 1024).unwrap()[0]
                .path
                .clone(),
        );
    }
    let out = dir.path().join("out.parquet");
    let merged = merge(&paths, u64::MAX, 1, 5, |_| out.clone()).unwrap();
    let rows = read_all(&merged.files[0].tmp);
    let rows = arrow::compute::concat_batches(&rows[0].schema(), &rows).unwrap();
    assert_eq!(
        rows.schema().fields(),
        dyeline_model::schema::spans_schema().fields()
    );
    let links = rows.column_by_name(col::LINKS).unwrap().as_string::<i32>();
    let spans = rows
        .column_by_name(col::SPAN_ID)
        .unwrap()
        .as_string::<i32>();
    let by_span: BTreeMap<&str, Option<&str>> = (0..rows.num_rows())
        .map(|i| (spans.value(i), links.is_valid(i).then(|| links.value(i))))
        .collect();
    let want: BTreeMap<String, Option<&str>> = (1..=5)
        .map(|i| (format!("{i:016x}"), (i > 3).then_some("[]")))
        .collect();
    assert_eq!(
        by_span,
        want.iter().map(|(k, v)| (k.as_str(), *v)).collect()
    );
}

/// Queries in a loop (SQL in this process, and a read-only store opened on the directory each
/// time) while compactions swap files and delete the replaced ones after their grace: every
/// answer is the truth. A snapshot taken before a swap still reads its files during the grace.
#[tokio::test]
async fn queries_in_a_loop_never_see_a_row_twice_or_miss_one_while_compactions_swap() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.compaction_grace = Duration::from_millis(300);
    let store = Arc::new(Store::open(c).unwrap());
    let (mut truth, mut asked, mut swaps) = (0i64, 0usize, 0usize);
    for round in 0..4u64 {
        flushes(&store, truth as u64, 3, 3000).await;
        truth += 9000;
        let before = store.snapshot();
        let s = Arc::clone(&store);
        let compaction = std::thread::spawn(move || s.compact_now(false).unwrap());
        loop {
            let done = compaction.is_finished();
            assert_eq!(counts(&store).await, (truth, truth), "round {round}");
            assert_eq!(read_only_counts(dir.path()).await, (truth, truth));
            asked += 1;
            if done {
                break;
            }
        }
        let report = compaction.join().unwrap();
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        swaps += report.hours.len();
        // The snapshot of before the swap still reads every row in its grace.
        let mut rows = 0;
        for f in before.files_in(i64::MIN, i64::MAX) {
            rows += f.open(&[col::SPAN_ID], &DICTIONARY_COLUMNS).unwrap().rows;
        }
        assert_eq!(rows as i64, truth);
        tokio::time::sleep(Duration::from_millis(350)).await;
    }
    assert_eq!(swaps, 4);
    assert!(asked >= 8, "{asked} queries");
    // The last pass deleted the files replaced by the one before: on disk, the outputs of
    // the last compaction and the inputs and journal of its grace.
    let report = compact_now(&store, false).await;
    assert_eq!(report.deleted_files, 4, "{report:?}");
    assert_eq!(on_disk(dir.path()).len(), 1);
    assert_eq!(counts(&store).await, (truth, truth));
    close(Arc::try_unwrap(store).ok().unwrap()).await;
}

/// How far a compaction got before the crash.
#[derive(Debug, Clone, Copy)]
enum Crash {
    /// Outputs written under their temporary names, no journal.
    Temps,
    /// Journal written, no output renamed.
    Journal,
    /// Journal, the first output renamed, not the second.
    SomeRenamed,
    /// Journal, every output renamed, inputs all there.
    AllRenamed,
    /// …and the first input deleted.
    SomeDeleted,
}

/// A data directory of 4 files (20,000 rows) in hour 1 and a compaction of them into 2 or more
/// outputs interrupted at `crash`; the paths of the inputs and outputs.
async fn crashed_at(dir: &Path, crash: Crash) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let store = Store::open(config(dir)).unwrap();
    flushes(&store, 0, 4, 5000).await;
    close(store).await;
    let inputs: Vec<PathBuf> = list_files(&dir.join("spans"), false)
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    let bytes: u64 = inputs
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let hour_dir = inputs[0].parent().unwrap().to_path_buf();
    let merged = merge(&inputs, bytes / 4, 1, 4000, |i| {
        hour_dir.join(crate::layout::compacted_name(1, 1, 2, i))
    })
    .unwrap();
    assert!(merged.files.len() >= 2);
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    let outputs: Vec<PathBuf> = merged.files.iter().map(|f| f.path.clone()).collect();
    let journal = Journal {
        outputs: outputs.iter().map(name).collect(),
        inputs: inputs.iter().map(name).collect(),
    };
    if !matches!(crash, Crash::Temps) {
        write_journal(&hour_dir, &journal).unwrap();
    }
    let renamed = match crash {
        Crash::Temps | Crash::Journal => 0,
        Crash::SomeRenamed => 1,
        Crash::AllRenamed | Crash::SomeDeleted => merged.files.len(),
    };
    for f in &merged.files[..renamed] {
        std::fs::rename(&f.tmp, &f.path).unwrap();
    }
    if matches!(crash, Crash::SomeDeleted) {
        std::fs::remove_file(&inputs[0]).unwrap();
    }
    (inputs, outputs)
}

/// From each state a crash can leave: a read-only reader (before recovery) counts every row
/// once, and a writable open finishes the compaction (every output there: inputs deleted) or
/// rolls it back (outputs and temporary files deleted), removes the journal, and counts every
/// row once.
#[tokio::test]
async fn recovery_finishes_or_rolls_back_each_interrupted_state() {
    for crash in [
        Crash::Temps,
        Crash::Journal,
        Crash::SomeRenamed,
        Crash::AllRenamed,
        Crash::SomeDeleted,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (inputs, outputs) = crashed_at(dir.path(), crash).await;
        let finished = matches!(crash, Crash::AllRenamed | Crash::SomeDeleted);
        assert_eq!(
            read_only_counts(dir.path()).await,
            (20_000, 20_000),
            "{crash:?}"
        );
        let store = Store::open(config(dir.path())).unwrap();
        let mut want: Vec<PathBuf> = if finished { outputs } else { inputs };
        want.sort();
        let listed: Vec<PathBuf> = store.snapshot().files.into_iter().map(|f| f.path).collect();
        assert_eq!(listed, want, "{crash:?}");
        let mut names: Vec<String> = want
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(on_disk(dir.path()), names, "{crash:?}: on disk");
        assert_eq!(counts(&store).await, (20_000, 20_000), "{crash:?}");
        close(store).await;
    }
}

/// The duplicate filter of an hour that listed the hour's files before they were compacted
/// (and deleted) looks a resent span up in the outputs: still a duplicate.
#[tokio::test]
async fn a_resent_span_of_a_compacted_hour_is_still_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    flushes(&store, 0, 2, 100).await;
    close(store).await;
    let mut c = config(dir.path());
    c.compaction_grace = Duration::ZERO;
    let store = Arc::new(Store::open(c).unwrap());
    // A new span of the hour: its key set lists the two files.
    assert_eq!(write(&store, 200, 1).await.stored, 1);
    let report = compact_now(&store, true).await;
    assert_eq!((report.hours.len(), report.deleted_files), (1, 2));
    // A span of the first file, sent again.
    let again = write(&store, 0, 1).await;
    assert_eq!((again.stored, again.duplicates), (0, 1));
    assert_eq!(counts(&store).await, (201, 201));
    close(Arc::try_unwrap(store).ok().unwrap()).await;
}
