//! Tests of the presence rows: durable before the ack, recovered after a crash (without
//! doubling what a flush already wrote), flushed by hour, deleted by retention, read back by
//! SQL and by the read API, files of an earlier layout read with nulls.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::prelude::SessionContext;
use dyeline_model::presence::presence_schema;

use super::*;
use crate::layout::HOUR_NS;
use crate::test_support::close;
use crate::{Store, StoreConfig};

/// An hour after the epoch: the times of the rows below are nanoseconds after it.
const T0: i64 = 3 * HOUR_NS;

/// (instance, ns after [`T0`], signal).
type Row<'a> = (&'a str, i64, &'a str);

/// Rows in the presence schema; app `app-<instance>`, colour blue, no lane.
fn batch(rows: &[Row<'_>]) -> RecordBatch {
    let s = |f: &dyn Fn(&Row<'_>) -> Option<String>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    };
    let lanes = arrow::array::ListArray::new_null(
        Arc::new(arrow::datatypes::Field::new(
            "item",
            arrow::datatypes::DataType::Utf8,
            true,
        )),
        rows.len(),
    );
    RecordBatch::try_new(
        presence_schema(),
        vec![
            s(&|r| Some(r.0.to_owned())),
            s(&|r| Some(format!("app-{}", r.0))),
            s(&|r| Some(r.0.to_owned())),
            s(&|_| Some("blue".into())),
            s(&|_| Some("host.name".into())),
            s(&|_| None),
            s(&|_| None),
            Arc::new(lanes),
            Arc::new(rows.iter().map(|r| T0 + r.1).collect::<Int64Array>()),
            s(&|r| Some(r.2.to_owned())),
        ],
    )
    .unwrap()
}

fn config(dir: &std::path::Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.flush_interval = Duration::from_secs(3600);
    c
}

/// (instance, ns after T0) of every row in `lo..=hi` after T0, sorted.
fn held(log: &PresenceLog) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = log
        .instances_in(i64::MIN, i64::MAX)
        .unwrap()
        .into_iter()
        .flat_map(|p| {
            let id = p.instance_id.clone();
            p.times.into_iter().map(move |t| (id.clone(), t - T0))
        })
        .collect();
    out.sort();
    out
}

fn pairs(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(i, t)| ((*i).to_owned(), *t)).collect()
}

/// Opens the store once the dropped one's threads have let go of the directory's lock.
async fn reopen(c: StoreConfig) -> Store {
    for _ in 0..500 {
        match Store::open(c.clone()) {
            Err(StoreError::InUse { .. }) => tokio::time::sleep(Duration::from_millis(20)).await,
            other => return other.unwrap(),
        }
    }
    panic!("the dropped store never released its lock");
}

async fn sql_count(store: &Store, sql: &str) -> i64 {
    let ctx = SessionContext::new();
    ctx.register_table("presence", store.presence_table())
        .unwrap();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

#[tokio::test]
async fn acknowledged_rows_survive_a_crash_and_a_flush_does_not_double_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    let w = store
        .presence()
        .write(batch(&[("a", 1, "metrics"), ("b", 1, "metrics")]))
        .await
        .unwrap();
    assert_eq!(
        w,
        PresenceWrite {
            stored: 2,
            duplicates: 0
        }
    );
    // The same rows again (an exporter's retry) add nothing; a new time does.
    let w = store
        .presence()
        .write(batch(&[("a", 1, "metrics"), ("a", 2, "logs")]))
        .await
        .unwrap();
    assert_eq!(
        w,
        PresenceWrite {
            stored: 1,
            duplicates: 1
        }
    );
    // A crash: no close, no flush. The WAL holds what was acknowledged.
    drop(store);
    let store = reopen(config(dir.path())).await;
    assert_eq!(store.metrics().presence_replayed_rows.get(), 3);
    assert_eq!(
        held(store.presence()),
        pairs(&[("a", 1), ("a", 2), ("b", 1)])
    );
    assert_eq!(sql_count(&store, "SELECT count(*) FROM presence").await, 3);

    // Flushed: one file for the hour, the WAL emptied, the rows read from the file.
    store.flush().await.unwrap();
    let snap = store.presence().snapshot();
    assert!(snap.memory.is_empty());
    assert_eq!(snap.files.len(), 1);
    assert_eq!(snap.files[0].hour_start_unix_nano, T0);
    assert!(
        snap.files[0].path.starts_with(
            dir.path()
                .canonicalize()
                .unwrap()
                .join("presence/hour=1970-01-01T03")
        )
    );
    assert_eq!(
        held(store.presence()),
        pairs(&[("a", 1), ("a", 2), ("b", 1)])
    );
    assert_eq!(
        sql_count(
            &store,
            "SELECT count(*) FROM presence WHERE signal = 'logs' AND instance_id = 'a'"
        )
        .await,
        1
    );
    let covered = files::wal_through(&snap.files[0]);
    assert!(covered > 0);
    close(store).await;

    // A crash after the files were written but before the WAL was deleted: recovery skips
    // the segments the files hold, and replays the one after them.
    let wal_dir = dir.path().join("presence/wal");
    for id in wal::list_segments(&wal_dir).unwrap() {
        std::fs::remove_file(wal_dir.join(format!("{id:020}.wal"))).unwrap();
    }
    {
        let mut again = Wal::open_after(&wal_dir, covered - 1).unwrap();
        assert_eq!(again.active_id(), covered);
        let old = batch(&[("a", 1, "metrics"), ("b", 1, "metrics")]);
        again
            .append(&crate::segment::encode_record(&old).unwrap())
            .unwrap();
        again.rotate().unwrap();
        let new = batch(&[("c", 7, "metrics")]);
        again
            .append(&crate::segment::encode_record(&new).unwrap())
            .unwrap();
        again.commit(true).unwrap();
    }
    let store = Store::open(config(dir.path())).unwrap();
    assert_eq!(store.metrics().presence_replayed_rows.get(), 1);
    assert_eq!(
        held(store.presence()),
        pairs(&[("a", 1), ("a", 2), ("b", 1), ("c", 7)])
    );
    assert_eq!(sql_count(&store, "SELECT count(*) FROM presence").await, 4);
    // New segments are numbered past the files' so a later recovery does not skip them.
    let segments = wal::list_segments(&wal_dir).unwrap();
    assert!(
        segments.iter().all(|&id| id > covered),
        "{segments:?} after {covered}"
    );
    close(store).await;
}

#[tokio::test]
async fn rows_are_filed_by_hour_read_by_range_and_deleted_by_retention() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let store = Store::open(c.clone()).unwrap();
    store
        .presence()
        .write(batch(&[
            ("a", 5, "metrics"),
            ("a", HOUR_NS + 5, "metrics"),
            ("b", 2 * HOUR_NS, "logs"),
        ]))
        .await
        .unwrap();
    store.flush().await.unwrap();
    let files = store.presence().snapshot().files;
    let mut hours: Vec<i64> = files.iter().map(|f| f.hour_start_unix_nano - T0).collect();
    hours.sort_unstable();
    assert_eq!(hours, [0, HOUR_NS, 2 * HOUR_NS]);
    // Rows of a range: the second hour only (the others' files are not opened).
    let rows = store
        .presence()
        .instances_in(T0 + HOUR_NS, T0 + 2 * HOUR_NS - 1)
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].instance_id.as_str(),
            rows[0].service_name.as_str(),
            rows[0].times.clone()
        ),
        ("a", "app-a", vec![T0 + HOUR_NS + 5])
    );
    assert_eq!(rows[0].signals, BTreeSet::from([PresenceSignal::Metrics]));
    let q = format!(
        "SELECT count(*) FROM presence WHERE time_unix_nano >= {} AND time_unix_nano < {}",
        T0 + HOUR_NS,
        T0 + 3 * HOUR_NS
    );
    assert_eq!(sql_count(&store, &q).await, 2);
    close(store).await;

    // Retention: files written longer ago than the retention go, with their directories.
    c.retention = Duration::from_millis(1);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let store = Store::open(c).unwrap();
    assert_eq!(store.presence().snapshot().files.len(), 3);
    store.presence().apply_retention();
    assert!(store.presence().snapshot().files.is_empty());
    assert!(held(store.presence()).is_empty());
    let left: Vec<_> = std::fs::read_dir(dir.path().join("presence"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["wal"], "hour directories removed");
    close(store).await;
}

#[tokio::test]
async fn a_read_only_store_sees_the_wal_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    store
        .presence()
        .write(batch(&[("x", 3, "logs")]))
        .await
        .unwrap();
    let mut ro = config(dir.path());
    ro.read_only = true;
    let reader = Store::open(ro).unwrap();
    assert_eq!(held(reader.presence()), pairs(&[("x", 3)]));
    let e = reader
        .presence()
        .write(batch(&[("y", 3, "logs")]))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Closed), "{e:?}");
    drop(reader);
    close(store).await;
}

#[tokio::test]
async fn a_file_without_the_lane_columns_reads_them_as_null() {
    let dir = tempfile::tempdir().unwrap();
    // A file of an earlier layout: no lane columns.
    let full = batch(&[("old", 9, "metrics")]);
    let keep = [
        "instance_id",
        "service_name",
        "color",
        "color_rule",
        "time_unix_nano",
        "signal",
    ];
    let indices: Vec<usize> = keep
        .iter()
        .map(|n| full.schema().index_of(n).unwrap())
        .collect();
    let old = full.project(&indices).unwrap();
    let presence_dir = dir.path().join("presence");
    crate::file_write::write_hour_file(&presence_dir, T0, 1, 0, |f| {
        let mut w = parquet::arrow::ArrowWriter::try_new(f, old.schema(), None).unwrap();
        w.write(&old).unwrap();
        Ok(w.into_inner().unwrap())
    })
    .unwrap();
    let store = Store::open(config(dir.path())).unwrap();
    let rows = store.presence().instances_in(i64::MIN, i64::MAX).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].lane.clone(), rows[0].times.clone()),
        (None, vec![T0 + 9])
    );
    assert_eq!(
        sql_count(
            &store,
            "SELECT count(*) FROM presence WHERE lane IS NULL AND host_name IS NULL"
        )
        .await,
        1
    );
    close(store).await;
}
