//! The writer thread (`dyeline-writer`): takes writes in groups, drops the duplicates, appends
//! the rest to the WAL and commits the group (fsync by policy) before acknowledging it, then
//! holds the rows in memory; asks the flusher for a seal once enough plain rows have gathered,
//! and freezes memory for a flush at the flush interval, the row cap, the memory bound, or
//! when asked (group commit).

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::config::{FsyncPolicy, StoreConfig};
use crate::dedupe::Dedupe;
use crate::error::StoreError;
use crate::jobs::{FlushJob, PendingAck, WriteJob, WriteReport};
use crate::segment::{self, Segment};
use crate::state::{Frozen, Shared, files_of_hour, seal_due, set_memory_gauges};
use crate::wal::Wal;

pub(crate) fn writer_loop(
    shared: &Shared,
    config: &StoreConfig,
    rx: &Receiver<WriteJob>,
    mut wal: Option<Wal>,
    mut dedupe: Dedupe,
    flush_tx: &mpsc::Sender<FlushJob>,
) {
    let fsync = config.fsync == FsyncPolicy::Always;
    let mut last_flush = Instant::now();
    let mut closing = false;
    while !closing {
        let mut group = Vec::new();
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(m) => group.push(m),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => closing = true,
        }
        while group.len() < 512 {
            match rx.try_recv() {
                Ok(m) => group.push(m),
                Err(_) => break,
            }
        }
        let mut acks: Vec<PendingAck> = Vec::new();
        let mut fresh = Vec::new();
        let mut flush_acks = Vec::new();
        let files = files_of_hour(shared);
        let mut wal_failed: Option<String> = None;
        for msg in group {
            match msg {
                WriteJob::Write {
                    batch,
                    record,
                    segment,
                    keys,
                    ack,
                } => {
                    let n = batch.num_rows();
                    let f = match dedupe.filter(batch, &keys, &files) {
                        Ok(f) => f,
                        Err(e) => {
                            let _ = ack.send(Err(StoreError::Io(e.to_string())));
                            continue;
                        }
                    };
                    let report = WriteReport {
                        stored: f.batch.as_ref().map_or(0, |b| b.num_rows() as u64),
                        duplicates: f.duplicates,
                        kept: f.batch.clone(),
                    };
                    if let Some(kept) = f.batch {
                        if let Some(w) = wal.as_mut().filter(|_| wal_failed.is_none()) {
                            // Re-encode only when duplicates were dropped (rare).
                            let appended = match record {
                                Some(r) if kept.num_rows() == n => w.append(&r),
                                _ => segment::encode_record(&kept)
                                    .map_err(std::io::Error::other)
                                    .and_then(|r| w.append(&r)),
                            };
                            match appended {
                                Ok(n) => {
                                    shared.metrics.wal_bytes.inc_by(n);
                                }
                                Err(e) => wal_failed = Some(e.to_string()),
                            }
                        }
                        fresh.push(if kept.num_rows() == n {
                            *segment
                        } else {
                            Segment::plain(kept)
                        });
                    }
                    acks.push((ack, report, f.inserted));
                }
                WriteJob::Flush { ack } => flush_acks.push(ack),
            }
        }
        if let (Some(w), None, false) = (wal.as_mut(), &wal_failed, acks.is_empty())
            && let Err(e) = w.commit(fsync)
        {
            wal_failed = Some(e.to_string());
        }
        if wal_failed.is_some() {
            for (_, _, inserted) in &acks {
                dedupe.roll_back(inserted);
            }
        }
        // Set once per loop, before any ack goes out: WAL replay's keys, this group's, the
        // last sweep's drops.
        shared
            .metrics
            .duplicate_filter_keys
            .set(dedupe.len() as i64);
        if let Some(err) = wal_failed {
            tracing::error!(error = %err, "WAL write failed; refusing the group");
            for (ack, _, _) in acks {
                let _ = ack.send(Err(StoreError::Io(err.clone())));
            }
        } else if !acks.is_empty() {
            let rows: usize = fresh.iter().map(Segment::rows).sum();
            {
                let mut s = shared.state.write();
                s.plain.extend(fresh);
                s.active_rows += rows;
                set_memory_gauges(&shared.metrics, &s);
                if !s.seal_pending && seal_due(&s.plain) {
                    s.seal_pending = true;
                    let _ = flush_tx.send(FlushJob::Seal);
                }
            }
            for (ack, report, _) in acks {
                shared.metrics.rows_written.inc_by(report.stored);
                shared.metrics.duplicate_rows.inc_by(report.duplicates);
                let _ = ack.send(Ok(report));
            }
        }
        dedupe.sweep();
        // Writes are refused meanwhile, so `active` does not grow and this freezes once.
        let memory_full = shared.memory_full(config.max_memory_bytes);
        let due = {
            let s = shared.state.read();
            s.active_rows >= config.flush_max_rows
                || (s.active_rows > 0 && memory_full)
                || (s.active_rows > 0 && last_flush.elapsed() >= config.flush_interval)
                || !s.frozen.is_empty() && last_flush.elapsed() >= config.flush_interval
        };
        if due || !flush_acks.is_empty() || closing {
            last_flush = Instant::now();
            if !config.persist {
                // Nothing to write: memory is simply dropped at the row cap or the memory bound.
                let mut s = shared.state.write();
                if s.active_rows >= config.flush_max_rows || memory_full {
                    s.active.clear();
                    s.plain.clear();
                    s.plain_generation += 1;
                    s.active_rows = 0;
                    set_memory_gauges(&shared.metrics, &s);
                }
                for a in flush_acks {
                    let _ = a.send(Ok(()));
                }
                continue;
            }
            let segment = match wal.as_mut().map(Wal::rotate) {
                Some(Ok(id)) => id,
                Some(Err(e)) => {
                    tracing::error!(error = %e, "WAL rotation failed; flush postponed");
                    for a in flush_acks {
                        let _ = a.send(Err(StoreError::Io(e.to_string())));
                    }
                    continue;
                }
                None => 0,
            };
            {
                let mut s = shared.state.write();
                let mut segments = std::mem::take(&mut s.active);
                segments.append(&mut s.plain);
                s.plain_generation += 1;
                s.active_rows = 0;
                if !segments.is_empty() {
                    s.frozen.push(Frozen {
                        wal_segment: segment,
                        segments,
                    });
                }
            }
            let _ = flush_tx.send(FlushJob::Flush { acks: flush_acks });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use crate::test_support::{close, rows, write};

    #[tokio::test]
    async fn writes_past_the_memory_bound_are_refused_until_a_flush_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::new(dir.path());
        config.fsync = FsyncPolicy::Never;
        // Any row held fills it; the interval alone would not flush for an hour.
        config.max_memory_bytes = 1;
        config.flush_interval = Duration::from_secs(3600);
        let store = Store::open(config).unwrap();
        assert_eq!(write(&store, 0, 100).await.stored, 100);
        assert!(store.metrics().memory_bytes.get() > 0);
        let (batch, keys) = rows(100, 100);
        let refused = store.try_write(batch.clone(), keys.clone());
        assert!(matches!(refused, Err(StoreError::Saturated)), "{refused:?}");

        // The writer flushes at once when the bound is reached; then writes are taken again,
        // and an import's write waits for that instead of failing.
        let deadline = Instant::now() + Duration::from_secs(20);
        while store.metrics().memory_bytes.get() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(store.metrics().memory_bytes.get(), 0);
        assert_eq!(
            store.snapshot().files.len(),
            1,
            "flushed by the bound, not the interval"
        );
        assert_eq!(store.write_waiting(batch, keys).await.unwrap().stored, 100);
        let (batch, keys) = rows(200, 100);
        let waited =
            tokio::time::timeout(Duration::from_secs(20), store.write_waiting(batch, keys))
                .await
                .expect("the waiting write went through after the next flush")
                .unwrap();
        assert_eq!(waited.stored, 100);
        close(store).await;
    }
}
