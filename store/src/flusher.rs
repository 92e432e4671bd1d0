//! The flusher thread (`dyeline-flusher`): seals plain rows into in-memory Parquet parts
//! ([`crate::seal`]), writes frozen memory to files ([`crate::file_write`]) and then deletes the
//! WAL segments that held it, and applies retention once a minute ([`crate::retention`]).

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::config::StoreConfig;
use crate::error::StoreError;
use crate::file_write;
use crate::jobs::FlushJob;
use crate::retention::apply_retention;
use crate::seal;
use crate::segment::Segment;
use crate::state::{Frozen, Shared, set_memory_gauges};
use crate::wal::Wal;

/// Seals the plain rows into `active` (a [`FlushJob::Seal`], on the flusher thread). The
/// encoding runs outside the lock and the plain rows stay visible until the sealed parts
/// replace them. Only the writer adds to `plain` (at its end) or takes it whole for a flush
/// (bumping `plain_generation`), so if the generation is unchanged the rows sealed are still
/// the first of `plain`; otherwise they were frozen meanwhile and the flush writes them. On an
/// encoding error (a bug) the rows stay plain and visible, and the next flush writes them.
fn seal_plain(shared: &Shared, zstd_level: i32) {
    let (plain, generation): (Vec<Segment>, u64) = {
        let s = shared.state.read();
        (s.plain.clone(), s.plain_generation)
    };
    let refs: Vec<&Segment> = plain.iter().collect();
    let sealed = seal::encode_parts(&refs, zstd_level);
    let mut s = shared.state.write();
    s.seal_pending = false;
    match sealed {
        Ok(parts) if s.plain_generation == generation => {
            s.plain.drain(..plain.len());
            s.active.extend(parts.into_iter().map(Segment::from_part));
            set_memory_gauges(&shared.metrics, &s);
        }
        Ok(_) => {}
        Err(e) => tracing::error!(error = %e, "cannot seal the plain rows; they stay plain"),
    }
}

pub(crate) fn flusher_loop(shared: &Shared, config: &StoreConfig, rx: &Receiver<FlushJob>) {
    let mut seq = 0u64;
    let mut last_retention = Instant::now() - Duration::from_secs(3600);
    loop {
        let job = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(j) => Some(j),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if config.persist && last_retention.elapsed() >= Duration::from_secs(60) {
            last_retention = Instant::now();
            apply_retention(shared, config.retention);
        }
        let acks = match job {
            None => continue,
            Some(FlushJob::Seal) => {
                seal_plain(shared, config.zstd_level);
                continue;
            }
            Some(FlushJob::Flush { acks }) => acks,
        };
        let result = if config.persist {
            flush_frozen(shared, config, &mut seq)
        } else {
            Ok(())
        };
        if let Err(e) = &result {
            shared.metrics.flush_errors.inc();
            tracing::error!(error = %e, "flush to Parquet failed; the rows stay in memory and the WAL");
        }
        for a in acks {
            let _ = a.send(result.clone().map_err(|e| StoreError::Io(e.clone())));
        }
    }
}

fn flush_frozen(shared: &Shared, config: &StoreConfig, seq: &mut u64) -> Result<(), String> {
    let frozen: Vec<Frozen> = shared.state.read().frozen.clone();
    let Some(upto) = frozen.iter().map(|f| f.wal_segment).max() else {
        return Ok(());
    };
    let started = Instant::now();
    let segments: Vec<&Segment> = frozen.iter().flat_map(|f| &f.segments).collect();
    let rows: usize = segments.iter().map(|s| s.rows()).sum();
    let written = shared.begin_write();
    let new_files = file_write::write_segments(
        &shared.spans_dir,
        &segments,
        written,
        seq,
        config.zstd_level,
    )
    .map_err(|e| e.to_string());
    let new_files = match new_files {
        Ok(f) => f,
        Err(e) => {
            shared.end_write();
            return Err(e);
        }
    };
    let n = frozen.len();
    {
        let mut s = shared.state.write();
        s.files.extend(new_files);
        s.frozen.drain(..n);
        shared.files_changed(&mut s);
        set_memory_gauges(&shared.metrics, &s);
    }
    shared.end_write();
    if upto > 0 {
        Wal::delete_through(&shared.wal_dir, upto).map_err(|e| e.to_string())?;
    }
    shared
        .metrics
        .flush_seconds
        .observe(started.elapsed().as_secs_f64());
    tracing::info!(
        rows,
        elapsed = ?started.elapsed(),
        "flushed to Parquet"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{SEAL_BYTES, SEAL_ROWS};
    use crate::file_read;
    use crate::test_support::{
        close, expected_span_ids, open_unsynced, rows, rows_held, span_ids, wait_for_a_seal, write,
    };
    use arrow::array::RecordBatch;
    use std::sync::Arc;

    #[tokio::test]
    async fn plain_rows_are_sealed_once_enough_gather_and_all_stay_visible_and_durable() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_unsynced(dir.path());
        let (writes, n) = (70u64, 1000u64);
        for w in 0..writes {
            assert_eq!(write(&store, w * n, n).await.stored, n);
        }
        let total = (writes * n) as usize;
        // The seal runs on the flusher thread: wait for it.
        wait_for_a_seal(&store).await;
        // A resent write is still a duplicate, its rows sealed or not.
        let r = write(&store, 0, n).await;
        assert_eq!((r.stored, r.duplicates), (0, n));
        assert_eq!(store.metrics().duplicate_filter_keys.get(), total as i64);

        let snap = store.snapshot();
        let sealed: Vec<&Segment> = snap.segments.iter().filter(|s| !s.is_plain()).collect();
        let sealed_rows = rows_held(&snap.segments, true);
        let plain_rows = rows_held(&snap.segments, false);
        // One hour of rows: one part, holding every write up to the one that reached
        // SEAL_ROWS (or a few more, written before the seal ran).
        assert_eq!(sealed.len(), 1);
        assert!(sealed_rows >= SEAL_ROWS, "{sealed_rows} rows sealed");
        assert_eq!(sealed_rows % n as usize, 0, "whole writes are sealed");
        assert_eq!(sealed_rows + plain_rows, total);
        let expected = expected_span_ids(writes * n);
        assert_eq!(span_ids(&snap.segments), expected);
        // Sealed, a row costs a fraction of its plain Arrow bytes.
        let sealed_bytes = sealed[0].part().unwrap().bytes.len();
        let plain_bytes: usize = snap
            .segments
            .iter()
            .map(|s| s.decode().unwrap().get_array_memory_size())
            .sum();
        assert!(
            sealed_bytes * 4 < plain_bytes * sealed_rows / total,
            "{sealed_bytes} B sealed of {sealed_rows} rows; {plain_bytes} B plain of {total}"
        );

        // Every row reaches Parquet once: the sealed part copied, the plain rows encoded, a
        // row group each.
        store.flush().await.unwrap();
        let snap = store.snapshot();
        assert!(snap.segments.is_empty());
        assert_eq!(snap.files.len(), 1);
        let groups = parquet::file::reader::FileReader::metadata(
            &parquet::file::serialized_reader::SerializedFileReader::new(
                std::fs::File::open(&snap.files[0].path).unwrap(),
            )
            .unwrap(),
        )
        .num_row_groups();
        assert_eq!(groups, if plain_rows > 0 { 2 } else { 1 });
        let mut stored: Vec<String> = snap
            .files
            .iter()
            .flat_map(|f| file_read::read_keys(&f.path).unwrap())
            .map(|(_, span, _)| span)
            .collect();
        stored.sort();
        assert_eq!(stored, expected);
        close(store).await;
    }

    #[tokio::test]
    async fn plain_rows_are_sealed_once_their_bytes_reach_seal_bytes() {
        use arrow::datatypes::{DataType, Field, Schema};
        let dir = tempfile::tempdir().unwrap();
        let store = open_unsynced(dir.path());
        // 100-row writes of 10 KB attribute strings: about 1 MB each, so SEAL_BYTES is
        // reached after about 33 writes, long before SEAL_ROWS rows.
        let (writes, n) = (40u64, 100u64);
        for w in 0..writes {
            let (keys_only, keys) = rows(w * n, n);
            let mut fields = keys_only.schema().fields().to_vec();
            fields.push(Arc::new(Field::new("attributes", DataType::Utf8, false)));
            let mut columns = keys_only.columns().to_vec();
            columns.push(Arc::new(arrow::array::StringArray::from_iter_values(
                (0..n).map(|i| format!("{i:0>10000}")),
            )));
            let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
            let r = store
                .try_write(batch, keys)
                .unwrap()
                .await
                .unwrap()
                .unwrap();
            assert_eq!(r.stored, n);
        }
        wait_for_a_seal(&store).await;
        let snap = store.snapshot();
        let sealed = rows_held(&snap.segments, true);
        let per_write = snap
            .segments
            .iter()
            .find(|s| s.is_plain())
            .map_or(1_000_000, Segment::memory_bytes);
        let first = SEAL_BYTES.div_ceil(per_write) * n as usize;
        assert!(
            (first..(writes * n) as usize).contains(&sealed),
            "{sealed} rows sealed; SEAL_BYTES is reached at {first}"
        );
        // The gauge counts the sealed bytes and the plain ones.
        let bytes: usize = snap.segments.iter().map(Segment::memory_bytes).sum();
        assert_eq!(store.metrics().memory_bytes.get(), bytes as i64);
        assert!(bytes < SEAL_BYTES, "{bytes} B held after the seal");
        close(store).await;
    }
}
