//! The election, the fenced book and the delivery records against a real PostgreSQL.

use std::collections::BTreeMap;

use super::*;
use crate::catalog::Catalog;
use crate::catalog::alerts::AlertRow;
use crate::testkit::postgres::Postgres;

const PASSWORD: &str = "hunter2-leader";

fn settings(pg: &Postgres, node: &str, lease: Duration) -> ElectionSettings {
    ElectionSettings {
        node: NodeId::parse(node).unwrap(),
        catalog_url: PostgresUrl::parse(&pg.url(PASSWORD)).unwrap(),
        lease,
    }
}

async fn catalog(pg: &Postgres) -> Catalog {
    Catalog::connect(&PostgresUrl::parse(&pg.url(PASSWORD)).unwrap(), 2)
        .await
        .unwrap()
}

/// Starts a candidate's election loop; its handle aborts it (a crash: no give-up).
fn candidate(s: ElectionSettings) -> (Leader, tokio::task::JoinHandle<()>, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(None);
    let (stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(run(s, tx, stop));
    (Leader { rx }, task, stop_tx)
}

async fn wait_leading(l: &Leader, within: Duration) -> Option<i64> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Some(e) = l.leading() {
            return Some(e);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

fn row(fingerprint: &str, firing: bool, starts: i64) -> AlertRow {
    AlertRow {
        fingerprint: fingerprint.into(),
        labels: BTreeMap::from([("alertname".into(), "DyelineErrorSpike".into())]),
        annotations: BTreeMap::from([("summary".into(), "8.00% ≥ 2%".into())]),
        firing,
        starts_at_unix_nano: starts,
        ends_at_unix_nano: (!firing).then_some(starts + 5),
        last_window_end_unix_nano: starts + 60,
        window_ns: 60,
        exemplar_trace_ids: vec!["ab".repeat(16)],
    }
}

/// Two candidates: one leads, the other takes the next epoch only once the first stopped
/// renewing and its lease's deadline passed; the old epoch's writes change nothing.
#[tokio::test]
async fn one_leader_and_the_next_epoch_only_after_the_deadline() {
    let pg = Postgres::start();
    let c = catalog(&pg).await;
    let lease = Duration::from_millis(1500);
    let (a, a_task, _a_stop) = candidate(settings(&pg, "a", lease));
    assert_eq!(wait_leading(&a, Duration::from_secs(5)).await, Some(1));
    let (b, _b_task, _b_stop) = candidate(settings(&pg, "b", lease));
    // Three leases long, B never leads while A renews.
    let until = Instant::now() + lease * 3;
    while Instant::now() < until {
        assert_eq!(b.leading(), None);
        assert_eq!(a.leading(), Some(1));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = c.alert_lease().await.unwrap();
    assert_eq!((status.holder.as_deref(), status.epoch), (Some("a"), 1));
    c.store_alerts(1, &[row("f1", true, 100)]).await.unwrap();
    // A crashes (its task ends, its connection closes: the lock is free at once), its lease
    // still runs: B takes epoch 2 only after the catalog's deadline.
    let left = c.alert_lease().await.unwrap().remaining_s.unwrap();
    a_task.abort();
    let crashed = Instant::now();
    assert_eq!(wait_leading(&b, lease * 4).await, Some(2));
    let waited = crashed.elapsed().as_secs_f64();
    assert!(
        waited >= left - 0.05,
        "B led {waited:.2}s after the crash, the lease had {left:.2}s left"
    );
    // A's epoch is fenced: its writes change nothing.
    let refused = c.store_alerts(1, &[row("f1", false, 100)]).await;
    assert!(
        matches!(refused, Err(CatalogError::LeaderFenced { epoch: 1 })),
        "{refused:?}"
    );
    let refused = c.record_delivery(1, "f1-100-firing", "am").await;
    assert!(
        matches!(refused, Err(CatalogError::LeaderFenced { epoch: 1 })),
        "{refused:?}"
    );
    assert_eq!(c.alerts().await.unwrap(), vec![row("f1", true, 100)]);
    assert!(
        c.deliveries(&["f1-100-firing".into()])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(c.alert_lease().await.unwrap().holder.as_deref(), Some("b"));
}

/// A leader that stops talking (a paused process: its connection open, its lock held by the
/// session) loses its session at `idle_session_timeout`, so another takes the lease; the
/// paused one's own deadline has passed by then.
#[tokio::test]
async fn a_silent_leader_loses_the_lock_and_the_lease() {
    let pg = Postgres::start();
    let lease = Duration::from_millis(1500);
    let mut paused = Candidate {
        settings: settings(&pg, "a", lease),
        conn: None,
        locked: false,
        held: None,
        migrated: false,
    };
    let started = Instant::now();
    assert_eq!(paused.step().await.unwrap(), Some(1));
    let own_deadline = started + lease;
    // `paused` keeps its connection but sends nothing more.
    let (b, _task, _stop) = candidate(settings(&pg, "b", lease));
    assert_eq!(wait_leading(&b, lease * 4).await, Some(2));
    assert!(
        Instant::now() >= own_deadline,
        "B led before A's own deadline"
    );
    // Resumed, A finds its session gone (an error: it stops, its leadership lapsed).
    assert!(paused.step().await.is_err());
    drop(paused);
}

/// Leadership ends at its deadline on this process's clock, whatever PostgreSQL said last.
#[tokio::test]
async fn leadership_lapses_at_its_own_deadline() {
    let (tx, l) = Leader::manual();
    assert_eq!(l.leading(), None);
    tx.send(Some(Leadership {
        epoch: 7,
        deadline: Instant::now() + Duration::from_millis(200),
    }))
    .unwrap();
    assert_eq!(l.leading(), Some(7));
    let left = l.lease_left();
    assert!(left > Duration::from_millis(100) && left <= Duration::from_millis(200));
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(l.leading(), None);
    assert_eq!(l.lease_left(), Duration::ZERO);
}

/// The book round-trips (a new leader continues an alert with its start), updates replace
/// rows by fingerprint, and delivery records are per key and target, idempotent.
#[tokio::test]
async fn the_book_and_the_deliveries_round_trip() {
    let pg = Postgres::start();
    let c = catalog(&pg).await;
    assert_eq!(c.schema_version().await.unwrap(), 7);
    assert_eq!(c.alert_lease().await.unwrap().epoch, 0);
    let mut a = Candidate {
        settings: settings(&pg, "a", Duration::from_secs(30)),
        conn: None,
        locked: false,
        held: None,
        migrated: false,
    };
    assert_eq!(a.step().await.unwrap(), Some(1));
    a.held = Some(1);
    assert_eq!(a.step().await.unwrap(), Some(1), "renewed, not taken again");
    let rows = vec![row("f1", true, 100), row("f2", false, 200)];
    c.store_alerts(1, &rows).await.unwrap();
    assert_eq!(c.alerts().await.unwrap(), rows);
    let mut resolved = row("f1", false, 100);
    resolved
        .annotations
        .insert("summary".into(), "quiet".into());
    c.store_alerts(1, std::slice::from_ref(&resolved))
        .await
        .unwrap();
    assert_eq!(
        c.alerts().await.unwrap(),
        vec![resolved, row("f2", false, 200)]
    );
    c.record_delivery(1, "f1-100-firing", "am-1").await.unwrap();
    c.record_delivery(1, "f1-100-firing", "am-1").await.unwrap();
    c.record_delivery(1, "f1-100-firing", "am-2").await.unwrap();
    let keys = ["f1-100-firing".to_owned(), "f1-100-resolved".to_owned()];
    let mut got: Vec<(String, String)> = c.deliveries(&keys).await.unwrap().into_iter().collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("f1-100-firing".to_owned(), "am-1".to_owned()),
            ("f1-100-firing".to_owned(), "am-2".to_owned())
        ]
    );
    // Giving the lease up lets the next candidate take it at once.
    a.give_up().await;
    let mut b = Candidate {
        settings: settings(&pg, "b", Duration::from_secs(30)),
        conn: None,
        locked: false,
        held: None,
        migrated: false,
    };
    assert_eq!(b.step().await.unwrap(), Some(2));
}
