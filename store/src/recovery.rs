//! What a store does when it opens: replays the WAL through the duplicate filter into memory,
//! sealed as the writer would seal it ([`replay`]; rows an earlier schema version wrote are
//! given the columns added since, as nulls: [`upgrade_rows`]), and builds the trace indexes of
//! the files it found, in the background (`dyeline-indexer`, [`index_files`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, RecordBatch, new_null_array};
use arrow::error::ArrowError;
use dyeline_model::schema::spans_schema;

use crate::dedupe::{Dedupe, keys_of};
use crate::file_read;
use crate::layout::FileMeta;
use crate::seal;
use crate::segment::Segment;
use crate::state::{Frozen, Shared, files_of_hour, seal_due, set_memory_gauges};
use crate::wal;

/// Builds the [`trace_index::TraceIndex`] of every file found at open (files the store writes
/// get theirs when written), one file at a time, the newest first (recent traces are the ones
/// looked up most); a lookup meanwhile reads the files not indexed yet as before. Stops when
/// the store is gone, or when an index does not fit the budget
/// ([`StoreConfig::trace_index_max_bytes`]; the files left are older). A file that cannot be
/// read (removed by retention meanwhile, corrupt) stays unindexed, so it is never skipped.
pub(crate) fn index_files(shared: &std::sync::Weak<Shared>) {
    let todo: Vec<PathBuf> = match shared.upgrade() {
        Some(s) => {
            let state = s.state.read();
            let mut todo: Vec<&FileMeta> =
                state.files.iter().filter(|f| f.traces.is_none()).collect();
            todo.sort_by_key(|f| std::cmp::Reverse((f.hour_start_unix_nano, f.written_unix_ms)));
            todo.into_iter().map(|f| f.path.clone()).collect()
        }
        None => return,
    };
    let started = Instant::now();
    let mut indexed = 0usize;
    for path in todo {
        if shared.strong_count() == 0 {
            return;
        }
        match file_read::read_trace_index(&path) {
            Ok(ix) => {
                let Some(s) = shared.upgrade() else { return };
                let ix = Arc::new(ix);
                let mut state = s.state.write();
                // Files go newest first, and every file indexed so far is newer (or written
                // since open, and trimmed then): the first that does not fit ends the pass.
                if state.trace_index_bytes + ix.bytes() > s.trace_index_max_bytes {
                    drop(state);
                    tracing::info!(
                        budget_bytes = s.trace_index_max_bytes,
                        "trace index budget reached; older files stay unindexed"
                    );
                    break;
                }
                if let Some(f) = state
                    .files
                    .iter_mut()
                    .find(|f| f.path == path && f.traces.is_none())
                {
                    f.traces = Some(Arc::clone(&ix));
                    state.trace_index_bytes += ix.bytes();
                    s.metrics
                        .trace_index_bytes
                        .set(state.trace_index_bytes as i64);
                }
                drop(state);
                indexed += 1;
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot index the file's trace ids; lookups will read it");
            }
        }
    }
    tracing::info!(
        files = indexed,
        elapsed = ?started.elapsed(),
        "indexed the trace ids of the stored files"
    );
}

/// Replays WAL segments into memory (through the duplicate filter, so rows already flushed
/// before a crash are not doubled) and freezes them for the flusher.
pub(crate) fn replay(
    shared: &Shared,
    wal_dir: &Path,
    dedupe: &mut Dedupe,
    zstd_level: i32,
) -> std::io::Result<()> {
    if !wal_dir.exists() {
        return Ok(());
    }
    let segments = wal::list_segments(wal_dir)?;
    let Some(&last) = segments.last() else {
        return Ok(());
    };
    let files = files_of_hour(shared);
    let mut kept = Vec::new();
    let mut plain: Vec<Segment> = Vec::new();
    let mut rows = 0usize;
    for id in segments {
        let r = wal::replay_segment(wal_dir, id)?;
        if r.torn_tail {
            shared.metrics.wal_torn_tails.inc();
            tracing::warn!(
                segment = id,
                "WAL segment ends in a torn record; replayed up to it"
            );
        }
        for (_, batch) in r.records {
            let batch = upgrade_rows(batch).map_err(std::io::Error::other)?;
            let keys = keys_of(&batch);
            let f = dedupe
                .filter(batch, &keys, &files)
                .map_err(std::io::Error::other)?;
            if let Some(b) = f.batch {
                rows += b.num_rows();
                plain.push(Segment::plain(b));
            }
            // Sealed as the writer would, so replay holds no more plain rows than it does.
            if seal_due(&plain) {
                let refs: Vec<&Segment> = plain.iter().collect();
                let parts = seal::encode_parts(&refs, zstd_level)?;
                kept.extend(parts.into_iter().map(Segment::from_part));
                plain.clear();
            }
        }
    }
    kept.append(&mut plain);
    shared.metrics.wal_replayed_rows.inc_by(rows as u64);
    tracing::info!(rows, last_segment = last, "replayed the WAL");
    let mut s = shared.state.write();
    s.frozen.push(Frozen {
        wal_segment: last,
        segments: kept,
    });
    set_memory_gauges(&shared.metrics, &s);
    Ok(())
}

/// Rows of the `spans` table as an earlier schema version wrote them (a WAL record of the
/// previous binary), in the current layout: every column of [`spans_schema`] in its order,
/// those the rows lack (nullable columns added since, e.g. the lane columns of version 2) as
/// nulls. Rows that already have the current layout, and rows that are not `spans` rows of any
/// version (lacking a column that is not nullable), are returned as they are.
///
/// # Errors
/// A column of the rows whose type differs from the current schema's (a bug, or a layout
/// this version cannot read).
pub(crate) fn upgrade_rows(batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
    let schema = spans_schema();
    let have = batch.schema();
    if have.fields() == schema.fields() {
        return Ok(batch);
    }
    let lacks_required = schema
        .fields()
        .iter()
        .any(|f| !f.is_nullable() && have.field_with_name(f.name()).is_err());
    if lacks_required {
        return Ok(batch);
    }
    let rows = batch.num_rows();
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) => Arc::clone(c),
            None => new_null_array(f.data_type(), rows),
        })
        .collect();
    RecordBatch::try_new(schema, columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SEAL_ROWS;
    use crate::segment;
    use crate::test_support::{close, expected_span_ids, rows, rows_held, span_ids, write};
    use crate::wal::Wal;
    use crate::{FsyncPolicy, Store, StoreConfig};
    use std::time::Duration;

    /// A WAL record written before the `links` column replays into the current schema, its
    /// links null, and reads through SQL with the rows written since.
    #[tokio::test]
    async fn a_wal_record_of_an_earlier_schema_replays_with_the_later_columns_null() {
        use arrow::array::{Array, AsArray};
        use dyeline_model::schema::{col, spans_schema};
        let old = crate::file_read::tests::version_1_rows(4);
        let converted = upgrade_rows(old.clone()).unwrap();
        assert_eq!(converted.schema(), spans_schema());
        assert_eq!(
            converted.column_by_name(col::LINKS).unwrap().null_count(),
            4
        );
        // Not a spans batch of an earlier schema: as it is.
        let (keys_only, _) = rows(0, 3);
        assert_eq!(upgrade_rows(keys_only.clone()).unwrap(), keys_only);

        let dir = tempfile::tempdir().unwrap();
        {
            let mut wal = Wal::open(&dir.path().join("wal")).unwrap();
            wal.append(&segment::encode_record(&old).unwrap()).unwrap();
            wal.commit(true).unwrap();
        }
        let mut config = StoreConfig::new(dir.path());
        config.read_only = true;
        let store = Store::open(config).unwrap();
        let ctx = datafusion::prelude::SessionContext::new();
        ctx.register_table("spans", store.table()).unwrap();
        let out = ctx
            .sql("SELECT count(*) AS n, count(links) AS l FROM spans")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let n = out[0]
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(0);
        let l = out[0]
            .column(1)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(0);
        assert_eq!((n, l), (4, 0));
        close(store).await;
    }

    #[tokio::test]
    async fn file_trace_indexes_stay_within_the_budget_when_written_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::new(dir.path());
        config.fsync = FsyncPolicy::Never;
        // Each write below is 100 rows of 20 traces: 160 bytes of index. Room for two files.
        config.trace_index_max_bytes = 2 * 160 + 100;
        let store = Store::open(config.clone()).unwrap();
        for w in 0..4 {
            assert_eq!(write(&store, w * 100, 100).await.stored, 100);
            store.flush().await.unwrap();
            // Write times in ms order the files.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Files by write time: the two newest hold their indexes, 320 bytes.
        let assert_two_newest_indexed = |store: &Store| {
            let mut files: Vec<(i64, bool)> = store
                .snapshot()
                .files
                .iter()
                .map(|f| (f.written_unix_ms, f.traces.is_some()))
                .collect();
            files.sort();
            let held: Vec<bool> = files.iter().map(|f| f.1).collect();
            assert_eq!(held, [false, false, true, true]);
            assert_eq!(store.metrics().trace_index_bytes.get(), 320);
        };
        assert_two_newest_indexed(&store);
        close(store).await;

        // Reopened: the background pass indexes the newest files first and stops at the
        // budget.
        let store = Store::open(config).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while store.metrics().trace_index_bytes.get() < 320 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_two_newest_indexed(&store);
        close(store).await;
    }

    #[tokio::test]
    async fn replay_seals_the_wal_rows_as_they_gather() {
        let dir = tempfile::tempdir().unwrap();
        let (writes, n) = (70u64, 1000u64);
        {
            let mut wal = Wal::open(&dir.path().join("wal")).unwrap();
            for w in 0..writes {
                wal.append(&segment::encode_record(&rows(w * n, n).0).unwrap())
                    .unwrap();
            }
            // One write sent twice: replay keeps it once.
            wal.append(&segment::encode_record(&rows(0, n).0).unwrap())
                .unwrap();
            wal.commit(true).unwrap();
        }
        let mut config = StoreConfig::new(dir.path());
        config.read_only = true;
        let store = Store::open(config).unwrap();
        assert_eq!(store.metrics().wal_replayed_rows.get(), writes * n);
        let snap = store.snapshot();
        let sealed = rows_held(&snap.segments, true);
        let plain = rows_held(&snap.segments, false);
        // Sealed at the first write that reached SEAL_ROWS (66 of 1,000 rows); the rest plain.
        assert_eq!(sealed, SEAL_ROWS.div_ceil(n as usize) * n as usize);
        assert_eq!(sealed + plain, (writes * n) as usize);
        assert_eq!(span_ids(&snap.segments), expected_span_ids(writes * n));
    }
}
